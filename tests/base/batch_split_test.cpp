#include "base/batch_split.hpp"
#include "base/error.hpp"
#include "tests/support/error_of.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

using base::split_batch;
using base::split_layers;

namespace {

using Batches = std::vector<unsigned>;
using Weights = std::vector<double>;

std::vector<double> exact_shares(unsigned total, const std::vector<double>& speeds)
{
    const double sum = std::accumulate(speeds.begin(), speeds.end(), 0.0);
    std::vector<double> out;
    for (double s : speeds) {
        out.push_back(total * s / sum);
    }
    return out;
}

} // namespace

using test_support::error_of;

TEST(SplitBatch, AK80AtHalfAV100sSpeedGetsHalfItsBatch)
{
    // One K80 and one V100: N and 2N.
    auto two = split_batch(96, {1, 2});
    EXPECT_EQ(two.per_gpu, (Batches{32, 64}));
    EXPECT_DOUBLE_EQ(two.loss_weight[0], 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(two.loss_weight[1], 4.0 / 3.0);
    EXPECT_TRUE(two.notes.empty());

    // One K80 and two V100s: 19.2, 38.4, 38.4; the unit left after the floors (19 + 38 + 38 = 95)
    // goes to the larger remainder, the first V100 on the tie.
    auto three = split_batch(96, {1, 2, 2});
    EXPECT_EQ(three.per_gpu, (Batches{19, 39, 38}));
    EXPECT_EQ(three.loss_weight, (Weights{0.59375, 1.21875, 1.1875})); // 3·19/96, 3·39/96, 3·38/96
    EXPECT_TRUE(three.notes.empty());

    EXPECT_EQ(split_batch(96, {0.5, 1, 1}).per_gpu, (Batches{19, 39, 38})) << "only the ratios count";
}

TEST(SplitBatch, EqualSpeedsShareEquallyAndTheRemainderGoesToTheFirstGpus)
{
    auto even = split_batch(64, {1, 1, 1, 1});
    EXPECT_EQ(even.per_gpu, (Batches{16, 16, 16, 16}));
    EXPECT_EQ(even.loss_weight, (Weights{1, 1, 1, 1}));

    auto thirds = split_batch(10, {1, 1, 1});
    EXPECT_EQ(thirds.per_gpu, (Batches{4, 3, 3}));
    EXPECT_EQ(thirds.loss_weight, (Weights{1.2, 0.9, 0.9}));

    // 100/7 = 14.29: the floors make 98; the first two GPUs take the other two.
    EXPECT_EQ(split_batch(100, std::vector<double>(7, 1)).per_gpu, (Batches{15, 15, 14, 14, 14, 14, 14}));
}

TEST(SplitBatch, RoundingStillSumsToTheGlobalBatch)
{
    // 0.1 + 0.2 is not 0.3 in binary: the shares 10, 20, 30 come out a hair off and must not lose a sample.
    EXPECT_EQ(split_batch(60, {0.1, 0.2, 0.3}).per_gpu, (Batches{10, 20, 30}));
    // 7·1/6, 7·2/6, 7·3/6 = 1.17, 2.33, 3.5: floors 1 + 2 + 3 = 6, the last unit to the 0.5.
    EXPECT_EQ(split_batch(7, {1, 2, 3}).per_gpu, (Batches{1, 2, 4}));
    // 10·3/7 = 4.29, 10·4/7 = 5.71: floors 4 + 5, the unit to the 0.71.
    EXPECT_EQ(split_batch(10, {3, 4}).per_gpu, (Batches{4, 6}));
    EXPECT_EQ(split_batch(1, {1}).per_gpu, (Batches{1}));
    EXPECT_EQ(split_batch(1, {1}).loss_weight, (Weights{1}));
}

TEST(SplitBatch, ASmallGlobalBatchLeavesAGpuWithoutSamplesAndSaysSo)
{
    auto split = split_batch(2, {1, 1, 1});
    EXPECT_EQ(split.per_gpu, (Batches{1, 1, 0}));
    EXPECT_EQ(split.loss_weight, (Weights{1.5, 1.5, 0}));
    ASSERT_EQ(split.notes.size(), 1U);
    EXPECT_EQ(split.notes[0],
        "GPU 2 gets no samples (its share by speed is 0.6667): it only joins the gradient "
        "all-reduce; raise the global batch to give it work");
}

TEST(SplitBatch, ACappedGpuKeepsItsCapAndTheOthersShareTheRestBySpeed)
{
    // Shares 25 each; GPU 0 holds 10, the 90 left go to the three others equally.
    auto split = split_batch(100, {1, 1, 1, 1}, {10, 0, 0, 0});
    EXPECT_EQ(split.per_gpu, (Batches{10, 30, 30, 30}));
    EXPECT_EQ(split.loss_weight, (Weights{0.4, 1.2, 1.2, 1.2}));
    ASSERT_EQ(split.notes.size(), 1U);
    EXPECT_EQ(split.notes[0],
        "GPU 0 is capped at 10 (its share by speed is 25); the rest went to the other GPUs by "
        "speed");

    // Shares 22.5, 22.5, 45: nothing over the cap of 30, plain rounding.
    EXPECT_EQ(split_batch(90, {1, 1, 2}, {30, 0, 0}).per_gpu, (Batches{23, 22, 45}));
    // Shares 36, 18, 36: GPU 0 holds 30, the 60 left go to speeds 1 and 2 as 20 and 40.
    EXPECT_EQ(split_batch(90, {2, 1, 2}, {30, 0, 0}).per_gpu, (Batches{30, 20, 40}));

    // Caps that leave a fraction to round: 10/3 each, GPU 0 holds 3, the 7 left make 3.5 and 3.5.
    EXPECT_EQ(split_batch(10, {1, 1, 1}, {3, 0, 0}).per_gpu, (Batches{3, 4, 3}));
    // Caps that hold exactly the global batch.
    EXPECT_EQ(split_batch(30, {1, 1}, {10, 20}).per_gpu, (Batches{10, 20}));
    // A cap above the share changes nothing.
    EXPECT_EQ(split_batch(96, {1, 2, 2}, {40, 40, 40}).per_gpu, (Batches{19, 39, 38}));
}

TEST(SplitBatch, WaterFillingRepeatsUntilNoShareExceedsACap)
{
    // Shares 25, 25, 50: GPU 2 is capped at 45. The 55 left make 27.5 each: now GPU 1 is over its
    // cap of 26. The 29 left go to GPU 0.
    auto split = split_batch(100, {1, 1, 2}, {0, 26, 45});
    EXPECT_EQ(split.per_gpu, (Batches{29, 26, 45}));
    EXPECT_EQ(split.loss_weight, (Weights{0.87, 0.78, 1.35}));
    ASSERT_EQ(split.notes.size(), 2U);
    EXPECT_NE(split.notes[0].find("GPU 1 is capped at 26 (its share by speed is 25)"), std::string::npos);
    EXPECT_NE(split.notes[1].find("GPU 2 is capped at 45 (its share by speed is 50)"), std::string::npos);
}

TEST(SplitBatch, CapsThatHoldLessThanTheGlobalBatchAreAnError)
{
    EXPECT_EQ(error_of([] {
        split_batch(40, {1, 1}, {10, 20});
    }),
        "global batch 40: the GPUs hold only 30 samples together (at most 10, 20 per GPU); lower the global batch to "
        "30 or add GPUs");
    EXPECT_NO_THROW(split_batch(1000, {1, 1}, {10, 0})) << "a GPU without a cap takes any rest";
    EXPECT_EQ(split_batch(1000, {1, 1}, {10, 0}).per_gpu, (Batches{10, 990}));
}

TEST(SplitBatch, InvalidInputsAreErrors)
{
    EXPECT_EQ(error_of([] { split_batch(0, {1}); }), "global batch 0: expected at least 1 sample");
    EXPECT_EQ(error_of([] { split_batch(8, {}); }), "speeds: none given; give one relative speed per GPU, like 1,2,2");
    EXPECT_EQ(error_of([] {
        split_batch(8, {1, 0});
    }),
        "speed of GPU 1 is 0: expected a finite number above 0; give relative speeds like 1,2,2");
    EXPECT_NE(error_of([] { split_batch(8, {-1, 1}); }).find("speed of GPU 0 is -1"), std::string::npos);
    EXPECT_NE(error_of([] { split_batch(8, {1, std::nan("")}); }).find("speed of GPU 1 is nan"), std::string::npos);
    EXPECT_NE(error_of([] { split_batch(8, {INFINITY, 1}); }).find("speed of GPU 0 is inf"), std::string::npos);
    EXPECT_EQ(error_of([] { split_batch(8, {1, 1}, {4}); }), "1 caps for 2 GPUs: give one cap per GPU (0 = no cap)");
}

TEST(SplitBatch, HugeAndTinySpeedsStayFinite)
{
    EXPECT_EQ(split_batch(4, {1e308, 1e308}).per_gpu, (Batches{2, 2}));
    EXPECT_EQ(split_batch(4, {1e-300, 3e-300}).per_gpu, (Batches{1, 3}));
}

TEST(SplitBatch, PropertySumsToTheBatchStaysWithinOneOfTheShareAndWeightsAverageToOne)
{
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<unsigned> gpus(1, 16);
    std::uniform_int_distribution<unsigned> batch(1, 5000);
    std::uniform_real_distribution<double> speed(0.05, 20.0);
    for (int trial = 0; trial < 2000; ++trial) {
        std::vector<double> speeds(gpus(rng));
        for (auto& s : speeds) {
            s = trial % 3 == 0 ? std::round(speed(rng)) + 1 : speed(rng); // whole numbers tie more often
        }
        const unsigned b = batch(rng);
        const auto split = split_batch(b, speeds);
        const auto share = exact_shares(b, speeds);
        ASSERT_EQ(split.per_gpu.size(), speeds.size());
        ASSERT_EQ(std::accumulate(split.per_gpu.begin(), split.per_gpu.end(), 0U), b) << "trial " << trial;
        double weights = 0;
        for (std::size_t i = 0; i < speeds.size(); ++i) {
            ASSERT_LT(std::abs(split.per_gpu[i] - share[i]), 1.0) << "trial " << trial << " GPU " << i;
            EXPECT_DOUBLE_EQ(split.loss_weight[i], static_cast<double>(speeds.size()) * split.per_gpu[i] / b);
            weights += split.loss_weight[i];
        }
        ASSERT_NEAR(weights / static_cast<double>(speeds.size()), 1.0, 1e-12) << "trial " << trial;
    }
}

TEST(SplitBatch, PropertyCapsAreKeptAndTheBatchIsWhole)
{
    std::mt19937 rng(7);
    std::uniform_int_distribution<unsigned> gpus(1, 8);
    std::uniform_int_distribution<unsigned> cap(0, 300);
    std::uniform_real_distribution<double> speed(0.1, 10.0);
    int checked = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        std::vector<double> speeds(gpus(rng));
        std::vector<unsigned> caps(speeds.size());
        for (std::size_t i = 0; i < speeds.size(); ++i) {
            speeds[i] = speed(rng);
            caps[i] = cap(rng);
        }
        const unsigned room = std::accumulate(caps.begin(), caps.end(), 0U);
        const bool unbounded = std::find(caps.begin(), caps.end(), 0U) != caps.end();
        const unsigned b = std::uniform_int_distribution<unsigned>(1, room + 50)(rng);
        if (!unbounded && b > room) {
            EXPECT_THROW(split_batch(b, speeds, caps), base::Error);
            continue;
        }
        const auto split = split_batch(b, speeds, caps);
        ASSERT_EQ(std::accumulate(split.per_gpu.begin(), split.per_gpu.end(), 0U), b) << "trial " << trial;
        for (std::size_t i = 0; i < speeds.size(); ++i) {
            if (caps[i] != 0) {
                ASSERT_LE(split.per_gpu[i], caps[i]) << "trial " << trial << " GPU " << i;
            }
        }
        ++checked;
    }
    EXPECT_GT(checked, 1000);
}

TEST(SplitLayers, PipelineStagesFollowTheSpeeds)
{
    // A K80 at half a V100's speed: a third and two thirds of the layers.
    EXPECT_EQ(split_layers(24, {1, 2}), (Batches{8, 16}));
    EXPECT_EQ(split_layers(48, {1, 2, 2, 1}), (Batches{8, 16, 16, 8}));
    // 4/3 each: the first stage takes the unit left over.
    EXPECT_EQ(split_layers(4, {1, 1, 1}), (Batches{2, 1, 1}));
    EXPECT_EQ(split_layers(25, {1, 2}), (Batches{8, 17}));
}

TEST(SplitLayers, EveryStageGetsALayerWhenThereAreEnough)
{
    // 2·1/11 = 0.18 rounds to 0: the slow GPU takes a layer from the fast one.
    EXPECT_EQ(split_layers(2, {1, 10}), (Batches{1, 1}));
    // Shares 0.02, 2.49, 2.49 round to 0, 3, 2: the layer comes from the stage most above its share.
    EXPECT_EQ(split_layers(5, {1, 100, 100}), (Batches{1, 2, 2}));
    // Fewer layers than GPUs: some stages stay empty.
    EXPECT_EQ(split_layers(2, {1, 1, 1}), (Batches{1, 1, 0}));
}

TEST(SplitLayers, InvalidInputsAreErrors)
{
    EXPECT_EQ(error_of([] { split_layers(0, {1, 2}); }), "layers 0: expected at least 1 layer");
    EXPECT_THROW(split_layers(4, {}), base::Error);
    EXPECT_THROW(split_layers(4, {1, -2}), base::Error);
}

TEST(SplitLayers, PropertySumsToTheLayersAndNoStageIsEmpty)
{
    std::mt19937 rng(99);
    std::uniform_int_distribution<unsigned> gpus(1, 12);
    std::uniform_real_distribution<double> speed(0.01, 50.0);
    for (int trial = 0; trial < 2000; ++trial) {
        std::vector<double> speeds(gpus(rng));
        for (auto& s : speeds) {
            s = speed(rng);
        }
        const unsigned layers = std::uniform_int_distribution<unsigned>(1, 200)(rng);
        const auto stages = split_layers(layers, speeds);
        ASSERT_EQ(std::accumulate(stages.begin(), stages.end(), 0U), layers) << "trial " << trial;
        if (layers >= speeds.size()) {
            ASSERT_EQ(std::count(stages.begin(), stages.end(), 0U), 0) << "trial " << trial;
        }
    }
}

TEST(ParseSpeeds, ReadsCommaSeparatedPositiveNumbers)
{
    EXPECT_EQ(base::parse_speeds("1,2,2", "--speeds"), (std::vector<double>{1, 2, 2}));
    EXPECT_EQ(base::parse_speeds("0.5,1,1", "--speeds"), (std::vector<double>{0.5, 1, 1}));
    EXPECT_EQ(base::parse_speeds("3", "--speeds"), (std::vector<double>{3}));
    EXPECT_EQ(base::parse_speeds(" 1, 2.5 ,1e2", "--speeds"), (std::vector<double>{1, 2.5, 100}));
}

TEST(ParseSpeeds, RejectsWhatIsNotASpeed)
{
    auto error = [](const std::string& text) { return error_of([&] { base::parse_speeds(text, "--speeds"); }); };
    const std::string hint = "; give relative speeds as positive numbers, like 1,2,2 or 0.5,1,1";
    EXPECT_EQ(error(""), "--speeds '': no speeds" + hint);
    EXPECT_EQ(error("1,,2"), "--speeds 1,,2: speed 2 is empty" + hint);
    EXPECT_EQ(error("1,2,"), "--speeds 1,2,: speed 3 is empty" + hint);
    EXPECT_EQ(error("1,x,2"), "--speeds 1,x,2: 'x' is not a number" + hint);
    EXPECT_EQ(error("1,2x"), "--speeds 1,2x: '2x' is not a number" + hint);
    EXPECT_EQ(error("1;2"), "--speeds 1;2: '1;2' is not a number" + hint);
    EXPECT_EQ(error("1,0"), "--speeds 1,0: speed 0 is not above 0" + hint);
    EXPECT_EQ(error("-1,2"), "--speeds -1,2: speed -1 is not above 0" + hint);
    EXPECT_EQ(error("1,nan"), "--speeds 1,nan: 'nan' is not a finite number" + hint);
    EXPECT_EQ(error("inf"), "--speeds inf: 'inf' is not a finite number" + hint);
    EXPECT_EQ(error("1e999"), "--speeds 1e999: '1e999' is out of range" + hint);
    EXPECT_EQ(error("0x10"), "--speeds 0x10: '0x10' is not a number" + hint);
    EXPECT_NE(error_of([] { base::parse_speeds("a", "speeds"); }).rfind("speeds a:", 0), std::string::npos);
}
