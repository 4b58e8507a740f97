#pragma once

// The hosts of the Slurm allocation gpurun runs in, and how many ranks each runs, from the
// variables salloc, sbatch and srun set. Pure: the environment is handed in.

#include "launcher/launch_options.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace launcher {

struct SlurmAllocation {
    std::vector<HostSlots> hosts; ///< SLURM_JOB_NODELIST, each with its ranks where the variables tell
    std::vector<std::string> notes; ///< where the counts came from, when it is not plain
    std::optional<unsigned> gpus_per_node; ///< the GPUs Slurm gives each node, where it says
    std::string gpus_told_by; ///< the variable that says it, as NAME=VALUE
};

/// Inside an allocation (SLURM_JOB_NODELIST set), its nodes and their ranks; nullopt outside one.
/// GPUs per node come from SLURM_GPUS_PER_NODE ("[TYPE:]N", several joined by ','), else from this
/// node's SLURM_GPUS_ON_NODE or SLURM_JOB_GPUS (taken for every node, with a note). Each node runs
/// its GPUs times `ranks_per_gpu` ranks; Slurm's task counts (SLURM_TASKS_PER_NODE) are used only
/// where the user chose them (SLURM_NTASKS or SLURM_NTASKS_PER_NODE set) and the GPUs are not known,
/// or with `cpu_only`; else each node's ranks are left for the caller to decide. Throws
/// base::Error, naming the variables, for a value that is not a count and for variables that
/// disagree (SLURM_GPUS_ON_NODE against SLURM_JOB_GPUS or SLURM_GPUS_PER_NODE, task counts for more
/// or fewer nodes than the list).
std::optional<SlurmAllocation> slurm_allocation(
    const std::function<const char*(const char*)>& env, unsigned ranks_per_gpu, bool cpu_only);

/// The GPUs one node gets from a Slurm GPU request as SLURM_GPUS_PER_NODE writes it: "8", "a100:8",
/// "a100:2,v100:1" (3). Throws base::Error naming `variable` for anything else.
unsigned slurm_gpu_count(const std::string& variable, const std::string& value);

} // namespace launcher
