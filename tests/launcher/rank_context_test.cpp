#include "launcher/rank_context.hpp"

#include <gtest/gtest.h>
#include <map>

namespace {

std::optional<launcher::RankContext> read(const std::map<std::string, std::string>& env)
{
    return launcher::read_rank_context([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

} // namespace

TEST(RankContext, EveryLauncherFamily)
{
    struct Case {
        std::map<std::string, std::string> env;
        const char* family;
    } cases[] = {
        {{{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "5"},
             {"OMPI_COMM_WORLD_SIZE", "8"}},
            "Open MPI"},
        {{{"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}, {"PMI_RANK", "5"}, {"PMI_SIZE", "8"}},
            "MPICH/Intel MPI (Hydra)"},
        {{{"MV2_COMM_WORLD_LOCAL_RANK", "1"}, {"MV2_COMM_WORLD_LOCAL_SIZE", "4"}, {"MV2_COMM_WORLD_RANK", "5"},
             {"MV2_COMM_WORLD_SIZE", "8"}},
            "MVAPICH2"},
        {{{"PALS_LOCAL_RANKID", "1"}, {"PALS_LOCAL_SIZE", "4"}, {"PALS_RANKID", "5"}, {"PMI_SIZE", "8"}}, "Cray PALS"},
        {{{"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODEID", "1"}, {"SLURM_PROCID", "5"},
             {"SLURM_NTASKS", "8"}},
            "Slurm"},
        {{{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}}, "torchrun-style"},
    };
    for (const auto& c : cases) {
        auto ctx = read(c.env);
        ASSERT_TRUE(ctx) << c.family;
        EXPECT_EQ(ctx->launcher, c.family);
        EXPECT_EQ(ctx->local_rank, 1U) << c.family;
        EXPECT_EQ(ctx->local_size, 4U) << c.family;
        EXPECT_EQ(ctx->rank, 5U) << c.family;
        EXPECT_EQ(ctx->world_size, 8U) << c.family;
    }
}

TEST(RankContext, GpurunsLocalLauncherWinsOverTheAllocationsSlurmVariables)
{
    auto ctx = read({{"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "1"}, {"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"}, {"GPURUN_LAUNCH_LOCAL_RANK", "2"}, {"GPURUN_LAUNCH_LOCAL_SIZE", "4"},
        {"GPURUN_LAUNCH_RANK", "2"}, {"GPURUN_LAUNCH_SIZE", "4"}});
    ASSERT_TRUE(ctx);
    EXPECT_EQ(ctx->launcher, "gpurun local");
    EXPECT_EQ(ctx->rank, 2U);
    EXPECT_EQ(ctx->world_size, 4U);
}

TEST(RankContext, OpenMpiWinsOverStaleSlurmVariables)
{
    auto ctx = read({{"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "1"}, {"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
        {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
    ASSERT_TRUE(ctx);
    EXPECT_EQ(ctx->launcher, "Open MPI");
    EXPECT_EQ(ctx->local_rank, 3U);
}

TEST(RankContext, IncompleteOrInconsistentFamiliesAreSkipped)
{
    EXPECT_FALSE(read({}));
    EXPECT_FALSE(read({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}));
    EXPECT_FALSE(read({{"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}, {"RANK", "4"}, {"WORLD_SIZE", "8"}}));
    EXPECT_FALSE(read({{"LOCAL_RANK", "x"}, {"LOCAL_WORLD_SIZE", "4"}, {"RANK", "0"}, {"WORLD_SIZE", "8"}}));
}

TEST(RankContext, SlurmLocalSizeIsThisNodesEntryInTheTaskList)
{
    // Five tasks on three nodes: 2, 2, 1. Node 2 runs one task, not the first node's two.
    std::map<std::string, std::string> env{{"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"},
        {"SLURM_NODEID", "2"}, {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"}};
    auto last = read(env);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->launcher, "Slurm");
    EXPECT_EQ(last->local_size, 1U);
    env["SLURM_NODEID"] = "0";
    env["SLURM_PROCID"] = "0";
    auto first = read(env);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->local_size, 2U);
    // The step's list wins over the job's, and over SLURM_NTASKS_PER_NODE, a maximum that the
    // last node of `-n 5 --ntasks-per-node 2` does not reach.
    env["SLURM_STEP_TASKS_PER_NODE"] = "3,1";
    EXPECT_EQ(read(env)->local_size, 3U);
    env["SLURM_NTASKS_PER_NODE"] = "4";
    EXPECT_EQ(read(env)->local_size, 3U);
    // Without any list, SLURM_NTASKS_PER_NODE is all there is.
    env.erase("SLURM_STEP_TASKS_PER_NODE");
    env.erase("SLURM_TASKS_PER_NODE");
    EXPECT_EQ(read(env)->local_size, 4U);
}

TEST(RankContext, SlurmWithoutAUsableTaskListIsIncomplete)
{
    const std::map<std::string, std::string> base{{"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"},
        {"SLURM_NODEID", "1"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "5"}};
    ASSERT_TRUE(read(base));
    auto without = [&](const char* name) {
        auto env = base;
        env.erase(name);
        return env;
    };
    auto with = [&](const char* name, const char* value) {
        auto env = base;
        env[name] = value;
        return env;
    };
    EXPECT_FALSE(read(without("SLURM_NODEID")));
    EXPECT_FALSE(read(without("SLURM_TASKS_PER_NODE")));
    EXPECT_FALSE(read(with("SLURM_NODEID", "3")));
    EXPECT_FALSE(read(with("SLURM_NODEID", "x")));
    EXPECT_FALSE(read(with("SLURM_TASKS_PER_NODE", "2(x0)")));
    EXPECT_FALSE(read(with("SLURM_TASKS_PER_NODE", "2(x2")));
    // A present but bad step list is not replaced by the job's.
    EXPECT_FALSE(read(with("SLURM_STEP_TASKS_PER_NODE", "")));
    // Local rank 1 on a node of one task is inconsistent.
    EXPECT_FALSE(read({{"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"}, {"SLURM_NODEID", "2"},
        {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"}}));
}
