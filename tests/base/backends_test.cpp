#include "base/error.hpp"
#include "base/launchers/backends.hpp"
#include "base/mpi_flavour.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_elf.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <memory>

using test_support::error_of;
using test_support::TempDir;

TEST(OpenMpi, FlavourFromVersionOutput)
{
    EXPECT_EQ(base::mpi_flavour("mpirun (Open MPI) 4.1.4\n"), "Open MPI");
    EXPECT_EQ(base::mpi_flavour("mpirun (OpenRTE) 3.1.0\n"), "Open MPI");
    EXPECT_EQ(base::mpi_flavour("HYDRA build details:\n    Version: 4.1\n"), "MPICH");
    EXPECT_EQ(base::mpi_flavour("Intel(R) MPI Library for Linux* OS, Version 2021.9"), "Intel MPI");
    EXPECT_EQ(base::mpi_flavour("something else"), "unknown");
}

TEST(OpenMpi, RootOnlyWhenTheUserSaidSo)
{
    EXPECT_TRUE(base::launchers::root_allowed(true, nullptr, nullptr));
    EXPECT_TRUE(base::launchers::root_allowed(false, "1", "1"));
    EXPECT_FALSE(base::launchers::root_allowed(false, "1", nullptr));
    EXPECT_FALSE(base::launchers::root_allowed(false, nullptr, "1"));
    EXPECT_FALSE(base::launchers::root_allowed(false, "0", "1"));
}

namespace {

using base::launchers::Launcher;
using base::launchers::LauncherKind;

base::launchers::LaunchRequest request(std::vector<base::launchers::HostSlots> hosts)
{
    base::launchers::LaunchRequest r;
    for (const auto& h : hosts) {
        r.ranks += h.slots.value_or(1);
    }
    r.hosts = std::move(hosts);
    r.hosts_given = true;
    r.env = {"PATH", "NCCL_DEBUG=INFO", "GPUKIT_X"};
    r.launcher_args = {"--extra", "a b"};
    r.helper = "/opt/gpurun-rank";
    r.helper_args = {"--", "python", "a b"};
    return r;
}

// A program in `dir` that prints `version` for --version.
void fake_program(const std::filesystem::path& dir, const std::string& name, const std::string& version)
{
    std::ofstream(dir / name) << "#!/bin/sh\necho '" << version << "'\n";
    std::filesystem::permissions(dir / name, std::filesystem::perms::owner_all);
}

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars)
{
    auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
    return [shared](const char* name) -> const char* {
        auto it = shared->find(name);
        return it == shared->end() ? nullptr : it->second.c_str();
    };
}

} // namespace

TEST(OpenMpi, CommandLine)
{
    const std::vector<base::launchers::HostSlots> job{{"n01", 2}, {"n02", 1}};
    auto r = request(job);
    r.allow_root = true;
    auto argv =
        base::launchers::launcher_command(Launcher{LauncherKind::openmpi, "/usr/bin/mpirun", "Open MPI", ""}, r);
    EXPECT_EQ(argv,
        (std::vector<std::string>{"mpirun", "-np", "3", "--bind-to", "none", "--map-by", "slot", "-H", "n01:2,n02:1",
            "--allow-run-as-root", "-x", "PATH", "-x", "NCCL_DEBUG=INFO", "-x", "GPUKIT_X", "--extra", "a b",
            "/opt/gpurun-rank", "--", "python", "a b"}));
    r.allow_root = false;
    auto no_root = base::launchers::launcher_command(Launcher{LauncherKind::openmpi, "mpirun", "Open MPI", ""}, r);
    EXPECT_EQ(std::count(no_root.begin(), no_root.end(), "--allow-run-as-root"), 0);
}

TEST(Hydra, EqualHostsUsePpnAndSwitchOffBinding)
{
    const std::vector<base::launchers::HostSlots> job{{"n01", 2}, {"n02", 2}};
    auto argv =
        base::launchers::launcher_command(Launcher{LauncherKind::hydra, "/usr/bin/mpiexec", "MPICH", ""}, request(job));
    EXPECT_EQ(argv,
        (std::vector<std::string>{"mpiexec", "-n", "4", "-ppn", "2", "-hosts", "n01,n02", "-bind-to", "none", "-genv",
            "NCCL_DEBUG", "INFO", "-genvlist", "PATH,GPUKIT_X", "--extra", "a b", "/opt/gpurun-rank", "--", "python",
            "a b"}));
    auto intel =
        base::launchers::launcher_command(Launcher{LauncherKind::hydra, "mpiexec", "Intel MPI", ""}, request(job));
    EXPECT_EQ(std::count(intel.begin(), intel.end(), "-bind-to"), 0);
    const std::vector<std::string> no_pinning{"-genv", "I_MPI_PIN", "0"};
    EXPECT_NE(std::search(intel.begin(), intel.end(), no_pinning.begin(), no_pinning.end()), intel.end())
        << "Intel MPI pins in MPI_Init unless told not to";
}

TEST(Hydra, UnequalHostsGetOneSectionEach)
{
    const std::vector<base::launchers::HostSlots> job{{"n01", 3}, {"n02", 1}};
    auto argv = base::launchers::launcher_command(Launcher{LauncherKind::hydra, "mpiexec", "MPICH", ""}, request(job));
    EXPECT_EQ(argv,
        (std::vector<std::string>{"mpiexec", "-bind-to", "none", "-genv", "NCCL_DEBUG", "INFO", "-genvlist",
            "PATH,GPUKIT_X", "--extra", "a b", "-n", "3", "-hosts", "n01", "/opt/gpurun-rank", "--", "python", "a b",
            ":", "-n", "1", "-hosts", "n02", "/opt/gpurun-rank", "--", "python", "a b"}));
}

TEST(Srun, SetsValuesThroughEnvAndNamesTheNodes)
{
    const std::vector<base::launchers::HostSlots> job{{"gpu1", 4}, {"gpu2", 4}};
    auto r = request(job);
    auto argv = base::launchers::launcher_command(Launcher{LauncherKind::srun, "/usr/bin/srun", "Slurm", ""}, r);
    EXPECT_EQ(argv,
        (std::vector<std::string>{"/usr/bin/env", "NCCL_DEBUG=INFO", "srun", "--nodes", "2", "--ntasks", "8",
            "--ntasks-per-node", "4", "--cpu-bind=none", "--export=ALL", "--kill-on-bad-exit=1", "--nodelist",
            "gpu1,gpu2", "--extra", "a b", "/opt/gpurun-rank", "--", "python", "a b"}));
    r.env = {"PATH"};
    r.hosts_given = false;
    auto plain = base::launchers::launcher_command(Launcher{LauncherKind::srun, "srun", "Slurm", ""}, r);
    EXPECT_EQ(plain.front(), "srun") << "nothing to set: no env in front";
    EXPECT_EQ(std::count(plain.begin(), plain.end(), "--nodelist"), 0) << "srun picks the nodes of its allocation";
}

TEST(Srun, RefusesUnequalRanksPerNode)
{
    const std::vector<base::launchers::HostSlots> job{{"gpu1", 8}, {"gpu2", 4}};
    try {
        base::launchers::launcher_command(Launcher{LauncherKind::srun, "srun", "Slurm", ""}, request(job));
        ADD_FAILURE() << "accepted 8+4";
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()),
            "srun places the same number of ranks on every node, and this plan has gpu1:8,gpu2:4; give -np a multiple "
            "of the ranks per node, equal slots (-H h1:N,h2:N), or pass --launcher openmpi");
    }
}

TEST(FindLauncher, AutoPrefersSrunInsideASlurmJob)
{
    TempDir dir;
    fake_program(dir.path(), "srun", "slurm 23.02.7");
    fake_program(dir.path(), "mpirun", "mpirun (Open MPI) 4.1.4");
    auto in_job = base::launchers::find_launcher(
        LauncherKind::automatic, env_of({{"PATH", dir.path().string()}, {"SLURM_JOB_ID", "42"}}));
    EXPECT_EQ(in_job.kind, LauncherKind::srun);
    EXPECT_EQ(in_job.reason, "inside Slurm job 42");
    auto outside = base::launchers::find_launcher(LauncherKind::automatic, env_of({{"PATH", dir.path().string()}}));
    EXPECT_EQ(outside.kind, LauncherKind::openmpi);
    EXPECT_EQ(outside.reason, "mpirun is Open MPI");
    auto told = base::launchers::find_launcher(
        LauncherKind::openmpi, env_of({{"PATH", dir.path().string()}, {"SLURM_JOB_ID", "42"}}));
    EXPECT_EQ(told.kind, LauncherKind::openmpi) << "an explicit --launcher wins over the allocation";
}

TEST(FindLauncher, AutoTakesHydraForMpichAndIntelMpi)
{
    TempDir dir;
    fake_program(dir.path(), "mpirun", "HYDRA build details:");
    fake_program(dir.path(), "mpiexec", "HYDRA build details:");
    auto mpich = base::launchers::find_launcher(LauncherKind::automatic, env_of({{"PATH", dir.path().string()}}));
    EXPECT_EQ(mpich.kind, LauncherKind::hydra);
    EXPECT_EQ(mpich.path, (dir / "mpiexec").string());
    EXPECT_EQ(mpich.flavour, "MPICH");
    fake_program(dir.path(), "mpirun", "Intel(R) MPI Library for Linux* OS, Version 2021.10");
    fake_program(dir.path(), "mpiexec", "Intel(R) MPI Library for Linux* OS, Version 2021.10");
    auto intel = base::launchers::find_launcher(LauncherKind::automatic, env_of({{"PATH", dir.path().string()}}));
    EXPECT_EQ(intel.flavour, "Intel MPI");
    EXPECT_EQ(intel.reason, "mpirun is Intel MPI");
}

TEST(FindLauncher, SaysWhatIsMissingOrWrong)
{
    TempDir dir;
    fake_program(dir.path(), "mpirun", "HYDRA build details:");
    fake_program(dir.path(), "mpiexec", "mpiexec (Open MPI) 4.1.4");
    auto path = env_of({{"PATH", dir.path().string()}});
    EXPECT_NE(
        error_of([&] { base::launchers::find_launcher(LauncherKind::openmpi, path); }).find("is MPICH, not Open MPI"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        base::launchers::find_launcher(LauncherKind::hydra, path);
    }).find("is Open MPI, not MPICH's or Intel MPI's Hydra"),
        std::string::npos);
    EXPECT_NE(
        error_of([&] { base::launchers::find_launcher(LauncherKind::srun, path); }).find("srun not found in PATH"),
        std::string::npos);
    fake_program(dir.path(), "mpirun", "something else 1.0");
    EXPECT_NE(
        error_of([&] { base::launchers::find_launcher(LauncherKind::automatic, path); }).find("is an unknown MPI"),
        std::string::npos);
    auto empty = env_of({{"PATH", (dir / "none").string()}});
    EXPECT_NE(error_of([&] {
        base::launchers::find_launcher(LauncherKind::automatic, empty);
    }).find("mpirun not found in PATH"),
        std::string::npos);
    const auto local = base::launchers::find_launcher(LauncherKind::automatic, empty, true);
    EXPECT_EQ(local.kind, LauncherKind::local) << "no MPI and every rank here: gpurun's own";
    EXPECT_EQ(local.reason, "no mpirun in PATH, and every rank is on this node");
}

TEST(Local, TheHelperForksTheRanksAndValuesAreSetThroughEnv)
{
    auto r = request({{"localhost", 2}});
    r.launcher_args.clear();
    r.grace_seconds = 2.5;
    const Launcher local{LauncherKind::local, "", "", "--launcher local"};
    EXPECT_EQ(base::launchers::launcher_command(local, r),
        (std::vector<std::string>{"/usr/bin/env", "NCCL_DEBUG=INFO", "/opt/gpurun-rank", "--launch-local", "2",
            "--grace", "2.5", "--", "/opt/gpurun-rank", "--", "python", "a b"}));
    r.launcher_args = {"--extra"};
    EXPECT_NE(error_of([&] { base::launchers::launcher_command(local, r); }).find("takes none"), std::string::npos);
}

TEST(Backends, OneRowPerLauncherEachWithItsWordProgramAndCommand)
{
    std::vector<std::string> words;
    for (const auto& b : base::launchers::table()) {
        words.emplace_back(b.word);
        EXPECT_EQ(&base::launchers::row(b.kind), &b);
        ASSERT_NE(b.command, nullptr) << b.word;
    }
    EXPECT_EQ(words, (std::vector<std::string>{"openmpi", "mpich", "srun", "local"}));
    EXPECT_TRUE(base::launchers::row(LauncherKind::openmpi).refuses_root);
    EXPECT_FALSE(base::launchers::row(LauncherKind::srun).refuses_root);
    EXPECT_STREQ(base::launchers::row(LauncherKind::hydra).nsys_mpi_impl, "mpich");
    EXPECT_THROW(base::launchers::row(LauncherKind::automatic), base::Error);
    EXPECT_EQ(base::launchers::launcher_title(Launcher{LauncherKind::hydra, "mpiexec", "", ""}),
        "MPICH or Intel MPI mpiexec (Hydra)");
    EXPECT_EQ(base::launchers::launcher_title(Launcher{LauncherKind::hydra, "mpiexec", "Intel MPI", ""}),
        "Intel MPI mpiexec (Hydra)");
    EXPECT_EQ(base::launchers::launcher_title(Launcher{LauncherKind::srun, "srun", "Slurm", ""}), "Slurm srun");
}

TEST(Srun, MpiPluginsAsSlurmListsThem)
{
    // `srun --mpi=list` of Debian 12's slurm-wlm 22.05.
    const std::string output = "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\n"
                               "specific pmix plugin versions available: pmix_v4\n";
    EXPECT_EQ(base::launchers::parse_mpi_plugins(output), (std::vector<std::string>{"none", "pmi2", "pmix"}));
    EXPECT_TRUE(base::launchers::parse_mpi_plugins("srun: error: x\n").empty());
}

TEST(Srun, TheMpiPluginFollowsTheLibraryTheProgramNeeds)
{
    using base::launchers::srun_mpi_for;
    EXPECT_EQ(base::launchers::elf_needed(test_support::tiny_elf({"libc.so.6", "libmpi.so.40"})),
        (std::vector<std::string>{"libc.so.6", "libmpi.so.40"}));
    EXPECT_EQ(srun_mpi_for(test_support::tiny_elf({"libc.so.6", "libmpi.so.40"})), "pmix") << "Open MPI";
    EXPECT_EQ(srun_mpi_for(test_support::tiny_elf({"libmpi.so.12"})), "pmi2") << "MPICH, Intel MPI";
    EXPECT_EQ(srun_mpi_for(test_support::tiny_elf({"libmpich.so.12"})), "pmi2");
    EXPECT_EQ(srun_mpi_for(test_support::tiny_elf({"libc.so.6"})), "");
    // A program that only speaks of an MPI library (a checker that looks for it) needs none.
    EXPECT_EQ(srun_mpi_for(test_support::tiny_elf({"libc.so.6"}, "look for libmpi.so.40 and libmpi.so.12")), "");
    EXPECT_EQ(srun_mpi_for("#!/usr/bin/python3\nlibmpi.so.40"), "") << "not an ELF file";
    const std::string whole = test_support::tiny_elf({"libmpi.so.40"});
    for (std::size_t cut : {std::size_t{10}, std::size_t{100}, whole.size() - 3}) {
        EXPECT_EQ(srun_mpi_for(whole.substr(0, cut)), "") << "cut at " << cut;
    }
    // This test program, which holds those names in its text: what it needs, as readelf -d says.
    std::ifstream self("/proc/self/exe", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
    const auto needed = base::launchers::elf_needed(bytes);
    EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end());
    EXPECT_NE(bytes.find("libmpi.so.40"), std::string::npos);
    EXPECT_EQ(srun_mpi_for(bytes), "");
}
