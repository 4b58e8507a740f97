#pragma once

#include "launcher/launch_options.hpp"

#include <string>
#include <vector>

namespace launcher {

/// What gpurun tells the rank helper on its command line. The helper reads everything else (its
/// rank, the node's topology and GPUs) where it runs.
struct HelperOptions {
    PlanOptions plan;
    std::string master_addr;
    unsigned master_port = 0;
    bool report_bindings = false;
    NicBinding nic_binding = NicBinding::ucx; ///< which variables name the rank's nearest HCA
    BatchOptions batch;
    ProfileOptions profile; ///< the helper of a chosen rank execs the profiler with the program
    MonitorOptions monitor; ///< interval 0: no monitor
    /// --monitor: the job id naming each node's private directory. gpurun's side only: it reaches
    /// the helpers in the environment (job_id_variable), not as an argument.
    std::string monitor_job;
    OutputOptions output; ///< --tag-output, --log-dir
    /// The ranks of each host, in rank order (--host-ranks 8(x2),4): a rank's host index is its
    /// node rank (GROUP_RANK, NODE_RANK). Empty: not known (a helper started by hand).
    std::vector<unsigned> host_ranks;
    double grace_seconds = 10.0; ///< --grace: between passing on a signal and SIGKILL
    std::vector<std::string> program;
    friend bool operator==(const HelperOptions&, const HelperOptions&) = default;
};

/// The helper's arguments (without the helper's own path): options that differ from the defaults,
/// then "--" and the program with its arguments unchanged.
std::vector<std::string> helper_arguments(const HelperOptions& options);

/// The inverse of helper_arguments. Throws base::Error for anything it did not write.
HelperOptions parse_helper_arguments(const std::vector<std::string>& args);

} // namespace launcher
