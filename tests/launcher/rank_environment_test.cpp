#include "launcher/rank_environment.hpp"

#include <gtest/gtest.h>

namespace {

using launcher::RankVariable;

std::string value_of(const std::vector<RankVariable>& env, const std::string& name)
{
    for (const auto& v : env) {
        if (v.name == name) {
            return v.value;
        }
    }
    return "(unset)";
}

std::vector<std::string> names_of(const std::vector<RankVariable>& env)
{
    std::vector<std::string> names;
    for (const auto& v : env) {
        names.push_back(v.name + (v.unless_set ? "?" : ""));
    }
    return names;
}

class RankEnvironment : public ::testing::Test {
protected:
    RankEnvironment()
    {
        m_context.rank = 9;
        m_context.world_size = 16;
        m_context.local_rank = 1;
        m_context.local_size = 8;
        m_binding.local_rank = 1;
        m_binding.cpus = base::CpuSet::parse("8-15");
        m_binding.cores = 8;
        m_binding.numa = {0, 1};
        m_binding.hca = "mlx5_1";
        base::Gpu gpu;
        gpu.bus_id = *base::PciAddress::parse("0000:0f:00.0");
        gpu.uuid = "GPU-1111";
        gpu.selector = "GPU-1111";
        m_binding.gpu = gpu;
        m_binding.cuda_index = 1;
        m_options.master_addr = "n01";
        m_options.master_port = 29500;
    }
    launcher::HelperOptions m_options;
    launcher::RankContext m_context;
    launcher::RankBinding m_binding;
};

TEST_F(RankEnvironment, TorchsVariablesThenGpurunsThenTheGpusInOrder)
{
    const auto env = launcher::rank_environment(m_options, m_context, m_binding, std::nullopt);
    EXPECT_EQ(names_of(env),
        (std::vector<std::string>{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GPURUN_CPUS", "GPURUN_NUMA", "GPURUN_NIC", "GPURUN_HCA", "UCX_NET_DEVICES?", "OMP_NUM_THREADS?",
            "CUDA_DEVICE_ORDER", "GPURUN_GPU_BUS_ID", "GPURUN_GPU_UUID", "GPURUN_GPU"}));
    EXPECT_EQ(value_of(env, "RANK"), "9");
    EXPECT_EQ(value_of(env, "LOCAL_WORLD_SIZE"), "8");
    EXPECT_EQ(value_of(env, "GPURUN_CPUS"), "8-15");
    EXPECT_EQ(value_of(env, "GPURUN_NUMA"), "0,1");
    EXPECT_EQ(value_of(env, "UCX_NET_DEVICES"), "mlx5_1:1");
    EXPECT_EQ(value_of(env, "OMP_NUM_THREADS"), "8");
    EXPECT_EQ(value_of(env, "GPURUN_GPU"), "1") << "all GPUs visible: the rank's GPU keeps its CUDA index";
}

TEST_F(RankEnvironment, IsolatedGpuBatchShareAndNoBinding)
{
    m_options.plan.visibility = launcher::GpuVisibility::isolate;
    m_options.plan.bind = launcher::BindMode::none;
    m_options.nic_binding = launcher::NicBinding::nccl;
    base::BatchSplit batch;
    batch.per_gpu.assign(16, 4);
    batch.loss_weight.assign(16, 1.0);
    batch.per_gpu[9] = 6;
    batch.loss_weight[9] = 1.5;
    const auto env = launcher::rank_environment(m_options, m_context, m_binding, batch);
    EXPECT_EQ(value_of(env, "CUDA_VISIBLE_DEVICES"), "GPU-1111");
    EXPECT_EQ(value_of(env, "GPURUN_GPU"), "0");
    EXPECT_EQ(value_of(env, "GPURUN_LOCAL_BATCH"), "6");
    EXPECT_EQ(value_of(env, "GPURUN_LOSS_WEIGHT"), "1.5");
    EXPECT_EQ(value_of(env, "OMP_NUM_THREADS"), "(unset)") << "unbound ranks keep the runtime's own choice";
    EXPECT_EQ(value_of(env, "NCCL_IB_HCA"), "=mlx5_1:1");
}

TEST_F(RankEnvironment, ACpuOnlyRankWithoutAMasterHasNoGpuVariables)
{
    m_binding.gpu.reset();
    m_binding.hca.clear();
    m_options.master_addr.clear();
    m_options.master_port = 0;
    const auto env = launcher::rank_environment(m_options, m_context, m_binding, std::nullopt);
    EXPECT_EQ(names_of(env),
        (std::vector<std::string>{
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GPURUN_CPUS", "GPURUN_NUMA", "OMP_NUM_THREADS?"}));
}

} // namespace

namespace {

TEST_F(RankEnvironment, TheNodeRankIsTheHostThatHoldsTheRankInThePlansOrder)
{
    m_options.host_ranks = {8, 8};
    auto env = launcher::rank_environment(m_options, m_context, m_binding, std::nullopt);
    EXPECT_EQ(value_of(env, "GROUP_RANK"), "1") << "rank 9 is the second host's";
    EXPECT_EQ(value_of(env, "NODE_RANK"), "1");
    EXPECT_EQ(value_of(env, "GROUP_WORLD_SIZE"), "2");
    m_options.host_ranks = {10, 4, 2};
    env = launcher::rank_environment(m_options, m_context, m_binding, std::nullopt);
    EXPECT_EQ(value_of(env, "GROUP_RANK"), "0") << "unequal hosts: ranks 0-9 are the first's";
    EXPECT_EQ(value_of(env, "GROUP_WORLD_SIZE"), "3");
    m_options.host_ranks.clear();
    env = launcher::rank_environment(m_options, m_context, m_binding, std::nullopt);
    EXPECT_EQ(value_of(env, "GROUP_RANK"), "(unset)") << "not known: not guessed";
}

} // namespace
