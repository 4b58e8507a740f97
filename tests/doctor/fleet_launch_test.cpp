// gpudoctor fleet through gpurun's own launcher on this node: the node's check runs as a rank, its
// answer comes back through the launcher's output, and a check that hangs is reported at the
// deadline. (Several nodes, through Open MPI: tests/integration/gpurun_multinode_test.cpp.)
#include "tests/support/fake_gpu_node.hpp"
#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rank_files.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

using nlohmann::json;

namespace {

class FleetLocal : public ::testing::Test {
protected:
    void SetUp() override
    {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        m_host = name;
        std::ofstream(m_dir / "two.json") << test_support::healthy_gpu_node(2).dump();
        json hung = test_support::healthy_gpu_node(2);
        hung["hang_in"] = "nvmlDeviceGetCount_v2";
        std::ofstream(m_dir / "hung.json") << hung.dump();
    }

    test_support::EnvChanges env(const std::string& fixture) const
    {
        const std::string path = std::filesystem::path(GPURUN_PATH).parent_path().string() + ":" + std::getenv("PATH");
        return {{"NO_COLOR", "1"}, {"PATH", path}, {"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH},
            {"FAKE_NVML_FIXTURE", (m_dir / fixture).string()}};
    }

    std::vector<std::string> command(std::vector<std::string> args) const
    {
        args.insert(args.begin(), {GPUDOCTOR_PATH, "fleet", "-H", m_host, "--launcher", "local"});
        return args;
    }

    test_support::Finished fleet(std::vector<std::string> args, const std::string& fixture)
    {
        return test_support::run(command(std::move(args)), env(fixture), std::chrono::seconds(60));
    }

    test_support::TempDir m_dir;
    std::string m_host;
};

} // namespace

TEST_F(FleetLocal, TheNodesCheckComesBackThroughTheLauncher)
{
    const auto r = fleet(
        {"--only", "driver,gpus", "--expect-gpus", "2", "--json", "--healthy-hostfile", (m_dir / "healthy").string()},
        "two.json");
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 1U);
    const json& node = j["nodes"][0];
    EXPECT_EQ(node["host"], m_host);
    EXPECT_EQ(node["answer"], "snapshot");
    EXPECT_EQ(node["exit_code"], 0);
    EXPECT_EQ(node["facts"]["nvml"]["gpus"].size(), 2U) << "the node's own NVML, read on the node";
    EXPECT_EQ(test_support::file_text(m_dir / "healthy"), m_host + " slots=2\n");

    // The same node judged against three GPUs fails, with the finding under its name.
    const auto three = fleet({"--only", "driver,gpus", "--expect-gpus", "3"}, "two.json");
    EXPECT_EQ(three.exit_code, 1) << three.err;
    EXPECT_NE(three.out.find("gpus.count on " + m_host), std::string::npos) << three.out;
}

TEST_F(FleetLocal, ACheckThatHangsIsReportedAtTheDeadline)
{
    const auto started = std::chrono::steady_clock::now();
    // The collector would wait 30 s for NVML; the node's deadline is 2 s.
    const auto r = fleet({"--only", "driver,gpus", "--deadline", "2", "--timeout", "30", "--json", "--healthy-hostfile",
                             (m_dir / "healthy").string()},
        "hung.json");
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
    EXPECT_LT(took, std::chrono::seconds(15));
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 1U);
    EXPECT_EQ(j["nodes"][0]["answer"], "timed out");
    EXPECT_EQ(j["nodes"][0]["why"], "its check took longer than the deadline, 2 s");
    EXPECT_EQ(j["summary"]["not_answering"], 1);
    EXPECT_EQ(test_support::file_text(m_dir / "healthy"), "") << "no node is fit";
}

TEST_F(FleetLocal, CtrlCStopsTheChecksAndTheReportSaysSo)
{
    const pid_t pid = test_support::start(
        command({"--only", "gpus", "--deadline", "60", "--timeout", "60"}), env("hung.json"), (m_dir / "log").string());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto stopped = test_support::interrupt(pid, std::chrono::seconds(20));
    EXPECT_EQ(stopped.code, 130) << test_support::file_text(m_dir / "log");
    EXPECT_LT(stopped.took, std::chrono::seconds(10));
    EXPECT_NE(test_support::file_text(m_dir / "log")
                  .find(": unreachable: no answer: the launch was stopped by signal 2 (Interrupt) before this node "
                        "answered"),
        std::string::npos)
        << test_support::file_text(m_dir / "log");
}
