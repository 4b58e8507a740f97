#pragma once

// gpurun --monitor on one node: a small process, started by local rank 0's helper before it starts
// the program, that samples the node's job GPUs through NVML until the node's ranks have exited,
// checks one rank per GPU against the ranks' records, and prints a summary on its standard error
// (the rank's, which Open MPI forwards to gpurun's; mpirun waits for it to close).

#include "base/pci_address.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/rank_context.hpp"

#include <functional>
#include <string>
#include <vector>

namespace launcher {

/// The first argument that makes gpurun-rank the node's monitor instead of a rank's helper.
inline constexpr const char* node_monitor_flag = "--node-monitor";

/// How long the monitor waits for every local rank's record before it watches the ones it has.
inline constexpr double records_wait_s = 10;

/// The job id of a --dry-run, which makes none (and shows none: ids travel in the environment).
inline constexpr const char* monitor_job_shown = "<job id>";

/// The monitor options gpurun passes to the helpers: --monitor-json made absolute (ranks may start
/// elsewhere) with '%' escaped, and with `several_hosts` ".%h" put before its extension, so each
/// node's monitor writes a file of its own; a note says so.
MonitorOptions monitor_for_helpers(const MonitorOptions& options, bool several_hosts, std::vector<std::string>& notes);

/// What the monitor of one node is told.
struct NodeMonitorOptions {
    /// The per-job private directory with the ranks' records; not an argument (job_dir_from_environment).
    std::string job_dir;
    unsigned local_ranks = 1; ///< records to wait for
    std::vector<base::PciAddress> gpus; ///< the GPUs the plan gave this node's ranks
    MonitorOptions monitor;
    friend bool operator==(const NodeMonitorOptions&, const NodeMonitorOptions&) = default;
};

/// The monitor's arguments after node_monitor_flag, and their inverse (throws base::Error).
std::vector<std::string> node_monitor_arguments(const NodeMonitorOptions& options);
NodeMonitorOptions parse_node_monitor_arguments(const std::vector<std::string>& args);

/// `pattern` with %h replaced by `host` and %% by %.
std::string expand_host(const std::string& pattern, const std::string& host);

/// Starts `program` (gpurun-rank) node_monitor_flag ARGS as a grandchild of this process, so the
/// program this process is about to start never has it as a child: in this process group (mpirun
/// stops it with the job), stdin and stdout on /dev/null, standard error kept, no other file
/// descriptors. Returns once the monitor is started. Throws base::Error when fork fails.
void start_node_monitor(const std::string& program, const NodeMonitorOptions& options);

/// A rank's part in --monitor, before its helper starts the program: makes the node's private job
/// directory (job_dir_from_environment), starts the node's monitor when this is local rank 0 (it
/// finds the directory the same way), and records this process's pid (the helper's, the program's parent)
/// and its GPU from `plan`. Throws base::Error.
/// Returns a function that records the program's own pid once the helper has started it: a GPU
/// process that has already ended is then still known as the rank's (its parent, the helper, is not
/// asked for it any more).
std::function<void(pid_t program)> join_node_monitor(
    const MonitorOptions& monitor, const RankContext& context, const NodePlan& plan);

/// The monitor's whole run. Returns its exit status; never throws.
int run_node_monitor(const NodeMonitorOptions& options) noexcept;

} // namespace launcher
