#include "launcher/plan_report.hpp"

#include <gtest/gtest.h>

using launcher::JobPlan;
using launcher::LaunchOptions;
using launcher::PlanReport;

namespace {

// Three CPU-only ranks on one host, two cores each.
JobPlan three_ranks()
{
    JobPlan job;
    for (unsigned r = 0; r < 3; ++r) {
        launcher::JobRank rank;
        rank.rank = r;
        rank.host = "n01";
        rank.binding.local_rank = r;
        rank.binding.cpus = base::CpuSet{2 * r, 2 * r + 1};
        rank.binding.numa = {0};
        rank.binding.cores = 2;
        job.ranks.push_back(rank);
    }
    job.hosts = {{"n01", 3}};
    return job;
}

class PlanReportTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_options.plan.cpu_only = true;
        m_options.batch.global_batch = 96;
        m_options.batch.speeds = {1, 2, 2};
    }

    PlanReport report(std::optional<base::BatchSplit> batch) const
    {
        return PlanReport{m_job, m_options, "", {}, {"mpirun", "-np", "3", "prog"}, std::move(batch),
            base::launchers::Launcher{
                launcher::LauncherKind::openmpi, "/usr/bin/mpirun", "Open MPI", "mpirun is Open MPI"},
            {}, nullptr, {}};
    }

    JobPlan m_job = three_ranks();
    LaunchOptions m_options;
};

} // namespace

TEST_F(PlanReportTest, TextShowsEachRanksBatchAndLossWeight)
{
    const std::string text = launcher::render_text(report(base::split_batch(96, {1, 2, 2})));
    EXPECT_EQ(text,
        "gpurun: 3 ranks on 1 host (CPU only; bind numa, memory preferred, gpu visibility all)\n"
        "RANK  HOST  LOCAL  GPU  BUS ID  NAME  NUMA  CPUS  NIC  BATCH  LOSS WEIGHT\n"
        "0     n01   0      -    -       -     0     0-1   -    19     0.59375\n"
        "1     n01   1      -    -       -     0     2-3   -    39     1.21875\n"
        "2     n01   2      -    -       -     0     4-5   -    38     1.1875\n"
        "batch: 96 samples per step over 3 ranks, by speed 1,2,2 (GPURUN_LOCAL_BATCH); each rank multiplies its "
        "mean loss by GPURUN_LOSS_WEIGHT\n"
        "launcher: Open MPI mpirun, /usr/bin/mpirun (mpirun is Open MPI)\n"
        "command: mpirun -np 3 prog\n");
}

TEST_F(PlanReportTest, TextWithoutAGlobalBatchHasNoBatchColumns)
{
    m_options.batch = {};
    const std::string text = launcher::render_text(report(std::nullopt));
    EXPECT_EQ(text.find("BATCH"), std::string::npos) << text;
    EXPECT_EQ(text.find("batch:"), std::string::npos) << text;
    EXPECT_NE(text.find("RANK  HOST  LOCAL  GPU  BUS ID  NAME  NUMA  CPUS  NIC\n"), std::string::npos) << text;
}

TEST_F(PlanReportTest, TextWithEqualSpeedsSaysSo)
{
    m_options.batch.speeds = {};
    m_options.batch.global_batch = 10;
    const std::string text = launcher::render_text(report(base::split_batch(10, {1, 1, 1})));
    EXPECT_NE(
        text.find("batch: 10 samples per step over 3 ranks, equal speeds (GPURUN_LOCAL_BATCH)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("0     n01   0      -    -       -     0     0-1   -    4      1.2\n"), std::string::npos)
        << text;
}

TEST_F(PlanReportTest, JsonCarriesTheBatchPerRankAndTheGlobalBatch)
{
    const auto json = launcher::render_json(report(base::split_batch(96, {1, 2, 2})));
    EXPECT_EQ(json["global_batch"], 96);
    EXPECT_EQ(json["speeds"], nlohmann::json({1.0, 2.0, 2.0}));
    ASSERT_EQ(json["ranks"].size(), 3U);
    EXPECT_EQ(json["ranks"][0]["local_batch"], 19);
    EXPECT_EQ(json["ranks"][1]["local_batch"], 39);
    EXPECT_EQ(json["ranks"][2]["local_batch"], 38);
    EXPECT_DOUBLE_EQ(json["ranks"][0]["loss_weight"].get<double>(), 0.59375);
    EXPECT_DOUBLE_EQ(json["ranks"][1]["loss_weight"].get<double>(), 1.21875);
    EXPECT_DOUBLE_EQ(json["ranks"][2]["loss_weight"].get<double>(), 1.1875);
    // Streamed with its keys in the order a document keeps them: the same text, byte for byte.
    std::string text;
    launcher::write_json(report(base::split_batch(96, {1, 2, 2})), text);
    EXPECT_EQ(text, nlohmann::json::parse(text).dump(2));
}

TEST_F(PlanReportTest, JsonWithoutAGlobalBatchHasNulls)
{
    m_options.batch = {};
    const auto json = launcher::render_json(report(std::nullopt));
    EXPECT_TRUE(json["global_batch"].is_null());
    EXPECT_TRUE(json["speeds"].is_null());
    EXPECT_TRUE(json["ranks"][0]["local_batch"].is_null());
    EXPECT_TRUE(json["ranks"][0]["loss_weight"].is_null());
}
