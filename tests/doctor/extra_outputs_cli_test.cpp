// The real gpudoctor's extra outputs: --prometheus FILE, --junit FILE and --quiet of check,
// nccl-log and profile, and check's --fail-summary, with the fake NVML, beside --json and --from,
// and when a file cannot be written.
#include "base/process.hpp"
#include "tests/support/fake_gpu_node.hpp"
#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using test_support::EnvChanges;
using test_support::file_text;
using test_support::names_in;
using test_support::TempDir;

class ExtraOutputs : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_umask = umask(022);
        std::filesystem::create_directories(m_dir / "root/proc");
        std::filesystem::create_directories(m_dir / "out");
        auto node = test_support::healthy_gpu_node(2);
        std::ofstream(m_dir / "healthy.json") << node.dump();
        node["gpus"][1]["ecc"]["uncorrected"] = 4;
        node["gpus"][1]["ecc"]["uncorrected_volatile"] = 4;
        node["gpus"][0]["clock_event_reasons"] = 0x40;
        std::ofstream(m_dir / "ecc.json") << node.dump();
    }
    void TearDown() override { umask(m_umask); }

    test_support::Finished gpudoctor(std::vector<std::string> args, const std::string& fixture = "ecc.json")
    {
        std::vector<std::string> argv = {GPUDOCTOR_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--only", "driver,gpus", "--sysroot", path("root")});
        if (args.front() == "check") {
            argv.insert(argv.end(), {"--expect-gpus", "2"});
        }
        EnvChanges env = {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", (m_dir / fixture).string()},
            {"NO_COLOR", "1"}};
        return test_support::run(argv, env, std::chrono::seconds(30));
    }

    std::string path(const std::string& name) const { return (m_dir / name).string(); }

    TempDir m_dir;
    mode_t m_umask = 0;
};

TEST_F(ExtraOutputs, BothFilesBesideTheJsonReport)
{
    auto r = gpudoctor({"check", "--json", "--prometheus", path("out/node.prom"), "--junit", path("out/junit.xml")});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "");
    // Standard output is still the JSON report.
    auto report = nlohmann::json::parse(r.out);
    EXPECT_EQ(report["exit_code"], 1);
    EXPECT_EQ(names_in(m_dir / "out"), (std::vector<std::string>{"junit.xml", "node.prom"}));

    const std::string prom = file_text(m_dir / "out/node.prom");
    EXPECT_NE(prom.find("gpudoctor_probe_status{subcommand=\"check\",probe=\"gpus\"} 3\n"), std::string::npos) << prom;
    EXPECT_NE(prom.find("gpudoctor_finding{subcommand=\"check\",probe=\"gpus\",code=\"gpus.ecc_uncorrected\",severity="
                        "\"fail\",subject=\"gpu "
                        "1 (0000:0f:00.0)\"} 3\n"),
        std::string::npos)
        << prom;
    EXPECT_NE(prom.find("gpudoctor_exit_code{subcommand=\"check\"} 1\n"), std::string::npos);
    EXPECT_NE(prom.find("gpudoctor_gpus 2\n"), std::string::npos);
    EXPECT_NE(prom.find("gpudoctor_gpu_ecc_errors{gpu=\"1\",bus_id=\"0000:0f:00.0\",type=\"uncorrected\"} 4\n"),
        std::string::npos);
    EXPECT_NE(prom.find("gpudoctor_last_run_timestamp_seconds{subcommand=\"check\"} "), std::string::npos);
    struct stat st { };
    ASSERT_EQ(stat((m_dir / "out/node.prom").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644U);
    // Prometheus's own parser too, where Debian's prometheus package (promtool) is installed.
    if (auto promtool = base::find_executable("promtool", std::getenv("PATH"))) {
        auto check =
            test_support::run({"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", *promtool, path("out/node.prom")});
        EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    }

    const std::string xml = file_text(m_dir / "out/junit.xml");
    EXPECT_NE(xml.find("<testcase name=\"gpus: gpus.ecc_uncorrected (gpu 1 (0000:0f:00.0))\" "
                       "classname=\"gpudoctor.gpus\">\n      <failure type=\"fail\""),
        std::string::npos)
        << xml;
    EXPECT_NE(xml.find("failures=\"2\""), std::string::npos) << xml;
}

TEST_F(ExtraOutputs, QuietTextAndAFitNode)
{
    auto r = gpudoctor({"check", "--quiet", "--prometheus", path("out/node.prom")}, "healthy.json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "4 pass, 0 warn, 0 fail, 0 error, 0 skip: fit to train\n");
    const std::string prom = file_text(m_dir / "out/node.prom");
    EXPECT_NE(prom.find("gpudoctor_exit_code{subcommand=\"check\"} 0\n"), std::string::npos);
    EXPECT_NE(prom.find("gpudoctor_probe_status{subcommand=\"check\",probe=\"gpus\"} 0\n"), std::string::npos);
}

TEST_F(ExtraOutputs, FromASnapshot)
{
    auto snap = gpudoctor({"snapshot"});
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    std::ofstream(m_dir / "node.json") << snap.out;
    // Judged elsewhere: no NVML at all this time, only the snapshot.
    auto r = test_support::run(
        {GPUDOCTOR_PATH, "check", "--from", path("node.json"), "--only", "driver,gpus", "--expect-gpus", "2", "--junit",
            path("out/junit.xml"), "--prometheus", path("out/node.prom"), "--fail-summary"},
        {{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.out,
        "gpus.throttled: gpu 0 (0000:07:00.0): clocks held down: hardware thermal slowdown (reasons "
        "0x40) (+1 more)\n");
    EXPECT_NE(file_text(m_dir / "out/node.prom").find("gpudoctor_gpus 2\n"), std::string::npos);
    EXPECT_NE(file_text(m_dir / "out/junit.xml").find("gpus.throttled"), std::string::npos);
}

TEST_F(ExtraOutputs, AnUnwritableFileIsExit2AndNoReport)
{
    auto r = gpudoctor({"check", "--prometheus", "/proc/gpudoctor.prom"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
        "gpudoctor: --prometheus /proc/gpudoctor.prom: cannot create a temporary file in /proc: No such file or "
        "directory\n");

    // The temporary file is written, then cannot replace a directory: removed, nothing else left.
    std::filesystem::create_directory(m_dir / "out/junit.xml");
    r = gpudoctor({"check", "--junit", path("out/junit.xml")});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("gpudoctor: --junit " + path("out/junit.xml") + ": cannot rename "), std::string::npos)
        << r.err;
    EXPECT_EQ(names_in(m_dir / "out"), std::vector<std::string>{"junit.xml"});
}

TEST_F(ExtraOutputs, AnExistingFileIsReplacedWhole)
{
    std::ofstream(m_dir / "out/node.prom") << std::string(100000, '#') << '\n';
    auto r = gpudoctor({"check", "--prometheus", path("out/node.prom")}, "healthy.json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string prom = file_text(m_dir / "out/node.prom");
    EXPECT_EQ(prom.rfind("# HELP gpudoctor_probe_status ", 0), 0U) << prom.substr(0, 100);
    EXPECT_EQ(prom.find("##"), std::string::npos);
    EXPECT_EQ(names_in(m_dir / "out"), std::vector<std::string>{"node.prom"});
}

TEST_F(ExtraOutputs, RootDoesNotWriteThroughAnotherUsersLink)
{
    // The prolog's attack: in a shared directory, another user's link to a file only root may
    // write. Both outputs are refused (exit 2, no report) and the file keeps its content and mode.
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root, to give a link another user's uid";
    }
    chmod(path("out").c_str(), 01777);
    std::filesystem::create_directory(m_dir / "secret");
    const auto victim = m_dir / "secret/shadow";
    std::ofstream(victim) << "root's data\n";
    chmod(victim.c_str(), 0600);
    for (const std::string option : {"--prometheus", "--junit"}) {
        const auto link = m_dir / "out" / (option.substr(2) + ".out");
        std::filesystem::create_symlink(victim, link);
        ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
        auto r = gpudoctor({"check", option, link.string()}, "healthy.json");
        EXPECT_EQ(r.exit_code, 2) << option;
        EXPECT_EQ(r.out, "");
        EXPECT_EQ(r.err,
            "gpudoctor: " + option + " " + link.string() + ": " + link.string() +
                " is a symbolic link owned by another user (uid 65534); it is not followed: remove it, or write the "
                "file elsewhere\n");
        EXPECT_EQ(file_text(victim), "root's data\n");
        struct stat st { };
        ASSERT_EQ(stat(victim.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600U);
    }
}

TEST_F(ExtraOutputs, UsageErrors)
{
    auto r = gpudoctor({"check", "--fail-summary", "--json"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gpudoctor: --fail-summary and --json: choose one report on standard output\n");
    r = gpudoctor({"check", "--prometheus", ""});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gpudoctor: --prometheus '': expected a file name\n");
    r = test_support::run({GPUDOCTOR_PATH, "check", "--junit"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--junit"), std::string::npos) << r.err;
}

// nccl-log judges too: the same --quiet, --junit and --prometheus as check, with its own
// subcommand label so both files can sit in one textfile directory.
TEST_F(ExtraOutputs, NcclLogWritesTheSameFilesAsCheck)
{
    std::ofstream(m_dir / "hang.log") << R"(n1:7001:7001 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
n1:7001:7001 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5555666677778888 - Init COMPLETE
[rank0]:[E1105 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.
)";
    auto r = test_support::run({GPUDOCTOR_PATH, "nccl-log", "--quiet", "--no-color", "--junit", path("out/nccl.xml"),
        "--prometheus", path("out/nccl.prom"), path("hang.log")});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out.rfind("FAIL  job: PyTorch's NCCL watchdog timed out", 0), 0U) << r.out;
    EXPECT_EQ(r.out.find("Summary:"), std::string::npos) << "only the problems: " << r.out;
    EXPECT_NE(r.out.find("\n1 fail, 1 warn, 0 error\n"), std::string::npos) << r.out;

    const std::string prom = file_text(m_dir / "out/nccl.prom");
    EXPECT_NE(prom.find("gpudoctor_exit_code{subcommand=\"nccl-log\"} 1\n"), std::string::npos) << prom;
    EXPECT_NE(prom.find("gpudoctor_finding{subcommand=\"nccl-log\",probe=\"nccl-log\",code=\"nccl.watchdog_timeout\","
                        "severity=\"fail\",subject=\"job\"} 3\n"),
        std::string::npos)
        << prom;
    if (auto promtool = base::find_executable("promtool", std::getenv("PATH"))) {
        auto check =
            test_support::run({"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", *promtool, path("out/nccl.prom")});
        EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    }
    const std::string xml = file_text(m_dir / "out/nccl.xml");
    EXPECT_NE(xml.find("<testsuite name=\"gpudoctor nccl-log\" tests=\"2\" failures=\"1\""), std::string::npos) << xml;

    // --fail-on warn moves the threshold in every output.
    r = test_support::run(
        {GPUDOCTOR_PATH, "nccl-log", "--fail-on", "warn", "--junit", path("out/nccl.xml"), path("hang.log")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(file_text(m_dir / "out/nccl.xml").find("failures=\"2\""), std::string::npos);

    // A file that cannot be written: exit 2 before any report.
    r = test_support::run({GPUDOCTOR_PATH, "nccl-log", "--junit", "/proc/nccl.xml", path("hang.log")});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("gpudoctor: --junit /proc/nccl.xml: "), std::string::npos) << r.err;
}

TEST_F(ExtraOutputs, FitJudgesThroughTheSameVerdict)
{
    // Llama 7B in bf16 with Adam needs ~100 GiB of model states: nothing fits on 24 GB.
    auto r = test_support::run({GPUDOCTOR_PATH, "fit", "--model", "llama-7b", "--precision", "bf16", "--optimizer",
        "adamw", "--gpu-mem", "24GB", "--junit", path("out/fit.xml"), "--prometheus", path("out/fit.prom")});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.out.find("Max batch per GPU: 0, nothing fits"), std::string::npos) << r.out;
    const std::string prom = file_text(m_dir / "out/fit.prom");
    EXPECT_NE(prom.find("gpudoctor_exit_code{subcommand=\"fit\"} 1\n"), std::string::npos) << prom;
    EXPECT_NE(prom.find("code=\"fit.nothing_fits\",severity=\"fail\",subject=\"gpu 0\"}"), std::string::npos) << prom;
    const std::string xml = file_text(m_dir / "out/fit.xml");
    EXPECT_NE(xml.find("<testsuite name=\"gpudoctor fit\" tests=\"1\" failures=\"1\""), std::string::npos) << xml;

    // A fit that fits: exit 0, and the files say so.
    r = test_support::run({GPUDOCTOR_PATH, "fit", "--model", "resnet50", "--precision", "amp", "--optimizer", "sgd",
        "--gpu-mem", "16GiB", "--prometheus", path("out/fit.prom")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(file_text(m_dir / "out/fit.prom").find("gpudoctor_exit_code{subcommand=\"fit\"} 0\n"), std::string::npos);
}

TEST_F(ExtraOutputs, AWriteErrorOnStandardOutputIsExitThree)
{
    if (!std::filesystem::exists("/dev/full")) {
        GTEST_SKIP() << "no /dev/full here";
    }
    // A snapshot or report that cannot be written (a full disk) is exit 3 with a message, never 0
    // with an empty file; the same for every subcommand.
    // A short output fails at the last flush, which knows why; a long one fails on the way.
    for (const auto& [sub, why] : std::vector<std::pair<std::string, std::string>>{
             {"list", "No space left on device"}, {"explain", "a write to it failed"}}) {
        auto r = test_support::run({"/bin/sh", "-c", "exec \"$0\" \"$1\" > /dev/full", GPUDOCTOR_PATH, sub});
        EXPECT_EQ(r.exit_code, 3) << sub << ": " << r.err;
        EXPECT_EQ(r.err, "gpudoctor: cannot write the output: " + why + "\n") << sub;
    }
    auto ok = test_support::run({"/bin/sh", "-c", "exec \"$0\" list > /dev/null", GPUDOCTOR_PATH});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

} // namespace
