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
        {{{"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}},
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
