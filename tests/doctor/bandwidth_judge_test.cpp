// The deep tier's rules, judged from hand-written facts: floors per model and from the PCIe link,
// outliers, failed measurements, peer copies, the all-reduce floor and NCCL's own findings.
#include "base/error.hpp"
#include "base/nccl/log.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/probes/table.hpp"
#include "tests/support/doctor_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <string>

using base::code_in;
using doctor::engine::Policy;
using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace {

nlohmann::json rate(double gbps)
{
    return {{"median_gbps", gbps}, {"min_gbps", gbps}, {"max_gbps", gbps}, {"samples_gbps", {gbps}}};
}

nlohmann::json pcie(double gt, unsigned width)
{
    // What the collector writes: sysfs speeds and widths, and the maximum link's rate.
    const double per_lane = gt <= 5 ? gt * 0.8 / 8 : gt * 128.0 / 130.0 / 8;
    return {{"max_gt", gt}, {"max_width", width}, {"gt", gt}, {"width", width}, {"max_gbps", per_lane * width}};
}

/// `count` GPUs of one model, each with the same rates, and every pair with peer access.
nlohmann::json node(unsigned count, const std::string& name, double h2d, double d2h, double d2d, double p2p)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (unsigned i = 0; i < count; ++i) {
        gpus.push_back({{"index", i}, {"name", name}, {"bus_id", "0000:0" + std::to_string(i) + ":00.0"},
            {"h2d", rate(h2d)}, {"d2h", rate(d2h)}, {"d2d", rate(d2d)}, {"error", ""}, {"pcie", nullptr}});
    }
    nlohmann::json peers = nlohmann::json::array();
    for (unsigned a = 0; a < count; ++a) {
        for (unsigned b = 0; b < count; ++b) {
            if (a != b) {
                peers.push_back({{"src", a}, {"dst", b}, {"access", true}, {"bandwidth", rate(p2p)},
                    {"latency_us", 2.5}, {"error", ""}});
            }
        }
    }
    return {{"bandwidth", {{"gpus", gpus}, {"peers", peers}}}};
}

nlohmann::json& peer(nlohmann::json& facts, int src, int dst)
{
    for (auto& p : facts["bandwidth"]["peers"]) {
        if (p["src"] == src && p["dst"] == dst) {
            return p;
        }
    }
    throw std::runtime_error("no such pair");
}

nlohmann::json allreduce(unsigned ranks, const std::string& name, double busbw)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (unsigned i = 0; i < ranks; ++i) {
        gpus.push_back({{"index", i}, {"name", name}, {"bus_id", "0000:0" + std::to_string(i) + ":00.0"}});
    }
    const double factor = 2.0 * (ranks - 1) / ranks;
    return {{"allreduce",
        {{"nccl_version", "2.21.5"}, {"devices", nlohmann::json::array()}, {"ranks", ranks}, {"bytes", 1U << 30},
            {"iterations", 20}, {"time_us", 1e6 * (1U << 30) / (busbw / factor * 1e9)}, {"algbw_gbps", busbw / factor},
            {"busbw_gbps", busbw}, {"bus_factor", factor}, {"gpus", gpus},
            {"log",
                {{"nccl_versions", {"2.21.5+cuda12.4"}},
                    {"summary", {{"transports", {{"p2p", 56}, {"shm", 0}, {"net_ib", 0}}}}},
                    {"findings", nlohmann::json::array()}}}}}};
}

} // namespace

TEST(BandwidthJudge, HealthyH100NodePassesWithRangesAndFloors)
{
    const auto findings = judge_one("bandwidth", node(8, "NVIDIA H100 80GB HBM3", 55.1, 55.4, 2100, 370));
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    EXPECT_TRUE(codes_with(findings, Severity::warn).empty());
    const auto* ok = find_code(findings, "bandwidth.gpu_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->message,
        "8 GPUs: host→device 55.1 GB/s (floor 48.0 GB/s, the GPU table's floor for H100), device→host 55.4 GB/s "
        "(floor 48.0 GB/s, the GPU table's floor for H100), device-local copy 2100 GB/s");
    const auto* p2p = find_code(findings, "bandwidth.p2p_ok");
    ASSERT_NE(p2p, nullptr);
    EXPECT_EQ(p2p->message, "56 GPU pairs: peer copies 370 GB/s (floor 335 GB/s for H100), latency 2.5 µs");
}

TEST(BandwidthJudge, HostCopiesBelowTheModelFloorFailOnThatGpu)
{
    auto facts = node(4, "NVIDIA H100 80GB HBM3", 55, 55, 2100, 370);
    facts["bandwidth"]["gpus"][2]["h2d"] = rate(31.2);
    const auto findings = judge_one("bandwidth", facts);
    const auto* low = find_code(findings, "bandwidth.h2d_low");
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->severity, Severity::fail);
    EXPECT_EQ(low->subject, "gpu 2 (0000:02:00.0)");
    EXPECT_EQ(low->message, "host→device copies run at 31.2 GB/s, below 48.0 GB/s (the GPU table's floor for H100)");
    EXPECT_EQ(find_code(findings, "bandwidth.d2h_low"), nullptr);
    const auto* ok = find_code(findings, "bandwidth.gpu_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->message.rfind("3 GPUs: ", 0), 0U) << ok->message;
    EXPECT_EQ(doctor::engine::exit_code(doctor::engine::judge({&test_support::probe_named("bandwidth")},
                                            test_support::facts_of(facts), Policy::defaults()),
                  false),
        1);
}

TEST(BandwidthJudge, WithoutAModelFloorHostCopiesAreJudgedAgainstThePcieLink)
{
    auto facts = node(2, "NVIDIA RTX A6000", 24, 24, 700, 20);
    facts["bandwidth"]["gpus"][0]["pcie"] = pcie(16, 16);
    facts["bandwidth"]["gpus"][1]["pcie"] = pcie(16, 16);
    facts["bandwidth"]["gpus"][1]["pcie"]["gt"] = 8.0;
    facts["bandwidth"]["gpus"][1]["pcie"]["width"] = 8;
    facts["bandwidth"]["gpus"][1]["d2h"] = rate(6.1);
    const auto findings = judge_one("bandwidth", facts);
    const auto* low = find_code(findings, "bandwidth.d2h_low");
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->subject, "gpu 1 (0000:01:00.0)");
    EXPECT_EQ(low->message,
        "device→host copies run at 6.10 GB/s, below 22.1 GB/s (70% of its PCIe Gen4 x16 link "
        "(31.5 GB/s)); sysfs shows the link at Gen3 x8 now, Gen4 x16 at most (an idle link may slow down; a "
        "loaded one should not)");
    EXPECT_EQ(low->remedy, code_in(test_support::probe_named("bandwidth").codes, "bandwidth.d2h_low").remedy)
        << "the row's remedy";
    // 24 GB/s on Gen4 x16 is above 70% of 31.5: no failure for host→device.
    EXPECT_EQ(find_code(findings, "bandwidth.h2d_low"), nullptr);
}

TEST(BandwidthJudge, APolicyFractionOfZeroTurnsThePcieFloorOff)
{
    auto facts = node(1, "NVIDIA RTX A6000", 6, 6, 700, 0);
    facts["bandwidth"]["gpus"][0]["pcie"] = pcie(16, 16);
    Policy policy = Policy::defaults();
    policy.merge_toml("[deep]\npcie_fraction = 0\n", "test.toml");
    const auto findings = judge_one("bandwidth", facts, policy);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    const auto* ok = find_code(findings, "bandwidth.gpu_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_NE(ok->message.find("host→device 6.00 GB/s (no floor"), std::string::npos) << ok->message;
}

TEST(BandwidthJudge, AGpuFarBelowTheOthersIsAnOutlier)
{
    auto facts = node(4, "Some GPU", 25, 25, 900, 40);
    facts["bandwidth"]["gpus"][3]["d2d"] = rate(400);
    const auto findings = judge_one("bandwidth", facts);
    const auto* outlier = find_code(findings, "bandwidth.outlier");
    ASSERT_NE(outlier, nullptr);
    EXPECT_EQ(outlier->severity, Severity::warn);
    EXPECT_EQ(outlier->subject, "gpu 3 (0000:03:00.0)");
    EXPECT_EQ(outlier->message, "device-local copy copies run at 400 GB/s, 44% of the other GPUs' median (900 GB/s)");
    // 0.6 of the median is the line: 540 GB/s is not an outlier.
    facts["bandwidth"]["gpus"][3]["d2d"] = rate(540);
    EXPECT_EQ(find_code(judge_one("bandwidth", facts), "bandwidth.outlier"), nullptr);
}

TEST(BandwidthJudge, AFailedMeasurementIsAnErrorNotAPass)
{
    auto facts = node(2, "NVIDIA H100 80GB HBM3", 55, 55, 2100, 370);
    auto& gpu = facts["bandwidth"]["gpus"][1];
    gpu["h2d"] = nullptr;
    gpu["d2h"] = nullptr;
    gpu["d2d"] = nullptr;
    gpu["error"] = "cuMemAlloc of 256 MiB on GPU 1 failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory (CUDA error 2)";
    const auto findings = judge_one("bandwidth", facts);
    const auto* failed = find_code(findings, "bandwidth.measure_failed");
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ(failed->severity, Severity::error);
    EXPECT_EQ(failed->subject, "gpu 1 (0000:01:00.0)");
    EXPECT_NE(failed->message.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
    const auto* ok = find_code(findings, "bandwidth.gpu_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->message.rfind("1 GPU: ", 0), 0U) << ok->message;
}

TEST(BandwidthJudge, OneGpuSkipsThePeerCopies)
{
    const auto findings = judge_one("bandwidth", node(1, "NVIDIA H200", 55, 55, 3000, 0));
    const auto* single = find_code(findings, "bandwidth.p2p_single_gpu");
    ASSERT_NE(single, nullptr);
    EXPECT_EQ(single->severity, Severity::skip);
    EXPECT_EQ(find_code(findings, "bandwidth.p2p_ok"), nullptr);
}

TEST(BandwidthJudge, PairsWithoutPeerAccessWarnAndSlowPairsFail)
{
    auto facts = node(4, "NVIDIA H100 80GB HBM3", 55, 55, 2100, 370);
    for (auto [a, b] : {std::pair{0, 3}, std::pair{3, 0}}) {
        auto& p = peer(facts, a, b);
        p["access"] = false;
        p["bandwidth"] = nullptr;
        p["latency_us"] = nullptr;
    }
    peer(facts, 1, 2)["bandwidth"] = rate(150);
    const auto findings = judge_one("bandwidth", facts);
    const auto* unavailable = find_code(findings, "bandwidth.p2p_unavailable");
    ASSERT_NE(unavailable, nullptr);
    EXPECT_EQ(unavailable->severity, Severity::warn);
    EXPECT_NE(unavailable->message.find("2 of 12 GPU pairs (0→3, 3→0)"), std::string::npos) << unavailable->message;
    const auto* low = find_code(findings, "bandwidth.p2p_low");
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->subject, "gpu 1 (0000:01:00.0) → gpu 2 (0000:02:00.0)");
    EXPECT_EQ(low->message, "peer copies run at 150 GB/s, below 335 GB/s (the GPU table's floor for H100)");
    const auto* ok = find_code(findings, "bandwidth.p2p_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->message.rfind("9 GPU pairs: ", 0), 0U) << ok->message;
}

TEST(BandwidthJudge, ThePcieModelIsItsOwnRowAndHasNoNvlinkFloor)
{
    // NVML's "NVIDIA H100 PCIe" names the GPU table's H100-PCIe, not H100: no 335 GB/s peer floor
    // for cards without NVLink.
    auto facts = node(2, "NVIDIA H100 PCIe", 50, 50, 1900, 40);
    const auto findings = judge_one("bandwidth", facts);
    EXPECT_EQ(find_code(findings, "bandwidth.p2p_low"), nullptr);
    EXPECT_EQ(find_code(findings, "bandwidth.h2d_low"), nullptr);
}

TEST(BandwidthJudge, NothingToMeasureIsASkip)
{
    const nlohmann::json facts = {{"bandwidth", {{"skipped", "no CUDA driver library: cannot load libcuda.so.1"}}}};
    const auto findings = judge_one("bandwidth", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "bandwidth.not_measured");
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_EQ(findings[0].message, "not measured: no CUDA driver library: cannot load libcuda.so.1");
}

TEST(DeepPolicy, AUserFloorReplacesTheBuiltInOneForTheSameModel)
{
    Policy policy = Policy::defaults();
    policy.merge_toml("[[deep.floor]]\nmodel = \"h100\"\nh2d_gbps = 50\n", "site.toml");
    const doctor::engine::DeepFloor* floor = policy.floor_for("NVIDIA H100 80GB HBM3");
    ASSERT_NE(floor, nullptr);
    EXPECT_EQ(floor->h2d_gbps, 50.0);
    EXPECT_FALSE(floor->p2p_gbps.has_value()); // replaced whole, not merged
    EXPECT_EQ(floor->model, "H100");
    EXPECT_EQ(floor->source, "the policy");
    // The same GPU table row by any of its names; another row keeps its own.
    EXPECT_EQ(policy.floor_for("H100-SXM5-80GB"), floor);
    EXPECT_EQ(policy.floor_for("NVIDIA H100 PCIe"), nullptr) << "H100-PCIe has no floor";
    ASSERT_NE(policy.floor_for("NVIDIA H200"), nullptr);
    EXPECT_EQ(policy.floor_for("NVIDIA H200")->source, "the GPU table");
    EXPECT_EQ(policy.floor_for("Tesla T4"), nullptr);
    // A GPU the table lacks is named by its own name.
    policy.merge_toml("[[deep.floor]]\nmodel = \"Future GPU 9000\"\np2p_gbps = 900\n", "site.toml");
    ASSERT_NE(policy.floor_for("NVIDIA Future GPU 9000"), nullptr);
    EXPECT_EQ(policy.floor_for("NVIDIA Future GPU 9000")->p2p_gbps, 900.0);
}

TEST(DeepPolicy, SizesAndFractionsAreRead)
{
    Policy policy = Policy::defaults();
    EXPECT_EQ(policy.copy_bytes, 256U << 20);
    EXPECT_EQ(policy.allreduce_bytes, 1024U << 20);
    policy.merge_toml("[deep]\ncopy_mib = 64\ncopies = 4\nsamples = 3\nallreduce_mib = 128\n"
                      "allreduce_iterations = 7\noutlier_fraction = 0.5\n",
        "small.toml");
    EXPECT_EQ(policy.copy_bytes, 64U << 20);
    EXPECT_EQ(policy.copies, 4U);
    EXPECT_EQ(policy.copy_samples, 3U);
    EXPECT_EQ(policy.allreduce_bytes, 128U << 20);
    EXPECT_EQ(policy.allreduce_iterations, 7U);
    EXPECT_DOUBLE_EQ(policy.outlier_fraction, 0.5);
}

namespace {

// The error of merging `text` as site.toml over the built-in policy, or "no error".
std::string policy_error(const std::string& text)
{
    Policy policy = Policy::defaults();
    try {
        policy.merge_toml(text, "site.toml");
    } catch (const base::Error& e) {
        return std::string(e.what());
    }
    return "no error";
}

} // namespace

TEST(DeepPolicy, BadDeepSettingsNameTheFileLineAndKey)
{
    const auto error_of = policy_error;
    EXPECT_EQ(
        error_of("[deep]\npcie_fraction = 1.5\n"), "site.toml:2: deep.pcie_fraction must be a fraction from 0 to 1");
    EXPECT_EQ(error_of("[deep]\ncopy_mib = 0\n"), "site.toml:2: deep.copy_mib must be a whole number from 1 to 16384");
    EXPECT_EQ(error_of("[[deep.floor]]\nmodel = \"A100\"\nh2d = 20\n"),
        "site.toml:3: unknown setting 'deep.floor.h2d' (known: model, h2d_gbps, d2h_gbps, d2d_gbps, p2p_gbps, "
        "allreduce_busbw_gbps, allreduce_gpus)");
    EXPECT_EQ(
        error_of("[[deep.floor]]\nh2d_gbps = 20\n"), "site.toml:1: a [[deep.floor]] needs model = \"<GPU name>\"");
    EXPECT_EQ(error_of("[[deep.floor]]\nmodel = \"A100\"\np2p_gbps = \"fast\"\n"),
        "site.toml:3: deep.floor p2p_gbps must be a number of GB/s, 0 or more");
    EXPECT_EQ(error_of("[deep]\nfloors = 3\n"), "site.toml:2: unknown setting 'deep.floors'");
}

TEST(DeepPolicy, AtMostTenThousandFloorsAndARepeatedModelReplacesItsFloor)
{
    auto floors = [](std::size_t n) {
        std::string text = "# site floors\n";
        for (std::size_t i = 0; i < n; ++i) {
            text += fmt::format("[[deep.floor]]\nmodel = \"GPU {}\"\nh2d_gbps = {}\n", i % 5000, i);
        }
        return text;
    };
    EXPECT_EQ(policy_error(floors(Policy::max_floors + 1)),
        "site.toml:2: 10001 [[deep.floor]] tables, more than the 10000 a policy may hold; keep one per GPU model");
    Policy policy = Policy::defaults();
    const std::size_t built_in = policy.floors.size();
    policy.merge_toml(floors(Policy::max_floors), "site.toml");
    EXPECT_EQ(policy.floors.size(), built_in + 5000) << "the second 5000 replace the first";
    policy.merge_toml("[[deep.floor]]\nmodel = \"gpu 7\"\nh2d_gbps = 1\n", "more.toml");
    EXPECT_EQ(policy.floors.size(), built_in + 5000);
    EXPECT_EQ(policy.floors[built_in + 7].model, "gpu 7") << "in the place of GPU 7, case aside";
    EXPECT_EQ(policy.floors[built_in + 7].h2d_gbps, 1.0);
    EXPECT_EQ(policy.floors[built_in + 8].h2d_gbps, 5008.0);
}

TEST(DeepPolicy, WholeNumbersMayBeWrittenAsFloatsButNotHugeOnes)
{
    Policy policy = Policy::defaults();
    policy.merge_toml("[deep]\ncopy_mib = 64.0\n[[deep.floor]]\nmodel = \"A100\"\nallreduce_gpus = 8.0\n", "site.toml");
    EXPECT_EQ(policy.copy_bytes, 64U << 20);
    const auto error_of = policy_error;
    // Out of int64's range: refused before any conversion (toml++'s own cast is undefined there;
    // the sanitizer build fails on it). Found by the policy_toml fuzzer.
    EXPECT_EQ(
        error_of("[deep]\ncopy_mib = 4.6e113\n"), "site.toml:2: deep.copy_mib must be a whole number from 1 to 16384");
    EXPECT_EQ(
        error_of("[deep]\ncopy_mib = 64.5\n"), "site.toml:2: deep.copy_mib must be a whole number from 1 to 16384");
    EXPECT_EQ(error_of("[gpus]\nexpected = -1e300\n"), "site.toml:2: gpus.expected must be a whole number, 0 or more");
    EXPECT_EQ(
        error_of("[limits]\nmin_nofile = inf\n"), "site.toml:2: limits.min_nofile must be a whole number, 0 or more");
    EXPECT_EQ(error_of("[[deep.floor]]\nmodel = \"A100\"\nallreduce_gpus = 9.3e18\n"),
        "site.toml:3: deep.floor allreduce_gpus must be a whole number from 2 to 1024");
}

TEST(Policy, VersionsAndNumbersThatWouldTurnACheckOffAreRefused)
{
    const auto error_of = policy_error;
    // A word compares as version 0, which every library passes.
    EXPECT_EQ(error_of("[libraries]\nmin_nccl = \"banana\"\n"),
        "site.toml:2: libraries.min_nccl must be a version string such as \"535.0\"");
    EXPECT_EQ(error_of("[driver]\nmin_version = \"535.\"\n"),
        "site.toml:2: driver.min_version must be a version string such as \"535.0\"");
    EXPECT_EQ(error_of("[libraries]\nmin_cudnn = \"\"\n"),
        "site.toml:2: libraries.min_cudnn must be a version string such as \"535.0\"");
    EXPECT_EQ(error_of("[driver]\nmin_version = \"550.54.15\"\n"), "no error");
    // NaN passes every comparison it is in; infinity fails every node.
    EXPECT_EQ(error_of("[limits]\nmin_shm_gib = nan\n"), "site.toml:2: limits.min_shm_gib must be a number, 0 or more");
    EXPECT_EQ(error_of("[network]\nib_min_rate_gbps = inf\n"),
        "site.toml:2: network.ib_min_rate_gbps must be a number, 0 or more");
    EXPECT_EQ(error_of("[[deep.floor]]\nmodel = \"A100\"\nh2d_gbps = nan\n"),
        "site.toml:3: deep.floor h2d_gbps must be a number of GB/s, 0 or more");
}

TEST(AllReduceJudge, BusbwAtOrAboveTheFloorForThisCountPasses)
{
    const auto findings = judge_one("allreduce", allreduce(8, "NVIDIA H100 80GB HBM3", 478));
    const auto* ok = find_code(findings, "allreduce.busbw_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->severity, Severity::pass);
    EXPECT_EQ(ok->message,
        "NCCL 2.21.5 all-reduce over 8 GPUs, 1024 MiB each: busbw 478 GB/s (algbw 273 GB/s, 3931 "
        "µs) (floor 460 GB/s for 8× H100)");
    const auto* transports = find_code(findings, "allreduce.transports");
    ASSERT_NE(transports, nullptr);
    EXPECT_EQ(transports->message, "NCCL connected the GPUs over p2p ×56");
}

TEST(AllReduceJudge, BusbwBelowTheFloorFails)
{
    const auto findings = judge_one("allreduce", allreduce(8, "NVIDIA A100-SXM4-80GB", 150));
    const auto* low = find_code(findings, "allreduce.busbw_low");
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->severity, Severity::fail);
    EXPECT_NE(low->message.find("busbw 150 GB/s"), std::string::npos);
    EXPECT_NE(low->message.find("below 228 GB/s (the GPU table's floor for 8× A100-80GB)"), std::string::npos)
        << low->message;
}

TEST(AllReduceJudge, AnotherGpuCountHasNoFloorAndSaysSo)
{
    const auto findings = judge_one("allreduce", allreduce(4, "NVIDIA H100 80GB HBM3", 150));
    EXPECT_EQ(find_code(findings, "allreduce.busbw_low"), nullptr);
    const auto* ok = find_code(findings, "allreduce.busbw_ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_NE(
        ok->message.find("(no floor for 4× NVIDIA H100 80GB HBM3 in the GPU table or the policy)"), std::string::npos)
        << ok->message;
}

TEST(AllReduceJudge, NcclLogFindingsComeThroughWithTheirCodes)
{
    auto facts = allreduce(2, "NVIDIA RTX A6000", 20);
    facts["allreduce"]["log"]["findings"] = {{{"code", "nccl.shm_not_p2p"}, {"severity", "warn"},
        {"message", "2 connections use SHM between GPUs of one host"}, {"remedy", "unset NCCL_P2P_DISABLE"}}};
    const auto findings = judge_one("allreduce", facts);
    const auto* shm = find_code(findings, "nccl.shm_not_p2p");
    ASSERT_NE(shm, nullptr);
    EXPECT_EQ(shm->severity, Severity::warn);
    // Its severity and remedy are nccl-log's row's, whatever the facts say.
    EXPECT_EQ(shm->remedy, code_in(base::nccl::finding_codes(), "nccl.shm_not_p2p").remedy);
}

TEST(AllReduceJudge, OneGpuIsASkipNamedSo)
{
    const nlohmann::json facts = {{"allreduce", {{"skipped", "1 GPU: an all-reduce needs two"}, {"single_gpu", true}}}};
    const auto findings = judge_one("allreduce", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "allreduce.single_gpu");
    EXPECT_EQ(findings[0].severity, Severity::skip);
}

TEST(DeepSelection, DeepProbesRunOnlyWithDeepOrWhenNamed)
{
    auto names = [](const std::vector<const doctor::engine::Probe*>& probes) {
        std::vector<std::string> out;
        for (const auto* p : probes) {
            out.push_back(p->name);
        }
        return out;
    };
    const auto quick = names(doctor::probes::select_probes("", ""));
    EXPECT_EQ(std::count(quick.begin(), quick.end(), "bandwidth"), 0);
    EXPECT_EQ(std::count(quick.begin(), quick.end(), "allreduce"), 0);
    const auto deep = names(doctor::probes::select_probes("", "", true));
    EXPECT_EQ(std::count(deep.begin(), deep.end(), "bandwidth"), 1);
    EXPECT_EQ(std::count(deep.begin(), deep.end(), "allreduce"), 1);
    EXPECT_EQ(names(doctor::probes::select_probes("bandwidth", "")), std::vector<std::string>{"bandwidth"});
    EXPECT_EQ(names(doctor::probes::select_probes("", "allreduce", true)).size(), deep.size() - 1);
}
