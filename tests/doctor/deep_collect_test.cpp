// The deep collectors run for real, through the runner (a child process each, with a deadline),
// against the fake libcuda and libnccl: the bandwidth arithmetic end to end, PCIe links from a
// sysfs tree, failing allocations, pairs without peer access, hangs and crashes, and NCCL's log.
#include "doctor/engine/runner.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <thread>

using doctor::engine::Severity;
using test_support::find_code;
using test_support::TempDir;

namespace {

const char* const fake_variables[] = {"FAKE_CUDA_DEVICE_COUNT", "FAKE_CUDA_NAMES", "FAKE_CUDA_BUS_IDS",
    "FAKE_CUDA_H2D_GBPS", "FAKE_CUDA_D2H_GBPS", "FAKE_CUDA_D2D_GBPS", "FAKE_CUDA_P2P_GBPS", "FAKE_CUDA_P2P",
    "FAKE_CUDA_NO_PEER", "FAKE_CUDA_ALLOC_FAIL", "FAKE_CUDA_HANG_IN", "FAKE_CUDA_CRASH_IN", "FAKE_CUDA_FAIL_IN",
    "FAKE_CUDA_COPY_LATENCY_US", "FAKE_NCCL_TRANSPORT", "FAKE_NCCL_ALGBW_GBPS", "FAKE_NCCL_INIT_ERROR",
    "FAKE_NCCL_HANG_IN", "GPUKIT_CUDA_LIBRARY", "GPUKIT_NCCL_LIBRARY"};

constexpr double mib = 1024.0 * 1024.0;

class DeepCollect : public ::testing::Test {
protected:
    DeepCollect()
    {
        use_cuda(FAKE_CUDA_PATH);
        use_nccl(FAKE_NCCL_PATH);
        m_ctx.sysroot = m_sysroot.path().string();
        m_ctx.env["TMPDIR"] = m_tmp.path().string();
        m_ctx.deep_timeout = std::chrono::seconds(20);
        m_ctx.policy = doctor::engine::Policy::defaults();
        m_ctx.policy.merge_toml("[deep]\ncopy_mib = 64\ncopies = 4\nsamples = 3\nallreduce_mib = 128\n"
                                "allreduce_iterations = 10\n",
            "test policy");
    }
    ~DeepCollect() override
    {
        for (const char* name : fake_variables) {
            unsetenv(name);
        }
    }
    static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

    // The collectors read the override from the collect context; the fake NCCL finds the fake
    // driver through the process environment, as the real one finds libcuda.
    void use_cuda(const std::string& file)
    {
        m_ctx.env["GPUKIT_CUDA_LIBRARY"] = file;
        set("GPUKIT_CUDA_LIBRARY", file);
    }
    void use_nccl(const std::string& file) { m_ctx.env["GPUKIT_NCCL_LIBRARY"] = file; }

    /// A sysfs PCIe link for a GPU.
    void link(const std::string& bus, const std::string& max_speed, int max_width, const std::string& speed, int width)
    {
        const auto dir = m_sysroot / ("sys/bus/pci/devices/" + bus);
        std::filesystem::create_directories(dir);
        std::ofstream(dir / "max_link_speed") << max_speed << "\n";
        std::ofstream(dir / "max_link_width") << max_width << "\n";
        std::ofstream(dir / "current_link_speed") << speed << "\n";
        std::ofstream(dir / "current_link_width") << width << "\n";
    }

    nlohmann::json collect(const std::string& collector)
    {
        return doctor::engine::collect({&test_support::collector_named(collector)}, m_ctx).write();
    }

    TempDir m_sysroot;
    TempDir m_tmp;
    doctor::engine::CollectContext m_ctx;
};

/// The rate the fake driver gives copies of `bytes` at `gbps`, each starting 2 µs late.
double fake_rate(double bytes, double gbps)
{
    return bytes / (2e-6 + bytes / (gbps * 1e9)) / 1e9;
}

} // namespace

TEST_F(DeepCollect, BandwidthOfTwoGpusEndToEnd)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_CUDA_NAMES", "NVIDIA RTX A6000");
    set("FAKE_CUDA_H2D_GBPS", "25,12");
    set("FAKE_CUDA_D2H_GBPS", "26");
    set("FAKE_CUDA_D2D_GBPS", "700");
    set("FAKE_CUDA_P2P_GBPS", "40");
    link("0000:07:00.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    link("0000:0f:00.0", "16.0 GT/s PCIe", 16, "2.5 GT/s PCIe", 16);
    const nlohmann::json facts = collect("bandwidth");
    const auto& bw = facts["bandwidth"];
    ASSERT_FALSE(bw.contains("error")) << bw.dump(2);
    ASSERT_EQ(bw["gpus"].size(), 2U);
    const auto& g0 = bw["gpus"][0];
    const auto& g1 = bw["gpus"][1];
    EXPECT_EQ(g0["name"], "NVIDIA RTX A6000");
    EXPECT_EQ(g0["bus_id"], "0000:07:00.0"); // the driver's upper-case hex, lowered
    EXPECT_EQ(g1["bus_id"], "0000:0f:00.0");
    EXPECT_EQ(g0["error"], "");
    EXPECT_NEAR(g0["h2d"]["median_gbps"].get<double>(), fake_rate(64 * mib, 25), 0.01);
    EXPECT_NEAR(g1["h2d"]["median_gbps"].get<double>(), fake_rate(64 * mib, 12), 0.01);
    EXPECT_NEAR(g1["d2h"]["median_gbps"].get<double>(), fake_rate(64 * mib, 26), 0.01);
    EXPECT_NEAR(g0["d2d"]["median_gbps"].get<double>(), fake_rate(64 * mib, 700), 0.5);
    EXPECT_EQ(g0["h2d"]["samples_gbps"].size(), 3U);
    EXPECT_NEAR(g0["pcie"]["max_gbps"].get<double>(), 31.51, 0.01);
    EXPECT_EQ(g1["pcie"]["gt"].get<double>(), 2.5);
    EXPECT_EQ(bw["settings"]["bytes"], 64 * 1024 * 1024);
    ASSERT_EQ(bw["peers"].size(), 2U);
    for (const auto& p : bw["peers"]) {
        EXPECT_TRUE(p["access"].get<bool>());
        EXPECT_NEAR(p["bandwidth"]["median_gbps"].get<double>(), fake_rate(64 * mib, 40), 0.01);
        // One 4-byte copy: the driver's 2 µs start.
        EXPECT_NEAR(p["latency_us"].get<double>(), 2.0, 0.01);
    }
    // Judged: GPU 1 is below 70% of Gen4 x16 (22.1 GB/s); GPU 0 passes.
    const auto findings = test_support::judge_one("bandwidth", facts);
    const auto* low = find_code(findings, "bandwidth.h2d_low");
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->subject, "gpu 1 (0000:0f:00.0)");
    EXPECT_NE(low->message.find("sysfs shows the link at Gen1 x16 now, Gen4 x16 at most"), std::string::npos)
        << low->message;
    const auto* ok = find_code(findings, "bandwidth.gpu_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->message.rfind("1 GPU: ", 0), 0U) << ok->message;
}

TEST_F(DeepCollect, AFailingAllocationOnOneGpuKeepsTheOther)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_CUDA_ALLOC_FAIL", "1");
    const nlohmann::json facts = collect("bandwidth");
    const auto& bw = facts["bandwidth"];
    ASSERT_FALSE(bw.contains("error")) << bw.dump(2);
    EXPECT_EQ(bw["gpus"][0]["error"], "");
    EXPECT_TRUE(bw["gpus"][0]["h2d"].is_object());
    const std::string error = bw["gpus"][1]["error"];
    EXPECT_NE(error.find("cuMemAlloc of 64 MiB on GPU 1 failed: CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << error;
    EXPECT_TRUE(bw["gpus"][1]["h2d"].is_null());
    for (const auto& p : bw["peers"]) {
        EXPECT_NE(p["error"].get<std::string>().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << p.dump();
    }
    const auto findings = test_support::judge_one("bandwidth", facts);
    const auto* failed = find_code(findings, "bandwidth.measure_failed");
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ(failed->severity, Severity::error);
    EXPECT_EQ(failed->subject, "gpu 1 (0000:0f:00.0)");
}

TEST_F(DeepCollect, PairsWithoutPeerAccessAreNotCopied)
{
    set("FAKE_CUDA_DEVICE_COUNT", "3");
    set("FAKE_CUDA_NAMES", "NVIDIA RTX A6000");
    set("FAKE_CUDA_NO_PEER", "0-2");
    const nlohmann::json facts = collect("bandwidth");
    const auto& peers = facts["bandwidth"]["peers"];
    ASSERT_EQ(peers.size(), 6U);
    unsigned without = 0;
    for (const auto& p : peers) {
        const bool pair02 = (p["src"] == 0 && p["dst"] == 2) || (p["src"] == 2 && p["dst"] == 0);
        EXPECT_EQ(p["access"].get<bool>(), !pair02) << p.dump();
        EXPECT_EQ(p["bandwidth"].is_null(), pair02) << p.dump();
        without += pair02 ? 1 : 0;
    }
    EXPECT_EQ(without, 2U);
    const auto findings = test_support::judge_one("bandwidth", facts);
    ASSERT_NE(find_code(findings, "bandwidth.p2p_unavailable"), nullptr);
    ASSERT_NE(find_code(findings, "bandwidth.p2p_ok"), nullptr);
}

TEST_F(DeepCollect, AHungCopyTimesOutAndTheQuickCollectorsStillReport)
{
    set("FAKE_CUDA_HANG_IN", "cuMemcpyHtoDAsync_v2");
    m_ctx.deep_timeout = std::chrono::seconds(1);
    const auto start = std::chrono::steady_clock::now();
    const nlohmann::json facts = doctor::engine::collect(
        {&test_support::collector_named("host"), &test_support::collector_named("bandwidth")}, m_ctx)
                                     .write();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
    EXPECT_EQ(test_support::facts_of(facts).error("bandwidth"), "timed out after 1 s");
    EXPECT_EQ(test_support::facts_of(facts).error("host"), "");
    const auto findings = test_support::judge_one("bandwidth", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "bandwidth.error");
    EXPECT_EQ(findings[0].severity, Severity::error);
}

TEST_F(DeepCollect, ACrashInTheDriverIsAnError)
{
    set("FAKE_CUDA_CRASH_IN", "cuEventElapsedTime");
    const nlohmann::json facts = collect("bandwidth");
    EXPECT_EQ(test_support::facts_of(facts).error("bandwidth"), "crashed (Segmentation fault)");
}

TEST_F(DeepCollect, NoDriverLibraryIsNothingToMeasure)
{
    use_cuda("/nonexistent/libcuda.so.1");
    const nlohmann::json facts = collect("bandwidth");
    const std::string skipped = facts["bandwidth"].value("skipped", std::string());
    EXPECT_EQ(skipped.rfind("no CUDA driver library: ", 0), 0U) << facts.dump();
    const nlohmann::json ar = collect("allreduce");
    EXPECT_EQ(ar["allreduce"].value("skipped", std::string()).rfind("no CUDA driver library: ", 0), 0U) << ar.dump();
}

TEST_F(DeepCollect, ADriverLibraryWithoutCopiesIsAnErrorNamingTheSymbol)
{
    use_cuda(FAKE_CUDA_NO_COPIES_PATH);
    const nlohmann::json facts = collect("bandwidth");
    const std::string error = test_support::facts_of(facts).error("bandwidth");
    EXPECT_NE(error.find("lacks cuMemcpyPeerAsync"), std::string::npos) << error;
}

TEST_F(DeepCollect, AllReduceOverTwoGpusWithNcclsTransports)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_CUDA_NAMES", "NVIDIA H100 80GB HBM3");
    set("FAKE_NCCL_ALGBW_GBPS", "150");
    m_ctx.env["NCCL_P2P_LEVEL"] = "NVL";
    const nlohmann::json facts = collect("allreduce");
    const auto& ar = facts["allreduce"];
    ASSERT_FALSE(ar.contains("error")) << ar.dump(2);
    ASSERT_FALSE(ar.contains("skipped")) << ar.dump(2);
    EXPECT_EQ(ar["ranks"], 2);
    EXPECT_EQ(ar["bytes"], 128 * 1024 * 1024);
    EXPECT_EQ(ar["iterations"], 10);
    EXPECT_NEAR(ar["time_us"].get<double>(), 128 * mib / 150e9 * 1e6, 0.5);
    EXPECT_NEAR(ar["algbw_gbps"].get<double>(), 150, 0.1);
    EXPECT_NEAR(ar["busbw_gbps"].get<double>(), 150, 0.1); // 2(n-1)/n = 1 for two GPUs
    EXPECT_EQ(ar["environment"], (nlohmann::json{{"NCCL_P2P_LEVEL", "NVL"}}));
    EXPECT_GT(ar["log"]["summary"]["transports"]["p2p"].get<int>(), 0) << ar["log"].dump(2);
    EXPECT_EQ(ar["log"]["summary"]["processes_init_complete"], 1);
    // NCCL's log went to a private directory under TMPDIR, removed afterwards.
    EXPECT_TRUE(std::filesystem::is_empty(m_tmp.path()));
    const auto findings = test_support::judge_one("allreduce", facts);
    const auto* ok = find_code(findings, "allreduce.busbw_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_NE(
        ok->message.find("(no floor for 2× NVIDIA H100 80GB HBM3 in the GPU table or the policy)"), std::string::npos)
        << ok->message;
    ASSERT_NE(find_code(findings, "allreduce.transports"), nullptr);
}

TEST_F(DeepCollect, AllReduceOverEightGpusIsJudgedAgainstTheModelFloor)
{
    set("FAKE_CUDA_DEVICE_COUNT", "8");
    set("FAKE_CUDA_NAMES", "NVIDIA H100 80GB HBM3");
    // One slow GPU sets the pace: busbw = 200 × 2·7/8 = 350 GB/s, below H100's 460.
    set("FAKE_NCCL_ALGBW_GBPS", "300,300,300,200,300,300,300,300");
    const nlohmann::json facts = collect("allreduce");
    ASSERT_FALSE(facts["allreduce"].contains("error")) << facts.dump(2);
    EXPECT_NEAR(facts["allreduce"]["busbw_gbps"].get<double>(), 350, 0.5);
    const auto findings = test_support::judge_one("allreduce", facts);
    const auto* low = find_code(findings, "allreduce.busbw_low");
    ASSERT_NE(low, nullptr);
    EXPECT_NE(low->message.find("below 460 GB/s (the GPU table's floor for 8× H100)"), std::string::npos)
        << low->message;
}

TEST_F(DeepCollect, AnNcclInitFailureIsAnErrorWithNcclsText)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_NCCL_INIT_ERROR", "2");
    const nlohmann::json facts = collect("allreduce");
    const std::string error = test_support::facts_of(facts).error("allreduce");
    EXPECT_NE(error.find("ncclCommInitAll over GPUs 0,1 failed: unhandled system error"), std::string::npos) << error;
    EXPECT_TRUE(std::filesystem::is_empty(m_tmp.path()));
}

TEST_F(DeepCollect, AllReduceNeedsTwoGpusAndAnNcclLibrary)
{
    set("FAKE_CUDA_DEVICE_COUNT", "1");
    nlohmann::json facts = collect("allreduce");
    EXPECT_EQ(facts["allreduce"].value("skipped", std::string()), "1 GPU: an all-reduce needs two");
    EXPECT_TRUE(facts["allreduce"].value("single_gpu", false));
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    use_nccl("/nonexistent/libnccl.so.2");
    facts = collect("allreduce");
    EXPECT_EQ(facts["allreduce"].value("skipped", std::string()).rfind("no NCCL library: ", 0), 0U) << facts.dump();
    const auto findings = test_support::judge_one("allreduce", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "allreduce.not_measured");
}

TEST_F(DeepCollect, AHungAllReduceTimesOut)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_NCCL_HANG_IN", "ncclAllReduce");
    m_ctx.deep_timeout = std::chrono::seconds(1);
    const nlohmann::json facts = collect("allreduce");
    EXPECT_EQ(test_support::facts_of(facts).error("allreduce"), "timed out after 1 s");
}

TEST(DeepRunner, DeepCollectorsRunAfterTheQuickOnesAndOneAtATime)
{
    // Each collector reports when it started and ended (steady clock, in ms).
    auto timed = [](const std::string& name, bool deep) {
        doctor::engine::Collector c;
        c.name = name;
        c.deep = deep;
        c.collect = [](const doctor::engine::CollectContext&) {
            auto now = [] {
                return std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
            };
            const auto start = now();
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
            return nlohmann::json{{"start", start}, {"end", now()}};
        };
        return c;
    };
    const doctor::engine::Collector quick1 = timed("quick1", false);
    const doctor::engine::Collector quick2 = timed("quick2", false);
    const doctor::engine::Collector deep1 = timed("deep1", true);
    const doctor::engine::Collector deep2 = timed("deep2", true);
    doctor::engine::CollectContext ctx;
    const nlohmann::json facts = doctor::engine::collect({&deep1, &quick1, &deep2, &quick2}, ctx).write();
    auto start = [&](const char* n) { return facts[n]["start"].get<long long>(); };
    auto end = [&](const char* n) { return facts[n]["end"].get<long long>(); };
    // The quick ones overlap each other; each deep one starts after everything before it ended.
    EXPECT_LT(start("quick2"), end("quick1"));
    EXPECT_GE(start("deep1"), std::max(end("quick1"), end("quick2")));
    EXPECT_GE(start("deep2"), end("deep1"));
}

TEST_F(DeepCollect, ProgressLinesGoToStderrOnlyWhenAsked)
{
    set("FAKE_CUDA_NAMES", "NVIDIA H200");
    m_ctx.progress = true;
    testing::internal::CaptureStderr();
    doctor::engine::collect({&test_support::collector_named("bandwidth")}, m_ctx);
    const std::string shown = testing::internal::GetCapturedStderr();
    EXPECT_NE(shown.find("\r\033[Kgpudoctor: bandwidth: starting"), std::string::npos) << shown;
    EXPECT_NE(shown.find("\r\033[Kgpudoctor: bandwidth: GPU 1/1 (NVIDIA H200): host→device"), std::string::npos)
        << shown;
    EXPECT_NE(shown.find("device→device"), std::string::npos) << shown;
    EXPECT_EQ(shown.substr(shown.size() - 4), "\r\033[K") << "the last line is cleared";
    m_ctx.progress = false;
    testing::internal::CaptureStderr();
    doctor::engine::collect({&test_support::collector_named("bandwidth")}, m_ctx);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST_F(DeepCollect, ADeepSnapshotIsJudgedElsewhere)
{
    std::ofstream(m_tmp / "small.toml") << "[deep]\ncopy_mib = 16\ncopies = 2\nsamples = 3\n";
    const test_support::EnvChanges env = {{"GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH},
        {"GPUKIT_NCCL_LIBRARY", FAKE_NCCL_PATH}, {"FAKE_CUDA_DEVICE_COUNT", "2"}, {"FAKE_CUDA_H2D_GBPS", "30,9"},
        {"FAKE_CUDA_NAMES", "NVIDIA A100-SXM4-80GB"}, {"FAKE_CUDA_P2P_GBPS", "260"}};
    const auto snapshot = test_support::run_with(GPUDOCTOR_PATH,
        {"snapshot", "--deep", "--only", "bandwidth", "--policy", (m_tmp / "small.toml").string(), "--sysroot",
            m_sysroot.path().string()},
        env);
    ASSERT_EQ(snapshot.exit_code, 0) << snapshot.err;
    const auto doc = nlohmann::json::parse(snapshot.out);
    EXPECT_EQ(doc["facts"]["bandwidth"]["settings"]["bytes"], 16 * 1024 * 1024);
    std::ofstream(m_tmp / "node.json") << snapshot.out;
    // Judged on a machine with no GPU library at all: only the facts count.
    const auto check = test_support::run_with(GPUDOCTOR_PATH,
        {"check", "--from", (m_tmp / "node.json").string(), "--only", "bandwidth", "--json"},
        {{"GPUKIT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1"}});
    EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
    const auto report = nlohmann::json::parse(check.out);
    const auto& findings = report["probes"][0]["findings"];
    ASSERT_FALSE(findings.empty());
    EXPECT_EQ(findings[0]["code"], "bandwidth.h2d_low") << findings.dump(2);
    EXPECT_EQ(findings[0]["subject"], "gpu 1 (0000:0f:00.0)");
    EXPECT_NE(findings[0]["message"].get<std::string>().find("the GPU table's floor for A100-80GB"), std::string::npos);
    EXPECT_EQ(report["measurements"]["bandwidth"]["gpus"].size(), 2U);
}
