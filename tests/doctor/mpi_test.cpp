#include "base/process.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace {

const char* openmpi_version = "mpirun (Open MPI) 4.1.5\n\nReport bugs to http://www.open-mpi.org/community/help/\n";

std::string ompi_info_output(const char* cuda, bool ucx)
{
    std::string out = "package:Open MPI builder Distribution\n"
                      "ompi:version:full:4.1.5\n"
                      "mca:pml:ob1:version:\"mca:2.1.0\"\n"
                      "mca:pml:cm:version:\"mca:2.1.0\"\n";
    if (ucx) {
        out += "mca:pml:ucx:version:\"mca:2.1.0\"\n"
               "mca:pml:ucx:param:pml_ucx_verbose:value:0\n";
    }
    out += "mca:opal:base:param:opal_built_with_cuda_support:value:false\n";
    if (cuda != nullptr) {
        out += std::string("mca:mpi:base:param:mpi_built_with_cuda_support:value:") + cuda + "\n";
        out += "mca:mpi:base:param:mpi_built_with_cuda_support:source:default\n";
    }
    return out;
}

// A bin directory of fake commands, put on the collector's PATH (and nothing else).
class MpiCollector : public ::testing::Test {
protected:
    MpiCollector() { std::filesystem::create_directories(m_dir / "bin"); }

    /// A shell script `name` that prints `output` and exits with `code`.
    void command(const std::string& name, const std::string& output, int code = 0)
    {
        std::filesystem::create_directories(m_dir / "out");
        std::ofstream(m_dir / "out" / name) << output;
        script(name, tool("cat") + " '" + (m_dir / "out" / name).string() + "'\nexit " + std::to_string(code));
    }
    void script(const std::string& name, const std::string& body)
    {
        auto file = m_dir / "bin" / name;
        std::ofstream(file) << "#!/bin/sh\n" << body << "\n";
        std::filesystem::permissions(file, std::filesystem::perms::owner_all);
    }
    /// A real tool by absolute path: the collector's PATH holds the fakes only, so that a real
    /// ompi_info or ucx_info on this machine is never found.
    static std::string tool(const char* name)
    {
        return base::find_executable(name, std::getenv("PATH")).value_or(name);
    }
    nlohmann::json collect(std::chrono::milliseconds timeout = std::chrono::seconds(10))
    {
        doctor::engine::CollectContext ctx;
        ctx.env = {{"PATH", (m_dir / "bin").string()}, {"HOME", "/nonexistent"}};
        ctx.timeout = timeout;
        return test_support::collector_named("mpi").collect(ctx);
    }
    std::vector<doctor::engine::Finding> judge(const nlohmann::json& facts)
    {
        return judge_one("mpi", {{"mpi", facts}});
    }

    test_support::TempDir m_dir;
};

} // namespace

TEST_F(MpiCollector, CudaAwareOpenMpiWithUcx)
{
    command("mpirun", openmpi_version);
    command("ompi_info", ompi_info_output("true", true));
    command("ucx_info", "# Library version: 1.15.0\n# Library path: /usr/lib/libucs.so.0\n");
    auto facts = collect();
    EXPECT_EQ(facts["mpirun"], (m_dir / "bin/mpirun").string());
    EXPECT_EQ(facts["mpirun_version"]["flavour"], "Open MPI");
    EXPECT_EQ(facts["mpirun_version"]["version"], "4.1.5");
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], true);
    EXPECT_EQ(facts["ompi_info"]["cuda_support_from"], "mpi_built_with_cuda_support") << "the mpi line wins";
    EXPECT_EQ(facts["ompi_info"]["pml_ucx"], true);
    EXPECT_EQ(facts["ompi_info"]["version"], "4.1.5");
    EXPECT_EQ(facts["ucx"]["version"], "1.15.0");
    EXPECT_FALSE(facts.contains("error"));

    auto findings = judge(facts);
    EXPECT_EQ(codes_with(findings, Severity::pass), (std::vector<std::string>{"mpi.found", "mpi.cuda_aware"}));
    EXPECT_NE(findings[0].message.find("Open MPI 4.1.5"), std::string::npos) << findings[0].message;
    EXPECT_NE(findings[0].message.find("UCX 1.15.0"), std::string::npos) << findings[0].message;
    EXPECT_NE(findings[1].message.find("pml ucx"), std::string::npos) << findings[1].message;
}

TEST_F(MpiCollector, OpenMpiWithoutCudaWarns)
{
    command("mpirun", openmpi_version);
    command("ompi_info", ompi_info_output("false", false));
    auto facts = collect();
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], false);
    EXPECT_EQ(facts["ompi_info"]["pml_ucx"], false);
    EXPECT_TRUE(facts["ucx"]["path"].is_null());
    auto findings = judge(facts);
    const auto* f = find_code(findings, "mpi.no_cuda");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("NCCL-only jobs are unaffected"), std::string::npos);
    EXPECT_FALSE(f->remedy.empty());
}

TEST_F(MpiCollector, OpenMpi4OnlyPrintsTheOpalParameter)
{
    command("mpirun", openmpi_version);
    command("ompi_info", ompi_info_output(nullptr, true));
    auto facts = collect();
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], false);
    EXPECT_EQ(facts["ompi_info"]["cuda_support_from"], "opal_built_with_cuda_support");
}

TEST_F(MpiCollector, CudaComponentsAreEnoughWithoutTheParameter)
{
    command("mpirun", openmpi_version);
    command("ompi_info", "ompi:version:full:5.0.3\nmca:accelerator:cuda:version:\"mca:2.1.0\"\n");
    auto facts = collect();
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], true);
    EXPECT_NE(find_code(judge(facts), "mpi.cuda_aware"), nullptr);
}

TEST_F(MpiCollector, OmpiInfoNextToMpirunComesFirst)
{
    test_support::TempDir other;
    std::filesystem::create_directories(other / "prefix/bin");
    auto mpirun = other / "prefix/bin/mpirun";
    std::ofstream(mpirun) << "#!/bin/sh\necho 'mpirun (Open MPI) 5.0.3'\n";
    std::filesystem::permissions(mpirun, std::filesystem::perms::owner_all);
    auto ompi_info = other / "prefix/bin/ompi_info";
    std::ofstream(ompi_info) << "#!/bin/sh\necho 'mca:mpi:base:param:mpi_built_with_cuda_support:value:true'\n";
    std::filesystem::permissions(ompi_info, std::filesystem::perms::owner_all);
    command("ompi_info", ompi_info_output("false", false)); // a different installation in PATH
    doctor::engine::CollectContext ctx;
    ctx.env = {{"PATH", (m_dir / "bin").string() + ":" + (other / "prefix/bin").string()}};
    auto facts = test_support::collector_named("mpi").collect(ctx);
    EXPECT_EQ(facts["ompi_info"]["path"], ompi_info.string());
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], true);
}

TEST_F(MpiCollector, ComponentFilesAnswerWithoutRunningOmpiInfo)
{
    // A build with dynamic components keeps them as files: what ompi_info would say (in some
    // 0.2 s, as it opens every component) is read from their names. Two layouts: a source
    // build's PREFIX/lib/openmpi, and Debian's PREFIX/lib/<triplet>/openmpi/lib/openmpi3.
    const auto marker = m_dir / "ompi_info_ran";
    script("ompi_info",
        "touch '" + marker.string() + "'\necho 'mca:mpi:base:param:mpi_built_with_cuda_support:value:false'");
    struct Layout {
        std::string components;
        std::vector<std::string> files;
        std::string cuda_from;
    };
    const Layout layouts[] = {
        {"prefix/lib/openmpi", {"mca_pml_ob1.so", "mca_pml_ucx.so", "mca_btl_smcuda.so", "mca_btl_tcp.so"},
            "mca_btl_smcuda.so"},
        {"prefix/lib/x86_64-linux-gnu/openmpi/lib/openmpi3",
            {"mca_pml_ob1.so", "mca_pml_cm.so", "../libmca_common_cuda.so.40"}, "libmca_common_cuda.so.40"},
    };
    for (const Layout& layout : layouts) {
        test_support::TempDir install;
        std::filesystem::create_directories(install / "prefix/bin");
        std::filesystem::create_directories(install / layout.components);
        for (const auto& file : layout.files) {
            std::ofstream(install / layout.components / file) << "";
        }
        const auto mpirun = install / "prefix/bin/mpirun";
        std::ofstream(mpirun) << "#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n";
        std::filesystem::permissions(mpirun, std::filesystem::perms::owner_all);
        doctor::engine::CollectContext ctx;
        ctx.env = {{"PATH", (install / "prefix/bin").string() + ":" + (m_dir / "bin").string()}};
        auto facts = test_support::collector_named("mpi").collect(ctx);
        const auto& info = facts["ompi_info"];
        EXPECT_EQ(info["source"], "components") << layout.components;
        EXPECT_EQ(info["path"], std::filesystem::canonical(install / layout.components).string());
        EXPECT_EQ(info["cuda_support"], true) << layout.components;
        EXPECT_NE(info["cuda_support_from"].get<std::string>().find(layout.cuda_from), std::string::npos) << info;
        EXPECT_EQ(info["pml_ucx"], layout.components == "prefix/lib/openmpi");
        EXPECT_EQ(info["version"], "4.1.4");
        EXPECT_FALSE(std::filesystem::exists(marker)) << "ompi_info was run";
        EXPECT_NE(find_code(judge(facts), "mpi.cuda_aware"), nullptr);
    }
    // Without a CUDA component: no CUDA support, as Debian's own Open MPI.
    test_support::TempDir plain;
    std::filesystem::create_directories(plain / "prefix/bin");
    std::filesystem::create_directories(plain / "prefix/lib64/openmpi");
    std::ofstream(plain / "prefix/lib64/openmpi/mca_pml_ob1.so") << "";
    std::ofstream(plain / "prefix/bin/mpirun") << "#!/bin/sh\necho 'mpirun (Open MPI) 5.0.3'\n";
    std::filesystem::permissions(plain / "prefix/bin/mpirun", std::filesystem::perms::owner_all);
    doctor::engine::CollectContext ctx;
    ctx.env = {{"PATH", (plain / "prefix/bin").string()}};
    auto facts = test_support::collector_named("mpi").collect(ctx);
    EXPECT_EQ(facts["ompi_info"]["cuda_support"], false);
    EXPECT_NE(find_code(judge(facts), "mpi.no_cuda"), nullptr);
}

TEST_F(MpiCollector, NoOmpiInfoIsSkippedNotPassed)
{
    command("mpirun", openmpi_version);
    auto facts = collect();
    EXPECT_TRUE(facts["ompi_info"]["path"].is_null());
    auto findings = judge(facts);
    const auto* f = find_code(findings, "mpi.cuda_unknown");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::skip);
    EXPECT_NE(f->message.find("ompi_info not found"), std::string::npos);
    EXPECT_NE(find_code(findings, "mpi.found"), nullptr);
}

TEST_F(MpiCollector, OmpiInfoWithoutTheLineIsSkipped)
{
    command("mpirun", openmpi_version);
    command("ompi_info", "garbage\n", 1);
    auto findings = judge(collect());
    const auto* f = find_code(findings, "mpi.cuda_unknown");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("exit status 1"), std::string::npos) << f->message;
}

TEST_F(MpiCollector, MpichAndIntelMpiAreNotOpenMpi)
{
    command("mpirun", "HYDRA build details:\n    Version:                                 4.0.2\n");
    auto facts = collect();
    EXPECT_EQ(facts["mpirun_version"]["flavour"], "MPICH");
    EXPECT_FALSE(facts.contains("ompi_info")) << "ompi_info is only asked about Open MPI";
    auto findings = judge(facts);
    const auto* f = find_code(findings, "mpi.not_openmpi");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("MPICH, not Open MPI"), std::string::npos);

    command("mpirun", "Intel(R) MPI Library for Linux* OS, Version 2021.9 Build 20230307 (id: d82b3071db)\n");
    findings = judge(collect());
    f = find_code(findings, "mpi.not_openmpi");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("Intel MPI"), std::string::npos);
    EXPECT_NE(find_code(findings, "mpi.found")->message.find("2021.9"), std::string::npos);
}

TEST_F(MpiCollector, NoMpirunWarns)
{
    auto facts = collect();
    EXPECT_TRUE(facts["mpirun"].is_null());
    auto findings = judge(facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "mpi.not_found");
    EXPECT_EQ(findings[0].severity, Severity::warn);
    EXPECT_NE(findings[0].message.find("torchrun"), std::string::npos);
    EXPECT_NE(findings[0].message.find((m_dir / "bin").string()), std::string::npos) << "names the PATH searched";
}

TEST_F(MpiCollector, AHangingMpirunIsKilledWithinTheCollectorsDeadline)
{
    script("mpirun", "exec " + tool("sleep") + " 30");
    const auto start = std::chrono::steady_clock::now();
    auto facts = collect(std::chrono::milliseconds(1000));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
    EXPECT_TRUE(facts["mpirun_version"]["timed_out"].get<bool>());
    auto findings = judge(facts);
    const auto* f = find_code(findings, "mpi.unresponsive");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("timed out"), std::string::npos) << f->message;
}

TEST_F(MpiCollector, MpirunPrintingNothingUsefulIsUnresponsive)
{
    command("mpirun", "Segmentation fault\n", 139);
    auto findings = judge(collect());
    const auto* f = find_code(findings, "mpi.unresponsive");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("exit status 139"), std::string::npos) << f->message;
}

TEST(MpiRule, GarbageFactsNeverPass)
{
    auto findings = judge_one("mpi", {{"mpi", {{"mpirun", "/usr/bin/mpirun"}}}});
    EXPECT_TRUE(codes_with(findings, Severity::pass).empty());
    EXPECT_NE(find_code(findings, "mpi.unresponsive"), nullptr);
    findings = judge_one("mpi",
        {{"mpi",
            {{"mpirun", "/usr/bin/mpirun"}, {"mpirun_version", {{"flavour", "Open MPI"}}},
                {"ompi_info", {{"path", "/x"}}}}}});
    EXPECT_NE(find_code(findings, "mpi.cuda_unknown"), nullptr);
}

TEST(MpiRule, FactsNotAsTheCollectorWritesThemAreBadInput)
{
    EXPECT_EQ(test_support::error_of([] {
        test_support::facts_of({{"mpi",
            {{"mpirun", "/usr/bin/mpirun"}, {"mpirun_version", {{"flavour", "Open MPI"}}},
                {"ompi_info", {{"path", "/x"}, {"cuda_support", "yes"}}}}}});
    }),
        "the test's facts: the mpi facts are not as gpudoctor snapshot writes them (ompi_info.cuda_support is "
        "'yes', expected true or false); write the snapshot again with 'gpudoctor snapshot > node.json'");
}

TEST(MpiRule, EveryCodeIsDocumented)
{
    const auto& probe = test_support::probe_named("mpi");
    std::vector<std::string> documented;
    for (const auto& c : probe.codes) {
        documented.push_back(c.code);
    }
    const nlohmann::json ompi = {{"flavour", "Open MPI"}, {"version", "4.1.5"}};
    for (const auto& facts : std::vector<nlohmann::json>{{{"mpirun", nullptr}},
             {{"mpirun", "/m"}, {"mpirun_version", {{"timed_out", true}}}},
             {{"mpirun", "/m"}, {"mpirun_version", {{"flavour", "MPICH"}}}},
             {{"mpirun", "/m"}, {"mpirun_version", ompi}, {"ompi_info", {{"cuda_support", true}}}},
             {{"mpirun", "/m"}, {"mpirun_version", ompi}, {"ompi_info", {{"cuda_support", false}}}},
             {{"mpirun", "/m"}, {"mpirun_version", ompi}}}) {
        for (const auto& f : judge_one("mpi", {{"mpi", facts}})) {
            EXPECT_NE(std::find(documented.begin(), documented.end(), f.code), documented.end()) << f.code;
            if (f.severity == Severity::warn || f.severity == Severity::fail) {
                EXPECT_FALSE(f.remedy.empty()) << f.code;
            }
        }
    }
}
