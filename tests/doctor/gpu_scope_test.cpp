#include "base/error.hpp"
#include "doctor/engine/gpu_scope.hpp"
#include "tests/support/doctor_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using doctor::engine::GpuScope;
using doctor::engine::ProbeResult;
using doctor::engine::Severity;
using test_support::make_finding;
using test_support::probe_named;

// Four GPUs as the nvml collector reports them.
doctor::engine::Facts four_gpus(const char* second_name = "NVIDIA A100-SXM4-80GB")
{
    nlohmann::json gpus = nlohmann::json::array();
    // NOLINTNEXTLINE(readability-magic-numbers)
    for (unsigned i = 0; i < 4; ++i) {
        gpus.push_back(nlohmann::json{{"index", i}, {"bus_id", fmt::format("0000:{:02x}:00.0", 0x07 + 8 * i)},
            {"name", i == 1 ? second_name : "NVIDIA A100-SXM4-80GB"}, {"uuid", fmt::format("GPU-{}aaa", i)}});
    }
    return test_support::facts_of({{"nvml", {{"driver_file", nullptr}, {"nvml_loaded", true}, {"gpus", gpus}}}});
}

TEST(GpuScope, SubjectsNameGpusOnlyAsGpuAndANumber)
{
    EXPECT_EQ(doctor::engine::subject_gpus("gpu 3 (0000:47:00.0)"), (std::vector<unsigned>{3}));
    EXPECT_EQ(
        doctor::engine::subject_gpus("gpu 0 (0000:07:00.0) ↔ gpu 7 (0000:bd:00.0)"), (std::vector<unsigned>{0, 7}));
    EXPECT_EQ(doctor::engine::subject_gpus("gpu 1 (a) → gpu 12 (b)"), (std::vector<unsigned>{1, 12}));
    EXPECT_EQ(doctor::engine::subject_gpus("gpu 2"), (std::vector<unsigned>{2}));
    for (const char* none : {"host", "gpu-node", "gpu01", "gpu7", "mlx5_0 port 1", "gpu x", "agpu 3", "gpu 3x", ""}) {
        EXPECT_TRUE(doctor::engine::subject_gpus(none).empty()) << none;
    }
}

TEST(GpuScope, OptionNamesGpusByIndexBusIdOrUuid)
{
    const auto scope = doctor::engine::gpu_scope(four_gpus(), "3,0000:0f:00.0,GPU-2aaa", nullptr);
    EXPECT_EQ(scope.gpus, (std::vector<unsigned>{1, 2, 3}));
    EXPECT_EQ(scope.from, "--gpus 3,0000:0f:00.0,GPU-2aaa");
    EXPECT_EQ(doctor::engine::scope_line(scope), "gpus 1, 2, 3 (--gpus 3,0000:0f:00.0,GPU-2aaa)");
    EXPECT_THROW(doctor::engine::gpu_scope(four_gpus(), "4", nullptr), base::Error);
    EXPECT_THROW(doctor::engine::gpu_scope(four_gpus(), "1,1", nullptr), base::Error);
}

TEST(GpuScope, TheJobsEnvironmentWhenNoOption)
{
    const std::map<std::string, std::string> rank = {
        {"GPURUN_GPU_BUS_ID", "0000:17:00.0"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}};
    auto scope = doctor::engine::gpu_scope(four_gpus(), "", &rank);
    EXPECT_EQ(scope.gpus, (std::vector<unsigned>{2})) << "gpurun's own variable first";
    EXPECT_EQ(scope.from, "GPURUN_GPU_BUS_ID=0000:17:00.0");

    const std::map<std::string, std::string> cvd = {{"CUDA_VISIBLE_DEVICES", "GPU-3aaa,0"}};
    scope = doctor::engine::gpu_scope(four_gpus(), "", &cvd);
    EXPECT_EQ(scope.gpus, (std::vector<unsigned>{0, 3}));
    EXPECT_TRUE(scope.note.empty());

    // No environment (a snapshot) or none set: every GPU.
    EXPECT_TRUE(doctor::engine::gpu_scope(four_gpus(), "", nullptr).all());
    const std::map<std::string, std::string> nothing;
    EXPECT_TRUE(doctor::engine::gpu_scope(four_gpus(), "", &nothing).all());
    EXPECT_EQ(doctor::engine::scope_line(doctor::engine::gpu_scope(four_gpus(), "", &nothing)), "");
}

TEST(GpuScope, AnEnvironmentNamingNoGpuHereJudgesEveryGpuAndSaysSo)
{
    const std::map<std::string, std::string> slurm = {{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}};
    const auto scope = doctor::engine::gpu_scope(four_gpus(), "", &slurm);
    EXPECT_TRUE(scope.all());
    EXPECT_NE(scope.note.find("CUDA_VISIBLE_DEVICES=NoDevFiles names no GPU"), std::string::npos) << scope.note;
    EXPECT_TRUE(doctor::engine::gpu_scope({}, "", &slurm).all());
}

TEST(GpuScope, CudaIndexesOnMixedGpusWithoutPciOrderGetANote)
{
    const std::map<std::string, std::string> cvd = {{"CUDA_VISIBLE_DEVICES", "1"}};
    EXPECT_TRUE(doctor::engine::gpu_scope(four_gpus(), "", &cvd).note.empty()) << "one model: both orders agree";
    const auto mixed = doctor::engine::gpu_scope(four_gpus("NVIDIA H100 80GB HBM3"), "", &cvd);
    EXPECT_EQ(mixed.gpus, (std::vector<unsigned>{1}));
    EXPECT_NE(mixed.note.find("CUDA_DEVICE_ORDER=PCI_BUS_ID"), std::string::npos);
    const std::map<std::string, std::string> ordered = {
        {"CUDA_VISIBLE_DEVICES", "1"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
    EXPECT_TRUE(doctor::engine::gpu_scope(four_gpus("NVIDIA H100 80GB HBM3"), "", &ordered).note.empty());
}

TEST(GpuScope, FindingsAboutOtherGpusAreLeftOutNodeWideOnesStay)
{
    std::vector<ProbeResult> results = {
        {&probe_named("gpus"),
            {make_finding("gpus.count", Severity::pass, "host", "4 GPUs"),
                make_finding("gpus.ecc_uncorrected", Severity::fail, "gpu 1 (0000:0f:00.0)", "4 errors"),
                make_finding("gpus.ok", Severity::pass, "gpu 2 (0000:17:00.0)", "fine")}},
        {&probe_named("p2p"),
            {make_finding("p2p.no_access", Severity::fail, "gpu 1 (0000:0f:00.0) ↔ gpu 2 (0000:17:00.0)", "no P2P")}},
        {&probe_named("driver"), {}},
    };
    GpuScope scope;
    scope.gpus = {2};
    scope.from = "--gpus 2";
    doctor::engine::keep_in_scope(results, scope);
    ASSERT_EQ(results[0].findings.size(), 2U);
    EXPECT_EQ(results[0].findings[0].code, "gpus.count");
    EXPECT_EQ(results[0].findings[1].code, "gpus.ok");
    ASSERT_EQ(results[1].findings.size(), 1U) << "a pair with a GPU outside is left out; the probe says why";
    EXPECT_EQ(results[1].findings[0].code, "p2p.skip");
    EXPECT_EQ(results[1].findings[0].severity, Severity::skip);
    EXPECT_NE(results[1].findings[0].message.find("gpu 2 (--gpus 2)"), std::string::npos);
    EXPECT_TRUE(results[2].findings.empty()) << "a probe with nothing to say keeps saying nothing";

    std::vector<ProbeResult> all = {{&probe_named("gpus"),
        {make_finding("gpus.ecc_uncorrected", Severity::fail, "gpu 1 (0000:0f:00.0)", "4 errors")}}};
    doctor::engine::keep_in_scope(all, GpuScope{});
    EXPECT_EQ(all[0].findings.size(), 1U);
}

TEST(GpuScope, JsonSaysWhichGpusAndWhy)
{
    GpuScope scope;
    EXPECT_EQ(
        doctor::engine::scope_json(scope), (nlohmann::json{{"gpus", nullptr}, {"from", nullptr}, {"note", nullptr}}));
    scope.gpus = {0, 3};
    scope.from = "CUDA_VISIBLE_DEVICES=0,3";
    EXPECT_EQ(doctor::engine::scope_json(scope),
        (nlohmann::json{{"gpus", {0, 3}}, {"from", "CUDA_VISIBLE_DEVICES=0,3"}, {"note", nullptr}}));
}

} // namespace
