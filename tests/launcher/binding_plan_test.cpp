#include "base/error.hpp"
#include "launcher/binding_plan.hpp"
#include "tests/support/layouts.hpp"

#include <gtest/gtest.h>

using base::CpuSet;
using launcher::BindMode;
using launcher::PlanOptions;
using test_support::T;
using test_support::TempDir;

namespace {

class BindingPlan : public ::testing::Test {
protected:
    base::NodeLayout load(const T& t) { return test_support::load_layout(t, m_dir); }
    TempDir m_dir;
};

std::string plan_error(
    const base::NodeLayout& layout, const std::vector<base::Gpu>& pool, const PlanOptions& o, unsigned ranks)
{
    try {
        launcher::plan_node(layout, pool, o, ranks, "n01");
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

void expect_disjoint(const launcher::NodePlan& plan)
{
    for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
        for (std::size_t j = i + 1; j < plan.ranks.size(); ++j) {
            EXPECT_FALSE(plan.ranks[i].cpus.intersects(plan.ranks[j].cpus))
                << "ranks " << i << " and " << j << ": " << plan.ranks[i].cpus.to_list() << " vs "
                << plan.ranks[j].cpus.to_list();
        }
    }
}

} // namespace

TEST_F(BindingPlan, FourRanksPerSocketSplitWholeCoresOfTheirNumaNode)
{
    auto layout = load(test_support::two_sockets_four_gpus_each());
    auto pool = base::gpus_from_topology(layout);
    auto plan = launcher::plan_node(layout, pool, PlanOptions{}, 8);
    ASSERT_EQ(plan.ranks.size(), 8U);
    expect_disjoint(plan);
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "0-1,16-17") << "two whole cores, SMT siblings together";
    EXPECT_EQ(plan.ranks[3].cpus.to_list(), "6-7,22-23");
    EXPECT_EQ(plan.ranks[4].cpus.to_list(), "8-9,24-25");
    for (const auto& r : plan.ranks) {
        EXPECT_EQ(r.cores, 2U);
        EXPECT_EQ(r.numa, std::vector<unsigned>{r.local_rank < 4 ? 0U : 1U});
        EXPECT_EQ(r.cuda_index, r.local_rank);
        EXPECT_FALSE(r.shared);
    }
    EXPECT_TRUE(plan.notes.empty());
}

TEST_F(BindingPlan, Nps4RanksFollowTheirGpuNotTheirRankNumber)
{
    auto layout = load(test_support::nps4_four_gpus());
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), PlanOptions{}, 4);
    EXPECT_EQ(plan.ranks[0].numa, std::vector<unsigned>{3});
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "12-15");
    EXPECT_EQ(plan.ranks[1].numa, std::vector<unsigned>{1});
    EXPECT_EQ(plan.ranks[1].cpus.to_list(), "4-7");
    EXPECT_EQ(plan.ranks[2].numa, std::vector<unsigned>{7});
    EXPECT_EQ(plan.ranks[3].numa, std::vector<unsigned>{5});
    EXPECT_EQ(plan.ranks[0].hca, "mlx5_0");
}

TEST_F(BindingPlan, SocketModeSharesThePackage)
{
    auto layout = load(test_support::nps4_four_gpus());
    PlanOptions o;
    o.bind = BindMode::socket;
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), o, 4);
    expect_disjoint(plan);
    // GPUs 0 and 1 are both on package 0 (NUMA 3 and 1): they split its 16 cores.
    EXPECT_EQ(plan.ranks[0].cpus.size() + plan.ranks[1].cpus.size(), 16U);
    EXPECT_TRUE(CpuSet::parse("0-15").includes(plan.ranks[0].cpus.unite(plan.ranks[1].cpus)));
    EXPECT_TRUE(CpuSet::parse("16-31").includes(plan.ranks[2].cpus));
    // Each rank's share starts with its GPU's NUMA node, not with the package's first cores.
    EXPECT_TRUE(plan.ranks[0].cpus.includes(CpuSet::parse("12-15"))) << plan.ranks[0].cpus.to_list();
    EXPECT_TRUE(plan.ranks[1].cpus.includes(CpuSet::parse("4-7"))) << plan.ranks[1].cpus.to_list();
    EXPECT_TRUE(plan.ranks[2].cpus.includes(CpuSet::parse("28-31"))) << plan.ranks[2].cpus.to_list();
    EXPECT_TRUE(plan.ranks[3].cpus.includes(CpuSet::parse("20-23"))) << plan.ranks[3].cpus.to_list();
    EXPECT_EQ(plan.ranks[0].cpus.size(), 8U);

    // Two ranks on GPU 0 split its NUMA node's cores, then the rest of the package.
    o.ranks_per_gpu = 2;
    plan = launcher::plan_node(layout, base::gpus_from_topology(layout), o, 2);
    expect_disjoint(plan);
    for (const auto& r : plan.ranks) {
        EXPECT_EQ(r.cpus.intersect(CpuSet::parse("12-15")).size(), 2U) << r.cpus.to_list();
        EXPECT_EQ(r.cpus.size(), 8U);
    }
}

TEST_F(BindingPlan, CoresModeAndCpusPerRank)
{
    auto layout = load(test_support::two_sockets_four_gpus_each());
    auto pool = base::gpus_from_topology(layout);
    PlanOptions o;
    o.bind = BindMode::cores;
    auto plan = launcher::plan_node(layout, pool, o, 2);
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "0,16") << "one whole core by default";
    EXPECT_EQ(plan.ranks[1].cpus.to_list(), "1,17");
    EXPECT_EQ(plan.ranks[0].cores, 1U);

    o.bind = BindMode::numa;
    o.cpus_per_rank = 3;
    plan = launcher::plan_node(layout, pool, o, 2);
    EXPECT_EQ(plan.ranks[0].cores, 3U);
    EXPECT_EQ(plan.ranks[1].cpus.to_list(), "3-5,19-21");

    o.cpus_per_rank = 3;
    std::string e = plan_error(layout, pool, o, 4);
    EXPECT_NE(e.find("--cpus-per-rank 3"), std::string::npos) << e;
    EXPECT_NE(e.find("need 12 cores but only 8"), std::string::npos) << e;
}

TEST_F(BindingPlan, BindNoneLeavesAllAllowedCpus)
{
    auto layout = load(test_support::nps4_four_gpus());
    PlanOptions o;
    o.bind = BindMode::none;
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), o, 2);
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "0-31");
    EXPECT_TRUE(plan.ranks[0].numa.empty());
}

TEST_F(BindingPlan, MoreRanksThanGpusIsAnErrorWithBothNumbers)
{
    auto layout = load(test_support::nps4_four_gpus());
    auto pool = base::gpus_from_topology(layout);
    std::string e = plan_error(layout, pool, PlanOptions{}, 9);
    EXPECT_EQ(e, "9 ranks on host n01 but only 4 GPUs; pass --ranks-per-gpu 3 to share GPUs, or lower -np");
    EXPECT_NE(plan_error(layout, {}, PlanOptions{}, 1).find("pass --cpu-only"), std::string::npos);
}

TEST_F(BindingPlan, RanksPerGpuShareTheGpuAndSplitItsCores)
{
    auto layout = load(test_support::nps4_four_gpus());
    PlanOptions o;
    o.ranks_per_gpu = 2;
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), o, 8);
    expect_disjoint(plan);
    EXPECT_EQ(plan.ranks[0].gpu->physical_index, 0U);
    EXPECT_EQ(plan.ranks[1].gpu->physical_index, 0U);
    EXPECT_EQ(plan.ranks[1].cuda_index, 0U);
    EXPECT_EQ(plan.ranks[2].gpu->physical_index, 1U);
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "12-13");
    EXPECT_EQ(plan.ranks[1].cpus.to_list(), "14-15");
}

TEST_F(BindingPlan, FewerCoresThanRanksShareAndThePlanSaysSo)
{
    T t("small");
    t.package();
    t.numa(0, 0, 2, 2);
    for (const char* bus : {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}) {
        t.gpu(T::at_package(0), bus);
    }
    auto layout = load(t);
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), PlanOptions{}, 3);
    for (const auto& r : plan.ranks) {
        EXPECT_TRUE(r.shared);
        EXPECT_EQ(r.cpus.to_list(), "0-3");
    }
    ASSERT_EQ(plan.notes.size(), 1U);
    EXPECT_NE(plan.notes[0].find("3 ranks share the 2 cores of NUMA node 0"), std::string::npos) << plan.notes[0];
}

TEST_F(BindingPlan, NarrowDomainsChooseBeforeWideOnes)
{
    // GPU 0 hangs off the whole package (both NUMA nodes), GPU 1 off NUMA 1 only. Rank 1 must keep
    // NUMA 1's cores even though rank 0 is planned from the wider package.
    T t("mixed");
    t.package();
    unsigned n0 = t.numa(0, 0, 2);
    unsigned n1 = t.numa(0, 1, 2);
    (void)n0;
    t.gpu(T::at_package(0), "0000:01:00.0");
    t.gpu(T::at_numa(n1), "0000:02:00.0");
    auto layout = load(t);
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), PlanOptions{}, 2);
    expect_disjoint(plan);
    EXPECT_EQ(plan.ranks[1].cpus.to_list(), "2-3");
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "0-1");
    EXPECT_EQ(plan.ranks[0].numa, std::vector<unsigned>{0});
}

TEST_F(BindingPlan, CpuOnlySpreadsRanksOverNumaNodes)
{
    T t("cpu");
    t.package();
    t.package();
    t.numa(0, 0, 4);
    t.numa(1, 8, 4);
    auto layout = load(t);
    PlanOptions o;
    o.cpu_only = true;
    auto plan = launcher::plan_node(layout, {}, o, 4);
    expect_disjoint(plan);
    EXPECT_EQ(plan.ranks[0].numa, std::vector<unsigned>{0});
    EXPECT_EQ(plan.ranks[1].numa, std::vector<unsigned>{8});
    EXPECT_EQ(plan.ranks[2].numa, std::vector<unsigned>{0});
    EXPECT_EQ(plan.ranks[0].cpus.to_list(), "0-1");
    EXPECT_EQ(plan.ranks[2].cpus.to_list(), "2-3");
    EXPECT_FALSE(plan.ranks[0].gpu);
}

TEST_F(BindingPlan, GpuMemoryNodesNeverGetRanks)
{
    T t("gh");
    t.package();
    t.numa(0, 0, 4);
    t.gpu_memory_numa(0, 1);
    t.gpu(T::at_package(0), "0009:01:00.0");
    auto layout = load(t);
    auto plan = launcher::plan_node(layout, base::gpus_from_topology(layout), PlanOptions{}, 1);
    EXPECT_EQ(plan.ranks[0].numa, std::vector<unsigned>{0});
    PlanOptions cpu;
    cpu.cpu_only = true;
    auto cpu_plan = launcher::plan_node(layout, {}, cpu, 2);
    EXPECT_EQ(cpu_plan.ranks[1].numa, std::vector<unsigned>{0});
}

TEST_F(BindingPlan, JobFillsHostsInSlotOrder)
{
    auto layout = load(test_support::nps4_four_gpus());
    auto pool = base::gpus_from_topology(layout);
    auto job = launcher::plan_job(layout, pool, PlanOptions{}, 6, {{"n01", 4}, {"n02", std::nullopt}}, "local");
    ASSERT_EQ(job.ranks.size(), 6U);
    ASSERT_EQ(job.hosts.size(), 2U);
    EXPECT_EQ(job.hosts[1], (base::launchers::HostSlots{"n02", 2}));
    EXPECT_EQ(job.ranks[4].host, "n02");
    EXPECT_EQ(job.ranks[4].rank, 4U);
    EXPECT_EQ(job.ranks[4].binding.local_rank, 0U);

    auto all =
        launcher::plan_job(layout, pool, PlanOptions{}, std::nullopt, {{"a", std::nullopt}, {"b", std::nullopt}}, "x");
    EXPECT_EQ(all.ranks.size(), 8U) << "default -np: every GPU of every host";
    auto local = launcher::plan_job(layout, pool, PlanOptions{}, std::nullopt, {}, "me");
    EXPECT_EQ(local.ranks.size(), 4U);
    EXPECT_EQ(local.ranks[0].host, "me");

    try {
        launcher::plan_job(layout, pool, PlanOptions{}, 10, {{"a", 4}, {"b", 4}}, "x");
        ADD_FAILURE();
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("-np 10 but the hosts hold only 8 slots (a:4,b:4)"), std::string::npos)
            << e.what();
    }
    PlanOptions cpu;
    cpu.cpu_only = true;
    EXPECT_THROW(launcher::plan_job(layout, {}, cpu, std::nullopt, {}, "x"), base::Error);
    EXPECT_THROW(launcher::plan_job(layout, pool, PlanOptions{}, 0, {}, "x"), base::Error);
}

TEST(NicVariables, UcxByDefaultNcclWhenAskedNothingWithoutAnHca)
{
    using launcher::NicBinding;
    using Vars = std::vector<std::pair<std::string, std::string>>;
    EXPECT_EQ(launcher::nic_variables(NicBinding::ucx, "mlx5_3"), (Vars{{"UCX_NET_DEVICES", "mlx5_3:1"}}));
    EXPECT_EQ(launcher::nic_variables(NicBinding::nccl, "mlx5_3"),
        (Vars{{"UCX_NET_DEVICES", "mlx5_3:1"}, {"NCCL_IB_HCA", "=mlx5_3:1"}}));
    EXPECT_TRUE(launcher::nic_variables(NicBinding::none, "mlx5_3").empty());
    EXPECT_TRUE(launcher::nic_variables(NicBinding::nccl, "").empty());
}
