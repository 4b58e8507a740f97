// plan_launch: gpurun's options and a made-up machine (environment, topology, launcher) to the
// exact launch, without running anything.
#include "base/error.hpp"
#include "launcher/launch_plan.hpp"
#include "tests/support/layouts.hpp"
#include "tests/support/tiny_elf.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace {

using launcher::LauncherKind;
using launcher::LaunchOptions;
using launcher::PlanContext;

bool has(const std::vector<std::string>& items, const std::string& item)
{
    return std::find(items.begin(), items.end(), item) != items.end();
}

bool any_contains(const std::vector<std::string>& items, const std::string& part)
{
    return std::any_of(
        items.begin(), items.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

class LaunchPlan : public ::testing::Test {
protected:
    LaunchPlan()
    {
        m_ctx.env = [this](const char* name) -> const char* {
            auto it = m_env.find(name);
            return it == m_env.end() ? nullptr : it->second.c_str();
        };
        m_ctx.layout = test_support::load_layout(test_support::two_sockets_four_gpus_each(), m_dir);
        m_ctx.inventory.pool = base::gpus_from_topology(m_ctx.layout);
        m_ctx.inventory.source = "topology";
        m_ctx.launcher = base::launchers::Launcher{LauncherKind::openmpi, "/usr/bin/mpirun", "Open MPI", "test"};
        m_ctx.lookup.resolve = [](const std::string& host) {
            return std::vector<std::string>{"10.0.0." + host.substr(1)};
        };
        m_ctx.lookup.local_addresses = [] {
            return std::vector<std::pair<std::string, std::string>>{{"10.0.0.1", "eth0"}};
        };
        m_ctx.free_port = [] { return 41234U; };
        m_ctx.variables = {"PATH"};
        m_ctx.helper_path = "/opt/gpukit/bin/gpurun-rank";
        m_ctx.nccl_dir = [this](unsigned ranks) {
            m_nccl_ranks = ranks;
            return std::string("/tmp/gpurun-nccl.test");
        };
        m_options.program = {"true"};
    }

    launcher::LaunchPlan plan()
    {
        const auto hosts = launcher::resolve_hosts(m_options, m_ctx.env);
        return launcher::plan_launch(m_options, hosts, m_ctx);
    }

    std::string plan_error()
    {
        try {
            plan();
        } catch (const base::Error& e) {
            return e.what();
        }
        return "";
    }

    test_support::TempDir m_dir;
    std::map<std::string, std::string> m_env = {{"PATH", "/usr/bin:/bin"}};
    PlanContext m_ctx;
    LaunchOptions m_options;
    unsigned m_nccl_ranks = 0;
};

TEST_F(LaunchPlan, OneNodeEveryGpuAFreePortAndTheExactCommand)
{
    const auto p = plan();
    EXPECT_TRUE(p.this_node_only);
    ASSERT_EQ(p.job.ranks.size(), 8U);
    EXPECT_EQ(p.helper.master_port, 41234U) << "a port free here, for a job on this node";
    EXPECT_EQ(p.helper.program, std::vector<std::string>{"true"});
    ASSERT_GE(p.command.size(), 3U);
    EXPECT_EQ(p.command[0], "mpirun") << "run by its name in PATH, as the user's shell runs it";
    EXPECT_TRUE(has(p.command, "-np"));
    EXPECT_TRUE(has(p.command, "/opt/gpukit/bin/gpurun-rank"));
    EXPECT_TRUE(has(p.command, "PATH")) << "PATH goes to every rank";
    EXPECT_FALSE(has(p.command, "--allow-run-as-root"));
    EXPECT_EQ(m_nccl_ranks, 0U) << "no --nccl-check: no directory";
}

TEST_F(LaunchPlan, SlurmsNodesAreTheHostsAndTheirPortIsTorchsDefault)
{
    m_env["SLURM_JOB_NODELIST"] = "n[01-02]";
    m_env["CUDA_VISIBLE_DEVICES"] = "0,1";
    const auto p = plan();
    EXPECT_FALSE(p.this_node_only);
    ASSERT_EQ(p.job.hosts.size(), 2U);
    EXPECT_EQ(p.job.hosts[1].name, "n02");
    EXPECT_EQ(p.job.ranks.size(), 16U);
    EXPECT_EQ(p.helper.master_port, 29500U);
    EXPECT_TRUE(any_contains(p.notes, "MASTER_PORT 29500 (torch's default)")) << p.notes.size();
    EXPECT_TRUE(any_contains(p.notes, "CUDA_VISIBLE_DEVICES is not passed to other hosts"));
    EXPECT_TRUE(has(p.command, "n01:8,n02:8")) << "Open MPI's -H with each host's ranks";
}

TEST_F(LaunchPlan, TheEnvironmentsMasterPortIsCheckedAndUsed)
{
    m_env["MASTER_PORT"] = "70000";
    EXPECT_NE(plan_error().find("MASTER_PORT=70000: expected a port number from 1 to 65535"), std::string::npos);
    m_env["MASTER_PORT"] = "12345";
    m_env["MASTER_ADDR"] = "head";
    const auto p = plan();
    EXPECT_EQ(p.helper.master_port, 12345U);
    EXPECT_EQ(p.helper.master_addr, "head");
}

TEST_F(LaunchPlan, NoGpusIsAnErrorUnlessCpuOnly)
{
    m_ctx.inventory.pool.clear();
    EXPECT_EQ(plan_error(),
        "no GPUs found on twosocket (NVML and the PCI devices hwloc sees); pass --cpu-only to run ranks without GPUs");
    m_options.plan.cpu_only = true;
    m_options.np = 4;
    EXPECT_EQ(plan().job.ranks.size(), 4U);
}

TEST_F(LaunchPlan, GpukitVariablesAndTheNcclCheckReachTheRanks)
{
    m_ctx.variables = {"GPUKIT_NVML_LIBRARY"};
    m_options.nccl_check = launcher::NcclCheckMode::end;
    const auto p = plan();
    EXPECT_EQ(m_nccl_ranks, 8U) << "the check's directory is made for the job's size";
    EXPECT_TRUE(has(p.command, "GPUKIT_NVML_LIBRARY"));
    EXPECT_TRUE(any_contains(p.command, "NCCL_DEBUG_FILE=/tmp/gpurun-nccl.test/"));
}

TEST_F(LaunchPlan, TheBackendRowDecidesWhatDiffers)
{
    m_ctx.launcher = base::launchers::Launcher{LauncherKind::hydra, "/usr/bin/mpiexec", "MPICH", "test"};
    m_options.profile.profiler = launcher::Profiler::nsys;
    m_options.dry_run = true;
    auto p = plan();
    EXPECT_EQ(p.command[0], "mpiexec");
    EXPECT_TRUE(has(p.command, "-ppn"));
    EXPECT_EQ(m_options.profile.mpi_impl, "mpich") << "nsys is told Hydra's MPI";

    m_ctx.allow_root = true;
    m_ctx.launcher = base::launchers::Launcher{LauncherKind::openmpi, "/usr/bin/mpirun", "Open MPI", "test"};
    EXPECT_TRUE(has(plan().command, "--allow-run-as-root"));
}

TEST_F(LaunchPlan, AProgramThatIsNotThereStopsARealRunAndIsANoteInADryRun)
{
    m_options.program = {"no-such-program-here"};
    EXPECT_NE(plan_error().find("program not found: 'no-such-program-here'"), std::string::npos);
    m_options.dry_run = true;
    EXPECT_TRUE(any_contains(plan().notes, "program not found"));
}

TEST_F(LaunchPlan, ATopologyForAHostThatIsNotOneIsAnError)
{
    m_options.hosts = {{"n01", 8}};
    m_options.host_topologies = {{"n09", "/x.xml"}};
    EXPECT_EQ(plan_error(), "--topology n09=/x.xml: n09 is not one of the hosts (-H, --hostfile)");
}

TEST_F(LaunchPlan, ALoginNodeWithoutGpusPlansOtherHostsBySlotsAndLeavesTheirBindingToThem)
{
    m_ctx.inventory.pool.clear();
    m_options.hosts = {{"n01", 8}, {"n02", 8}};
    const auto p = plan();
    ASSERT_EQ(p.job.ranks.size(), 16U);
    EXPECT_TRUE(std::all_of(p.job.ranks.begin(), p.job.ranks.end(),
        [](const launcher::JobRank& r) { return r.binding.on_host && !r.binding.gpu && r.binding.cpus.empty(); }));
    EXPECT_EQ(p.job.ranks[9].host, "n02");
    EXPECT_EQ(p.job.ranks[9].binding.local_rank, 1U);
    EXPECT_TRUE(has(p.command, "n01:8,n02:8"));
    EXPECT_TRUE(any_contains(p.notes,
        "GPUs and cores of the ranks on n01, n02 are chosen by the rank helper on each "
        "host, from its own topology: this node has no GPUs"));
    EXPECT_FALSE(any_contains(p.notes, "previewed with this node's topology")) << "nothing was previewed";
}

TEST_F(LaunchPlan, ALoginNodeNeedsSlotsOrGpusPerNodeToCountRanks)
{
    m_ctx.inventory.pool.clear();
    m_options.hosts = {{"n01", std::nullopt}, {"n02", std::nullopt}};
    EXPECT_EQ(plan_error(),
        "cannot tell how many ranks n01 runs: this node has no GPUs to preview it with; give its "
        "slots (-H n01:8), --gpus-per-node N, or --topology n01=FILE");
    m_options.gpus_per_node = 4;
    m_options.plan.ranks_per_gpu = 2;
    const auto p = plan();
    EXPECT_EQ(p.job.ranks.size(), 16U) << "4 GPUs times 2 ranks each, on 2 hosts";
    EXPECT_TRUE(has(p.command, "n01:8,n02:8"));
}

TEST_F(LaunchPlan, ALoginNodeInsideAnAllocationTakesSlurmsGpusPerNode)
{
    m_ctx.inventory.pool.clear();
    m_env["SLURM_JOB_NODELIST"] = "n[01-02]";
    m_env["SLURM_GPUS_PER_NODE"] = "h100:8";
    m_env["SLURM_TASKS_PER_NODE"] = "1(x2)";
    const auto p = plan();
    EXPECT_EQ(p.job.ranks.size(), 16U);
    EXPECT_TRUE(has(p.command, "n01:8,n02:8"));
    // Each plan() resolves the hosts afresh, as one gpurun run does.
    m_options.hosts.clear();
    m_options.gpus_per_node = 16;
    EXPECT_EQ(plan_error(),
        "--gpus-per-node 16 but the Slurm allocation gives each node 8 "
        "('SLURM_GPUS_PER_NODE=h100:8'); lower --gpus-per-node");
    m_options.hosts.clear();
    m_options.gpus_per_node = 2;
    EXPECT_EQ(plan().job.ranks.size(), 4U) << "fewer than Slurm's GPUs is the user's choice";
    m_options.hosts.clear();
    m_env["SLURM_GPUS_ON_NODE"] = "4";
    EXPECT_NE(plan_error().find("the Slurm allocation's variables disagree"), std::string::npos);
}

TEST_F(LaunchPlan, GpusPerNodeCountsOnlyOtherHosts)
{
    m_options.gpus_per_node = 4;
    EXPECT_NE(plan_error().find("--gpus-per-node counts the GPUs of other hosts"), std::string::npos);
    m_options.hosts = {{"n01", 2}, {"n02", std::nullopt}};
    const auto p = plan();
    ASSERT_EQ(p.job.hosts.size(), 2U);
    EXPECT_EQ(p.job.hosts[0].slots, 2U) << "a host's own slots are kept";
    EXPECT_EQ(p.job.hosts[1].slots, 4U);
}

TEST_F(LaunchPlan, RanksOnThisNodeStillNeedItsGpus)
{
    m_ctx.inventory.pool.clear();
    m_options.hosts = {{"localhost", 2}, {"n02", 2}};
    EXPECT_EQ(plan_error(),
        "no GPUs found on twosocket (NVML and the PCI devices hwloc sees); pass --cpu-only to run ranks without GPUs");
}

TEST_F(LaunchPlan, AHostWithMoreRanksThanThisNodesGpusIsBoundThereAndTheOthersPreviewed)
{
    m_options.hosts = {{"n01", 4}, {"n02", 16}};
    const auto p = plan();
    ASSERT_EQ(p.job.ranks.size(), 20U);
    EXPECT_FALSE(p.job.ranks[3].binding.on_host);
    EXPECT_TRUE(p.job.ranks[3].binding.gpu.has_value());
    EXPECT_TRUE(p.job.ranks[4].binding.on_host);
    EXPECT_TRUE(any_contains(p.notes, "previewed with this node's topology"));
    EXPECT_TRUE(any_contains(p.notes,
        "ranks on n02 are chosen by the rank helper on each host, from its own "
        "topology: this node has 8 GPUs, fewer than their ranks"));
}

TEST_F(LaunchPlan, TheVariablesATrainingJobNeedsReachEveryHostAndTheDryRunSaysWhich)
{
    m_options.hosts = {{"n01", 8}, {"n02", 8}};
    m_ctx.variables = {"PATH", "NCCL_SOCKET_IFNAME", "PYTHONPATH", "HF_HOME", "TORCH_DISTRIBUTED_DEBUG",
        "OMP_PROC_BIND", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "MY_SETTING", "SLURM_JOB_ID", "HOSTNAME",
        "UCX_TLS"};
    auto p = plan();
    const std::vector<std::string> sent = {"PATH", "NCCL_SOCKET_IFNAME", "PYTHONPATH", "HF_HOME",
        "TORCH_DISTRIBUTED_DEBUG", "OMP_PROC_BIND", "CUDA_LAUNCH_BLOCKING", "UCX_TLS"};
    EXPECT_EQ(p.passed, sent);
    for (const auto& name : sent) {
        EXPECT_TRUE(has(p.command, name)) << name;
    }
    EXPECT_FALSE(has(p.command, "MY_SETTING"));
    EXPECT_FALSE(has(p.command, "CUDA_VISIBLE_DEVICES")) << "each host's own";
    EXPECT_TRUE(any_contains(p.notes, "passed to the ranks on every host: PATH NCCL_SOCKET_IFNAME PYTHONPATH"));
    m_options.env_all = true;
    p = plan();
    EXPECT_TRUE(has(p.passed, "MY_SETTING"));
    EXPECT_FALSE(has(p.passed, "SLURM_JOB_ID")) << "this allocation's, set by the launcher there";
    EXPECT_FALSE(has(p.passed, "HOSTNAME"));
    EXPECT_FALSE(has(p.passed, "CUDA_VISIBLE_DEVICES"));
}

TEST_F(LaunchPlan, SrunGetsTheMpiPluginTheProgramsLibraryNeeds)
{
    m_ctx.launcher = base::launchers::Launcher{LauncherKind::srun, "/usr/bin/srun", "Slurm", "test"};
    m_ctx.srun_mpi_plugins = {"none", "pmi2", "pmix"};
    std::string file = test_support::tiny_elf({"libc.so.6", "libmpi.so.40"});
    m_ctx.program_start = [&](const std::string&) { return std::optional<std::string>(file); };
    auto p = plan();
    EXPECT_TRUE(has(p.command, "--mpi=pmix")) << "Open MPI";
    EXPECT_TRUE(any_contains(p.notes,
        "srun --mpi=pmix: true is linked with Open MPI (this srun offers none, pmi2, "
        "pmix)"));
    file = test_support::tiny_elf({"libmpi.so.12"});
    EXPECT_TRUE(has(plan().command, "--mpi=pmi2")) << "MPICH";
    m_options.launcher_args = {"--mpi=pmi2"};
    p = plan();
    EXPECT_EQ(std::count(p.command.begin(), p.command.end(), "--mpi=pmi2"), 1) << "the user's choice, alone";
    m_options.launcher_args.clear();
    m_ctx.srun_mpi_plugins = {"none", "pmi2"};
    file = test_support::tiny_elf({"libmpi.so.40"});
    p = plan();
    EXPECT_FALSE(any_contains(p.command, "--mpi"));
    EXPECT_TRUE(any_contains(p.notes, "whose ranks need srun --mpi=pmix, and this srun offers only none, pmi2"));
    file = "#!/usr/bin/env python3\n";
    p = plan();
    EXPECT_TRUE(any_contains(p.notes, "an MPI program (mpi4py too) needs --launcher-args --mpi=pmix for Open MPI"));
}

} // namespace

TEST_F(LaunchPlan, ThisNodesRanksAreHandedToTheirHelpersOnlyWhenPlannedFromItsOwnTopology)
{
    auto p = plan();
    ASSERT_TRUE(p.this_node.has_value());
    ASSERT_EQ(p.this_node->ranks.size(), 8U);
    for (unsigned i = 0; i < 8; ++i) {
        const auto& handed = p.this_node->ranks[i];
        const auto& planned = p.job.ranks[i].binding;
        EXPECT_EQ(handed.local_rank, i);
        EXPECT_EQ(handed.cpus.to_list(), planned.cpus.to_list());
        ASSERT_TRUE(handed.gpu && planned.gpu);
        EXPECT_EQ(handed.gpu->bus_id, planned.gpu->bus_id);
    }

    m_options.hosts = {{"twosocket", 4}, {"n02", 4}};
    p = plan();
    ASSERT_TRUE(p.this_node.has_value()) << "a job of several hosts hands this node's part";
    EXPECT_EQ(p.this_node->ranks.size(), 4U);

    m_options.hosts = {{"n01", 8}};
    EXPECT_FALSE(plan().this_node.has_value()) << "no rank here";
    m_options.hosts = {{"localhost", 4}, {"twosocket", 4}};
    EXPECT_FALSE(plan().this_node.has_value()) << "this node under two names: two launcher hosts";
    m_options.hosts.clear();

    m_options.dry_run = true;
    EXPECT_FALSE(plan().this_node.has_value()) << "nothing runs";
    m_options.dry_run = false;
    m_options.plan.topology_file = "dgx.xml";
    EXPECT_FALSE(plan().this_node.has_value()) << "an XML topology is not this node as it is";
}
