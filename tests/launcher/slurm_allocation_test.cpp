// slurm_allocation: the hosts and ranks per host of a Slurm allocation, from the variables that
// salloc, sbatch and srun set. The values are those Slurm 22.05 writes.
#include "base/error.hpp"
#include "launcher/slurm_allocation.hpp"
#include "tests/support/host_lists.hpp"

#include <gtest/gtest.h>
#include <map>

namespace {

using launcher::slurm_allocation;
using launcher::slurm_gpu_count;

class SlurmAllocation : public ::testing::Test {
protected:
    std::optional<launcher::SlurmAllocation> read(unsigned ranks_per_gpu = 1, bool cpu_only = false)
    {
        return slurm_allocation(
            [this](const char* name) -> const char* {
                auto it = m_env.find(name);
                return it == m_env.end() ? nullptr : it->second.c_str();
            },
            ranks_per_gpu, cpu_only);
    }

    std::string error()
    {
        try {
            read();
        } catch (const base::Error& e) {
            return e.what();
        }
        return "";
    }

    std::vector<std::optional<unsigned>> slots(unsigned ranks_per_gpu = 1, bool cpu_only = false)
    {
        std::vector<std::optional<unsigned>> out;
        const auto allocation = read(ranks_per_gpu, cpu_only);
        for (const auto& h : allocation->hosts) {
            out.push_back(h.slots);
        }
        return out;
    }

    std::map<std::string, std::string> m_env;
};

TEST_F(SlurmAllocation, OutsideAnAllocationThereIsNone)
{
    EXPECT_FALSE(read());
    m_env["SLURM_GPUS_PER_NODE"] = "8";
    EXPECT_FALSE(read()) << "no node list, no allocation";
}

TEST_F(SlurmAllocation, GpusPerNodeGiveEachNodeItsRanks)
{
    // salloc -N2 --gpus-per-node=8: one task per node by default, which is not what gpurun runs.
    m_env = {{"SLURM_JOB_NODELIST", "gpu[01-02]"}, {"SLURM_GPUS_PER_NODE", "8"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
    const auto a = read();
    ASSERT_TRUE(a);
    ASSERT_EQ(a->hosts.size(), 2U);
    EXPECT_EQ(a->hosts[1].name, "gpu02");
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{8U, 8U}));
    EXPECT_TRUE(a->notes.empty()) << "tasks the user did not choose say nothing";
    EXPECT_EQ(slots(2), (std::vector<std::optional<unsigned>>{16U, 16U})) << "--ranks-per-gpu 2";
    m_env["SLURM_GPUS_PER_NODE"] = "a100:4";
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{4U, 4U}));
}

TEST_F(SlurmAllocation, ChosenTasksCountOnlyWhereTheGpusAreNotKnown)
{
    m_env = {{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NTASKS", "7"}, {"SLURM_TASKS_PER_NODE", "3,2(x2)"}};
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{3U, 2U, 2U}));
    m_env["SLURM_GPUS_PER_NODE"] = "2";
    const auto a = read();
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{2U, 2U, 2U}));
    ASSERT_EQ(a->notes.size(), 1U);
    EXPECT_EQ(a->notes[0],
        "Slurm's tasks per node (3,2(x2)) are not its GPUs per node (SLURM_GPUS_PER_NODE=2): "
        "gpurun starts 2 ranks per host, one per GPU; pass -np N for fewer");
    EXPECT_EQ(slots(1, true), (std::vector<std::optional<unsigned>>{3U, 2U, 2U})) << "--cpu-only: the tasks";
}

TEST_F(SlurmAllocation, WithoutGpusOrChosenTasksTheCountsAreLeftOpen)
{
    m_env = {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{std::nullopt, std::nullopt}));
}

TEST_F(SlurmAllocation, ThisNodesGpusStandForEveryNodeWithANote)
{
    // sbatch --gres=gpu:4: the batch step sees its own GPUs only.
    m_env = {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_GPUS_ON_NODE", "4"}, {"SLURM_JOB_GPUS", "0,1,2,3"}};
    const auto a = read();
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{4U, 4U}));
    ASSERT_EQ(a->notes.size(), 1U);
    EXPECT_NE(a->notes[0].find("Slurm tells this node's GPUs only (SLURM_GPUS_ON_NODE=4)"), std::string::npos);
    EXPECT_EQ(a->gpus_per_node, 4U);
    m_env.erase("SLURM_GPUS_ON_NODE");
    m_env["SLURM_JOB_GPUS"] = "2";
    EXPECT_EQ(slots(), (std::vector<std::optional<unsigned>>{1U, 1U})) << "one GPU, id 2";
}

TEST_F(SlurmAllocation, VariablesThatDisagreeAreAnErrorNamingThem)
{
    m_env = {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_GPUS_ON_NODE", "8"}, {"SLURM_JOB_GPUS", "0,1,2,3"}};
    EXPECT_EQ(error(),
        "the Slurm allocation's variables disagree: 'SLURM_GPUS_ON_NODE=8' but 'SLURM_JOB_GPUS=0,1,2,3' "
        "lists 4 GPUs; run gpurun in the allocation's own environment, or pass --gpus-per-node N");
    m_env = {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_GPUS_PER_NODE", "8"}, {"SLURM_GPUS_ON_NODE", "4"}};
    EXPECT_NE(error().find("disagree: 'SLURM_GPUS_PER_NODE=8' but 'SLURM_GPUS_ON_NODE=4'"), std::string::npos);
    m_env = {{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};
    EXPECT_NE(error().find("SLURM_TASKS_PER_NODE='2(x2)' counts tasks for 2 nodes but SLURM_JOB_NODELIST='n[1-3]' "
                           "has 3"),
        std::string::npos);
}

TEST_F(SlurmAllocation, ValuesThatAreNotCountsAreAnError)
{
    m_env = {{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_GPUS_PER_NODE", "eight"}};
    EXPECT_EQ(error(), "SLURM_GPUS_PER_NODE='eight': expected GPUs per node as [TYPE:]COUNT, such as 8 or a100:8");
    m_env["SLURM_GPUS_PER_NODE"] = "8\n";
    EXPECT_NE(error().find("'8\\x0a'"), std::string::npos) << "a control character is escaped";
    m_env = {{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_GPUS_ON_NODE", "-1"}};
    EXPECT_EQ(error(), "SLURM_GPUS_ON_NODE='-1': expected a count such as 8");
    m_env = {{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_GPUS", "0,,1"}};
    EXPECT_EQ(error(), "SLURM_JOB_GPUS='0,,1': expected GPU ids such as 0,1,2,3");
    m_env = {{"SLURM_JOB_NODELIST", "n[1-"}};
    EXPECT_FALSE(error().empty());
}

TEST(SlurmGpuCount, TypesAndSeveralKindsAddUp)
{
    EXPECT_EQ(slurm_gpu_count("V", "8"), 8U);
    EXPECT_EQ(slurm_gpu_count("V", "a100:2,v100:1"), 3U);
    EXPECT_EQ(slurm_gpu_count("V", "gpu:a100:2"), 2U);
    for (const char* bad : {"", ":8", "a100:", "8,", "2(x2)", "99999999999"}) {
        EXPECT_THROW(slurm_gpu_count("V", bad), base::Error) << bad;
    }
}

} // namespace

// -H and SLURM_JOB_NODELIST are read by one set of rules: the same text gives the same hosts, or
// an error, through both.
TEST(HostListRules, TheSameCasesGiveTheSameHostsThroughBothSources)
{
    using Names = std::vector<std::string>;
    struct Case {
        const char* list;
        Names names; ///< empty: an error containing `error`
        const char* error = "";
    };
    const Case cases[] = {
        {"a,b", {"a", "b"}},
        {" a", {"a"}},
        {"a ", {"a"}},
        {" a ,\tb ", {"a", "b"}},
        {"[1-3]", {"1", "2", "3"}},
        {"a[1-2],[3]", {"a1", "a2", "3"}},
        {"[1-2]a", {"1a", "2a"}},
        {"n[1-2]-ib", {"n1-ib", "n2-ib"}},
        {"n[09-10]", {"n09", "n10"}},
        {"n[9-010]", {"n9", "n10"}},
        // The last group varies fastest (Slurm orders three or more groups otherwise).
        {"x[1-2]y[01-02]z[7,9]",
            {"x1y01z7", "x1y01z9", "x1y02z7", "x1y02z9", "x2y01z7", "x2y01z9", "x2y02z7", "x2y02z9"}},
        {"a,a", {}, "a is listed more than once"},
        {"n[1-3],n[2-4]", {}, "n2 is listed more than once"},
        {"n[1,1]", {}, "n1 is listed more than once"},
        {"a,,b", {}, "empty host entry"},
        {"a,", {}, "empty host entry"},
        {"a b", {}, "is not a host name"},
        {"n[1-2", {}, "never closed"},
        {"n1-2]", {}, "']' without '['"},
        {"n[3-1]", {}, "ends below its start"},
        {"n[ 1-2]", {}, "not a number or a range"},
        {"-a", {}, "is not a host name"},
    };
    for (const Case& c : cases) {
        const auto option = test_support::hosts_from_option(c.list);
        const auto variable = test_support::hosts_from_variable(c.list);
        EXPECT_EQ(option.names, c.names) << "-H '" << c.list << "': " << option.error;
        EXPECT_EQ(variable.names, c.names) << "SLURM_JOB_NODELIST='" << c.list << "': " << variable.error;
        if (c.names.empty()) {
            EXPECT_NE(option.error.find(c.error), std::string::npos) << c.list << ": " << option.error;
            EXPECT_NE(variable.error.find(c.error), std::string::npos) << c.list << ": " << variable.error;
        }
    }
}

TEST_F(SlurmAllocation, AnEmptyOrCountedNodeListIsAnError)
{
    m_env = {{"SLURM_JOB_NODELIST", ""}};
    EXPECT_NE(error().find("SLURM_JOB_NODELIST is set but empty"), std::string::npos) << error();
    m_env = {{"SLURM_JOB_NODELIST", "a:2"}};
    EXPECT_NE(error().find("it lists node names only"), std::string::npos) << error();
    m_env = {{"SLURM_JOB_NODELIST", "a,b,a"}};
    EXPECT_EQ(error(),
        "SLURM_JOB_NODELIST='a,b,a': a is listed more than once; Slurm lists each node of an "
        "allocation once: run gpurun in the allocation's own environment");
}
