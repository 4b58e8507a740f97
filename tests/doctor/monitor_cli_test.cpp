// gpudoctor monitor beyond the golden files: a command's output and exit status, --output with
// --json, and sampling that ends on SIGINT.
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

class MonitorCli : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::ofstream(m_dir / "nvml.json") << R"({"gpus": [
  {"bus_id": "00000000:07:00.0", "memory_total": 1000, "utilization": [0, 95], "memory_used": 900, "power_mw": 5000},
  {"bus_id": "00000000:0F:00.0", "memory_total": 1000, "utilization": 40, "memory_used": 100}]})";
        m_env = {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", (m_dir / "nvml.json").string()}};
    }

    std::string read(const std::string& name) const
    {
        std::ifstream in(m_dir / name);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    TempDir m_dir;
    EnvChanges m_env;
};

} // namespace

TEST_F(MonitorCli, CommandKeepsStandardOutputAndGivesItsExitStatus)
{
    auto r = test_support::run(
        {GPUDOCTOR_PATH, "monitor", "--interval", "0.1", "--", "sh", "-c", "echo from the command; sleep 0.35; exit 3"},
        m_env);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(r.out, "from the command\n") << "the monitor writes to standard error when a command runs";
    EXPECT_NE(r.err.find("    TIME GPU ACTIVE  MEMORY MEM% TEMP SMCLK POWER PROC EVENTS"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" samples every 0.1s while sh ran (exit status 3); "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("WARN  gpu 1 (0000:0f:00.0): kernel-active time is low (40.0%"), std::string::npos) << r.err;

    auto missing = test_support::run({GPUDOCTOR_PATH, "monitor", "--", "no-such-program-xyz"}, m_env);
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_EQ(missing.err, "gpudoctor: monitor: cannot run 'no-such-program-xyz': not an executable in PATH\n");
}

TEST_F(MonitorCli, JsonLinesToAnOutputFile)
{
    const auto file = (m_dir / "mon.jsonl").string();
    auto r = test_support::run(
        {GPUDOCTOR_PATH, "monitor", "--interval", "0.1", "--duration", "0.3", "--json", "--output", file}, m_env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");
    std::istringstream lines(read("mon.jsonl"));
    std::vector<nlohmann::json> docs;
    for (std::string line; std::getline(lines, line);) {
        docs.push_back(nlohmann::json::parse(line));
    }
    ASSERT_EQ(docs.size(), 7U) << "3 samples of 2 GPUs, then the summary";
    EXPECT_EQ(docs[0]["type"], "sample");
    EXPECT_EQ(docs[2]["kernel_active"], 95);
    EXPECT_EQ(docs[2]["t"], 0.1);
    EXPECT_EQ(docs[6]["type"], "summary");
    EXPECT_EQ(docs[6]["samples"], 3);
    EXPECT_EQ(docs[6]["summary"][0]["kernel_active_mean"], 95.0);
    EXPECT_EQ(docs[6]["summary"][0]["startup_s"], 0.1);
    EXPECT_EQ(docs[6]["summary"][0]["verdict"], "too_short") << "2 samples after start-up";
    EXPECT_EQ(docs[6]["summary"][1]["verdict"], "low");
}

TEST_F(MonitorCli, SigintEndsSamplingWithTheSummary)
{
    const auto log = (m_dir / "log").string();
    EnvChanges env = m_env;
    const pid_t pid = test_support::start({GPUDOCTOR_PATH, "monitor", "--interval", "0.1", "--gpus", "0"}, env, log);
    for (int i = 0; i < 100 && read("log").find("0.5s") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGINT);
    const int code = test_support::wait_for(pid, std::chrono::seconds(10));
    if (code == -1) {
        kill(pid, SIGKILL);
    }
    EXPECT_EQ(code, 0);
    const std::string text = read("log");
    EXPECT_NE(text.find("1 GPU, "), std::string::npos) << text;
    EXPECT_NE(text.find("): healthy: kernel-active 95.0%"), std::string::npos) << text;
}
