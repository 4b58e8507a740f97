#include "base/error.hpp"
#include "launcher/global_batch.hpp"

#include <gtest/gtest.h>

using launcher::BatchOptions;
using launcher::split_over_ranks;

namespace {

std::string error_of(const BatchOptions& options, unsigned ranks)
{
    try {
        split_over_ranks(options, ranks);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(GlobalBatch, RanksShareByTheirSpeedsInRankOrder)
{
    auto split = split_over_ranks({96, {1, 2, 2}}, 3);
    EXPECT_EQ(split.per_gpu, (std::vector<unsigned>{19, 39, 38}));
    auto two = split_over_ranks({10, {1, 4}}, 2);
    EXPECT_EQ(two.per_gpu, (std::vector<unsigned>{2, 8}));
    EXPECT_EQ(launcher::format_loss_weight(two.loss_weight[0]), "0.4");
    EXPECT_EQ(launcher::format_loss_weight(two.loss_weight[1]), "1.6");
}

TEST(GlobalBatch, WithoutSpeedsRanksShareEqually)
{
    EXPECT_EQ(split_over_ranks({10, {}}, 3).per_gpu, (std::vector<unsigned>{4, 3, 3}))
        << "10 is not divisible by 3: the first rank takes the unit left over";
    EXPECT_EQ(split_over_ranks({64, {}}, 8).per_gpu, std::vector<unsigned>(8, 8));
}

TEST(GlobalBatch, SpeedsMustMatchTheRanks)
{
    EXPECT_EQ(
        error_of({96, {1, 2, 2}}, 4), "--speeds 1,2,2: 3 speeds for 4 ranks; give one speed per rank, in rank order");
    EXPECT_EQ(error_of({96, {1}}, 2), "--speeds 1: 1 speed for 2 ranks; give one speed per rank, in rank order");
}

TEST(GlobalBatch, ARankWithoutSamplesIsAnErrorThatSaysWhatBatchWouldDo)
{
    EXPECT_EQ(error_of({2, {}}, 3),
        "--global-batch 2: rank 2 of 3 would get no samples; the smallest global batch that gives every rank a "
        "sample is 3");
    // Shares 5·1/12, 5·2/12, 5·9/12 = 0.42, 0.83, 3.75 round to 0, 1, 4; at 6 they are 0.5, 1, 4.5
    // and the first rank takes the unit on the tie.
    EXPECT_EQ(error_of({5, {1, 2, 9}}, 3),
        "--global-batch 5: rank 0 of 3 would get no samples at speeds 1,2,9; the smallest global batch that gives "
        "every rank a sample is 6");
    EXPECT_EQ(error_of({2, {}}, 4),
        "--global-batch 2: ranks 2, 3 of 4 would get no samples; the smallest global batch that gives every rank a "
        "sample is 4");
    // A speed so small that no batch gives its rank a sample.
    EXPECT_EQ(error_of({8, {1e-12, 1}}, 2),
        "--global-batch 8: rank 0 of 2 would get no samples at speeds 1e-12,1; raise the slowest ranks' speeds or "
        "leave those ranks out");
    // Share B·1e-6/1.000001 takes the unit left over once it exceeds 0.5: from 500001 on.
    EXPECT_EQ(error_of({8, {1e-6, 1}}, 2),
        "--global-batch 8: rank 0 of 2 would get no samples at speeds 1e-06,1; the smallest global batch that gives "
        "every rank a sample is 500001");
    // Beyond the search (a million batches for two ranks): the batch at which every share is 1.
    EXPECT_EQ(error_of({8, {1e-7, 1}}, 2),
        "--global-batch 8: rank 0 of 2 would get no samples at speeds 1e-07,1; a global batch of 10000001 or more "
        "gives every rank a sample");
    EXPECT_EQ(error_of({0, {}}, 3), "--global-batch 0: expected at least one sample per rank");
}

TEST(GlobalBatch, SpeedsAreWrittenSoTheyReadBackExactly)
{
    EXPECT_EQ(launcher::format_speeds({1, 2, 2}), "1,2,2");
    EXPECT_EQ(launcher::format_speeds({0.5, 0.1, 1e-7}), "0.5,0.1,1e-07");
    const std::vector<double> odd{0.1 + 0.2, 1.0 / 3, 1e300, 5e-324};
    EXPECT_EQ(base::parse_speeds(launcher::format_speeds(odd), "--speeds"), odd);
    EXPECT_EQ(launcher::format_loss_weight(2.0 / 3), "0.666667");
    EXPECT_EQ(launcher::format_loss_weight(0.59375), "0.59375");
    EXPECT_EQ(launcher::format_loss_weight(1), "1");
}
