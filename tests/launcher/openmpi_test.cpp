#include "launcher/openmpi.hpp"
#include "probes/error.hpp"
#include "probes/mpi_flavour.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using test_support::TempDir;

TEST(OpenMpi, FlavourFromVersionOutput)
{
    EXPECT_EQ(probes::mpi_flavour("mpirun (Open MPI) 4.1.4\n"), "Open MPI");
    EXPECT_EQ(probes::mpi_flavour("mpirun (OpenRTE) 3.1.0\n"), "Open MPI");
    EXPECT_EQ(probes::mpi_flavour("HYDRA build details:\n    Version: 4.1\n"), "MPICH");
    EXPECT_EQ(probes::mpi_flavour("Intel(R) MPI Library for Linux* OS, Version 2021.9"), "Intel MPI");
    EXPECT_EQ(probes::mpi_flavour("something else"), "unknown");
}

TEST(OpenMpi, RootOnlyWhenTheUserSaidSo)
{
    EXPECT_TRUE(launcher::root_allowed(true, nullptr, nullptr));
    EXPECT_TRUE(launcher::root_allowed(false, "1", "1"));
    EXPECT_FALSE(launcher::root_allowed(false, "1", nullptr));
    EXPECT_FALSE(launcher::root_allowed(false, nullptr, "1"));
    EXPECT_FALSE(launcher::root_allowed(false, "0", "1"));
}

TEST(OpenMpi, CommandLine)
{
    launcher::JobPlan job;
    job.ranks.resize(3);
    job.hosts = {{"n01", 2}, {"n02", 1}};
    launcher::LaunchOptions options;
    options.exports = {"NCCL_DEBUG=INFO"};
    auto argv = launcher::openmpi_command(
        "/usr/bin/mpirun", job, options, true, {"PATH"}, "/opt/gpurun-rank", {"--", "python", "a b"});
    EXPECT_EQ(argv,
        (std::vector<std::string>{"/usr/bin/mpirun", "-np", "3", "--bind-to", "none", "--map-by", "slot", "-H",
            "n01:2,n02:1", "--allow-run-as-root", "-x", "PATH", "-x", "NCCL_DEBUG=INFO", "/opt/gpurun-rank", "--",
            "python", "a b"}));
    auto no_root = launcher::openmpi_command("mpirun", job, options, false, {}, "h", {"--", "p"});
    EXPECT_EQ(std::count(no_root.begin(), no_root.end(), "--allow-run-as-root"), 0);
}

TEST(OpenMpi, FindsMpirunOnPathAndRefusesOtherMpis)
{
    TempDir dir;
    auto fake = dir / "mpirun";
    std::ofstream(fake) << "#!/bin/sh\necho 'HYDRA build details:'\n";
    std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
    try {
        launcher::find_openmpi(dir.path().c_str());
        ADD_FAILURE() << "accepted MPICH";
    } catch (const probes::Error& e) {
        EXPECT_NE(std::string(e.what()).find("is MPICH, not Open MPI"), std::string::npos) << e.what();
    }
    std::ofstream(fake) << "#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n";
    EXPECT_EQ(launcher::find_openmpi(dir.path().c_str()).flavour, "Open MPI");
    auto empty = dir / "empty";
    std::filesystem::create_directory(empty);
    try {
        launcher::find_openmpi(empty.c_str());
        ADD_FAILURE();
    } catch (const probes::Error& e) {
        EXPECT_NE(std::string(e.what()).find("mpirun not found in PATH"), std::string::npos);
    }
}
