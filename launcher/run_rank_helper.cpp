#include "base/binding.hpp"
#include "base/error.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/global_batch.hpp"
#include "launcher/gpurun.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/job_dir.hpp"
#include "launcher/local_launch.hpp"
#include "launcher/nccl_check.hpp"
#include "launcher/node_handoff.hpp"
#include "launcher/node_monitor.hpp"
#include "launcher/rank_context.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/rank_profiler.hpp"
#include "launcher/rank_supervisor.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <sys/prctl.h>
#include <unistd.h>

namespace launcher {

namespace {

using base::Error;

/// This node's plan and name, as the helper binds from them.
struct NodeBasis {
    NodePlan plan;
    std::string hostname;
};

/// The plan gpurun handed down for this node when it was made here under the same conditions
/// (node_handoff.hpp); otherwise the helper's own, from this node's topology and GPUs.
NodeBasis plan_this_node(const HelperOptions& o, unsigned local_ranks, bool from_file)
{
    const char* value = std::getenv(node_plan_variable);
    const std::optional<std::string> handed = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
    unsetenv(node_plan_variable); // the program has no use for it
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (handed && !from_file) {
        const NodeKey key = this_node_key(visible);
        if (std::optional<NodePlan> plan = read_node_plan(*handed, key, local_ranks)) {
            return NodeBasis{std::move(*plan), key.host};
        }
    }
    const ThisNode node = read_this_node(o.plan, visible);
    return NodeBasis{
        plan_node(node.layout, node.inventory.pool, o.plan, local_ranks, node.layout.hostname), node.layout.hostname};
}

int run_helper(const std::vector<std::string>& args)
{
    const HelperOptions o = parse_helper_arguments(args);
    const pid_t parent = getppid();
    // If the launcher dies, so does the rank: no orphan keeps a GPU busy. SIGTERM, so that the
    // helper can stop the program and what it started (supervise_rank). The check after prctl
    // closes the race with a parent that died before it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        return 1;
    }

    auto context = read_rank_context([](const char* name) { return std::getenv(name); });
    if (!context) {
        throw Error("no launcher variables found (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, ...); "
                    "gpurun-rank runs under mpirun or srun, started by gpurun");
    }

    // gpurun checked the split against the job's size; a helper started another way is checked here,
    // before the rank binds or runs anything.
    std::optional<base::BatchSplit> batch;
    if (o.batch.global_batch != 0) {
        batch = split_over_ranks(o.batch, context->world_size);
    }

    const bool from_file = !o.plan.topology_file.empty();
    const NodeBasis node = plan_this_node(o, context->local_size, from_file);
    const NodePlan& plan = node.plan;
    const RankBinding& mine = plan.ranks.at(context->local_rank);
    const std::string host = node.hostname.empty() ? "localhost" : node.hostname;
    const std::string who = fmt::format("rank {} ({}, local rank {})", context->rank, host, mine.local_rank);

    std::function<void(pid_t)> program_started;
    if (o.monitor.interval > 0) {
        // Before binding, so the monitor keeps the node's CPUs; the record is written before exec.
        program_started = join_node_monitor(o.monitor, *context, plan);
        unsetenv(job_id_variable); // the program has no use for it
    }

    // An XML topology describes another machine (or this one as it was): its plan is not bound.
    if (o.plan.bind != BindMode::none && !from_file) {
        try {
            base::bind_cpus(mine.cpus);
        } catch (const Error& e) {
            fmt::print(stderr, "gpurun-rank: warning: {}: {}; the rank runs unbound\n", who, e.what());
        }
        try {
            base::bind_memory(mine.numa, o.plan.memory);
        } catch (const Error& e) {
            fmt::print(stderr, "gpurun-rank: warning: {}: {}; memory is not bound\n", who, e.what());
        }
    }

    for (const auto& variable : rank_environment(o, *context, mine, batch)) {
        if (!variable.unless_set || std::getenv(variable.name.c_str()) == nullptr) {
            setenv(variable.name.c_str(), variable.value.c_str(), 1);
        }
    }

    if (const std::string warning = keep_nccl_log_file_only_in_own_dir(); !warning.empty()) {
        fmt::print(stderr, "gpurun-rank: warning: {}: {}\n", who, warning);
    }
    if (o.report_bindings) {
        const std::string gpu = mine.gpu
            ? fmt::format("gpu {} {} {}", mine.gpu->physical_index, mine.gpu->bus_id.to_string(), mine.gpu->name)
            : std::string("no gpu");
        fmt::print(stderr, "gpurun: {}: {}; cpus {}; memory {}{}\n", who, gpu, base::cpu_binding().to_list(),
            base::memory_binding(), from_file ? " (XML topology: not bound)" : "");
        std::fflush(stderr);
    }
    RankSupervision supervision;
    supervision.rank = context->rank;
    supervision.local_rank = mine.local_rank;
    supervision.host = host;
    supervision.tag_output = o.output.tag;
    supervision.log_dir = o.output.log_dir;
    supervision.grace_seconds = o.grace_seconds;
    supervision.started = program_started;
    if (profiles_rank(o.profile, context->rank)) {
        // gpurun made the directory on its own host; a rank elsewhere makes it on its host.
        std::error_code ec;
        std::filesystem::create_directories(o.profile.dir, ec);
        return supervise_rank(nsys_command(o.profile.dir, context->rank, o.program, o.profile.mpi_impl), supervision);
    }
    return supervise_rank(o.program, supervision);
}

} // namespace

int run_rank_helper(int argc, char** argv)
{
    try {
        if (argc > 1 && std::strcmp(argv[1], local_launch_flag) == 0) {
            return run_local_launch(std::vector<std::string>(argv + 2, argv + argc));
        }
        if (argc > 1 && std::strcmp(argv[1], node_monitor_flag) == 0) {
            NodeMonitorOptions monitor = parse_node_monitor_arguments(std::vector<std::string>(argv + 2, argv + argc));
            monitor.job_dir = job_dir_from_environment();
            return run_node_monitor(monitor);
        }
        return run_helper(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const Error& e) {
        fmt::print(stderr, "gpurun-rank: {}\n", base::printable(e.what()));
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpurun-rank: internal error: {}\n", base::printable(e.what()));
        return 3;
    }
}

} // namespace launcher
