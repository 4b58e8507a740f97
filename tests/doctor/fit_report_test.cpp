// gpudoctor fit's answer from resolved inputs: global batch, split over unequal GPUs, pipeline
// split, learning rate, suggestions; and both renderers.
#include "doctor/fit/report.hpp"

#include "base/error.hpp"

#include <gtest/gtest.h>

using namespace doctor::fit;

namespace {

constexpr std::uint64_t GiB = std::uint64_t{1} << 30;

// A model whose numbers are easy: 1 GiB of activations per sample, 1000 parameters.
ModelSpec round_model()
{
    ModelSpec m;
    m.name = "round";
    m.params = 1000;
    m.activation_bytes = GiB;
    return m;
}

// Room for `batch` samples exactly: memory × 0.9 − 578 MiB (context, and cuBLAS for no GPU known)
// − 16 kB of fp32 Adam states ≥ batch GiB.
std::uint64_t memory_for(unsigned batch)
{
    return static_cast<std::uint64_t>((batch + 1) * GiB / 0.9);
}

FitRequest request(const std::vector<FitGpu>& gpus)
{
    FitRequest q;
    q.model = round_model();
    q.setup.precision = Precision::fp32;
    q.setup.optimizer = Optimizer::momentum;
    q.gpus = gpus;
    return q;
}

FitGpu gpu(const std::string& name, unsigned room_for, double speed)
{
    return FitGpu{name, memory_for(room_for), "gpu table", speed, std::nullopt, {}};
}

} // namespace

TEST(FitReport, MemoryForGivesTheBatchItSays)
{
    const FitReport r = analyse_fit(request({gpu("A", 40, 1)}));
    EXPECT_EQ(r.max_batch_per_gpu, 40u);
    EXPECT_EQ(r.global_batch, 40u);
    EXPECT_EQ(r.global_batch_from, "max batch");
    EXPECT_FALSE(r.split);
    EXPECT_TRUE(r.pipeline_layers.empty());
}

TEST(FitReport, K80IsHalfAV100SoItGetsHalfTheBatch)
{
    // The source example: K80 = ½ V100 → N and 2N; B = 96 → 32 and 64; loss weights N·b_i/B =
    // 2·32/96 = 2/3 and 2·64/96 = 4/3.
    FitRequest q = request({gpu("K80", 50, 0.5), gpu("V100", 100, 1.0)});
    q.global_batch = 96;
    const FitReport r = analyse_fit(q);
    ASSERT_TRUE(r.split);
    EXPECT_EQ(r.split->per_gpu, (std::vector<unsigned>{32, 64}));
    EXPECT_NEAR(r.split->loss_weight[0], 2.0 / 3, 1e-12);
    EXPECT_NEAR(r.split->loss_weight[1], 4.0 / 3, 1e-12);
    EXPECT_EQ(r.global_batch_from, "--global-batch");
    EXPECT_EQ(r.max_batch_per_gpu, 50u);
}

TEST(FitReport, LayersSplitAThirdAndTwoThirds)
{
    FitRequest q = request({gpu("K80", 50, 0.5), gpu("V100", 100, 1.0)});
    q.model.layers = 24;
    const FitReport r = analyse_fit(q);
    EXPECT_EQ(r.pipeline_layers, (std::vector<unsigned>{8, 16}));
    // Equal GPUs show the pipeline split only when --layers was given.
    FitRequest same = request({gpu("V100", 100, 1), gpu("V100", 100, 1)});
    same.model.layers = 24;
    EXPECT_TRUE(analyse_fit(same).pipeline_layers.empty());
    same.layers_given = true;
    EXPECT_EQ(analyse_fit(same).pipeline_layers, (std::vector<unsigned>{12, 12}));
}

TEST(FitReport, DefaultGlobalBatchKeepsEveryShareWithinItsGpu)
{
    // Speeds 1 and 2, max batches 50 and 80: B·1/3 ≤ 50 → B ≤ 150; B·2/3 ≤ 80 → B ≤ 120. B = 120:
    // 40 and 80.
    const FitReport r = analyse_fit(request({gpu("slow", 50, 1), gpu("fast", 80, 2)}));
    EXPECT_EQ(r.global_batch, 120u);
    EXPECT_EQ(r.global_batch_from, "balanced by speed");
    ASSERT_TRUE(r.split);
    EXPECT_EQ(r.split->per_gpu, (std::vector<unsigned>{40, 80}));
    // Equal GPUs: N × the max batch, weights 1.
    const FitReport same = analyse_fit(request({gpu("A", 30, 1), gpu("A", 30, 1), gpu("A", 30, 1)}));
    EXPECT_EQ(same.global_batch, 90u);
    EXPECT_EQ(same.global_batch_from, "max batch");
    EXPECT_EQ(same.split->per_gpu, (std::vector<unsigned>{30, 30, 30}));
}

TEST(FitReport, GlobalBatchBeyondTheGpusSaysAccumulate)
{
    FitRequest q = request({gpu("A", 10, 1), gpu("A", 10, 1)});
    q.global_batch = 50;
    const FitReport r = analyse_fit(q);
    EXPECT_FALSE(r.split);
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings.back().code, "fit.batch_over_one_step");
    EXPECT_EQ(r.findings.back().severity, base::Severity::warn);
    // 50 over room for 20: at least ceil(50 / 20) = 3 steps, and the fewest that divide 50 evenly
    // (--grad-accum needs equal micro-batches): 5 of 10.
    EXPECT_NE(
        r.findings.back().message.find("more than these GPUs hold in one step (20): accumulate gradients over 5 steps"),
        std::string::npos)
        << r.findings.back().message;
    EXPECT_EQ(r.lr->global_batch, 50u);
}

TEST(FitReport, NothingFitsOnTheSmallestGpu)
{
    FitRequest q = request({gpu("big", 10, 1), FitGpu{"small", GiB, "gpu table", 1, std::nullopt, {}}});
    const FitReport r = analyse_fit(q);
    EXPECT_EQ(r.max_batch_per_gpu, 0u);
    ASSERT_TRUE(r.failing_gpu);
    EXPECT_EQ(*r.failing_gpu, 1u);
    EXPECT_EQ(r.global_batch, 0u);
    EXPECT_FALSE(r.lr);
    EXPECT_FALSE(r.split);
    // One fail finding about that GPU: what the exit status, --junit and --prometheus judge.
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].code, "fit.nothing_fits");
    EXPECT_EQ(r.findings[0].severity, base::Severity::fail);
    EXPECT_EQ(r.findings[0].subject, "gpu 1");
    EXPECT_NE(
        r.findings[0].message.find("on GPU 1 (small): one sample's activations need up to 1 GiB"), std::string::npos)
        << r.findings[0].message;
    const std::string text = render_fit_text(r);
    EXPECT_NE(text.find("Max batch per GPU: 0, nothing fits, not even batch 1, on GPU 1 (small)"), std::string::npos)
        << text;
    // The max-batch line says it; the findings list does not repeat it.
    EXPECT_EQ(text.find("fit.nothing_fits"), std::string::npos) << text;
    const auto json = render_fit_json(r);
    EXPECT_EQ(json["max_batch_per_gpu"], 0);
    EXPECT_EQ(json["fits"], false);
    EXPECT_EQ(json["suggestions"]["gpu"], 1);
    ASSERT_EQ(json["findings"].size(), 1u);
    EXPECT_EQ(json["findings"][0]["code"], "fit.nothing_fits");
    EXPECT_EQ(json["findings"][0]["severity"], "fail");
    EXPECT_TRUE(json["global_batch"].is_null());
}

TEST(FitReport, LearningRateFollowsTheGlobalBatch)
{
    FitRequest q = request({gpu("A", 64, 1), gpu("A", 64, 1), gpu("A", 64, 1), gpu("A", 64, 1)});
    q.base_lr = 0.1;
    q.base_batch = 64;
    const FitReport r = analyse_fit(q);
    // B = 4 × 64 = 256; k = 4; lr = 0.4.
    ASSERT_TRUE(r.lr);
    EXPECT_DOUBLE_EQ(*r.lr->lr, 0.4);
    const std::string text = render_fit_text(r);
    EXPECT_NE(text.find("k = 256 / 64 = 4; lr = 0.1 × 4 = 0.4"), std::string::npos) << text;
    EXPECT_NE(text.find("start at 0.1 and raise it linearly to 0.4 over the first 5 epochs"), std::string::npos);
    EXPECT_NE(text.find("compare against a run with the learning rate unscaled (0.1)"), std::string::npos);
}

TEST(FitReport, JsonCarriesTheIssueKeys)
{
    FitRequest q = request({gpu("K80", 50, 0.5), gpu("V100", 100, 1.0)});
    q.global_batch = 96;
    const auto json = render_fit_json(analyse_fit(q));
    EXPECT_EQ(json["max_batch_per_gpu"], 50);
    EXPECT_EQ(json["per_gpu_batch"], nlohmann::json({32, 64}));
    EXPECT_EQ(json["loss_weight"].size(), 2u);
    EXPECT_EQ(json["gpus"][1]["max_batch"], 100);
    EXPECT_EQ(json["breakdown"]["activations_per_sample"]["bytes"], GiB);
    EXPECT_EQ(json["breakdown"]["states"]["bytes_per_param"]["total"], 12);
    EXPECT_EQ(json["learning_rate"]["rule"], "linear");
}

TEST(FitReport, NoGpuIsAnError)
{
    EXPECT_THROW(analyse_fit(request({})), base::Error);
}

TEST(FitReport, GradientAccumulationMultipliesTheGlobalBatch)
{
    // 40 per GPU, 2 GPUs, 3 micro-batches: 240 per optimizer step, 80 per micro-batch.
    FitRequest q = request({gpu("A", 40, 1), gpu("A", 40, 1)});
    q.setup.grad_accum = 3;
    FitReport r = analyse_fit(q);
    EXPECT_EQ(r.max_batch_per_gpu, 40u);
    EXPECT_EQ(r.micro_batch, 80u);
    EXPECT_EQ(r.global_batch, 240u);
    ASSERT_TRUE(r.lr);
    EXPECT_EQ(r.lr->global_batch, 240u);
    EXPECT_NE(
        render_fit_text(r).find("Global batch: 240 (2 GPUs × 40, 3 micro-batches of 80 per step)"), std::string::npos)
        << render_fit_text(r);
    EXPECT_EQ(render_fit_json(r)["micro_batch"], 80);
    EXPECT_EQ(render_fit_json(r)["training"]["grad_accum"], 3);
    // A global batch per step is split a micro-batch at a time.
    q.global_batch = 150;
    r = analyse_fit(q);
    EXPECT_EQ(r.micro_batch, 50u);
    ASSERT_TRUE(r.split);
    EXPECT_EQ(r.split->per_gpu, (std::vector<unsigned>{25, 25}));
    EXPECT_TRUE(r.findings.empty());
    // More than one micro-batch holds: the warning says how many micro-batches would do.
    q.global_batch = 300;
    r = analyse_fit(q);
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].code, "fit.batch_over_one_step");
    EXPECT_NE(r.findings[0].message.find("in 3 micro-batches of 100 is more than these GPUs hold in one (80): "
                                         "accumulate over 4 (--grad-accum 4)"),
        std::string::npos)
        << r.findings[0].message;
    // The count suggested divides the global batch: 330 in shares of at most 80 is 5 of 66, not 4.
    q.global_batch = 330;
    r = analyse_fit(q);
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_NE(r.findings[0].message.find("accumulate over 5 (--grad-accum 5)"), std::string::npos)
        << r.findings[0].message;
    // Where nothing fits, the global batch given is still split into its micro-batches.
    FitRequest small = request({FitGpu{"tiny", GiB, "gpu table", 1, std::nullopt, {}}});
    small.setup.grad_accum = 3;
    small.global_batch = 240;
    r = analyse_fit(small);
    EXPECT_EQ(r.max_batch_per_gpu, 0u);
    EXPECT_EQ(r.micro_batch, 80u);
    small.global_batch = 100;
    EXPECT_THROW(analyse_fit(small), base::Error);
    // Not a multiple: an input error.
    q.global_batch = 100;
    EXPECT_THROW(analyse_fit(q), base::Error);
}
