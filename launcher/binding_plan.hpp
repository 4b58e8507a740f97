#pragma once

#include "launcher/launch_options.hpp"
#include "probes/cpu_set.hpp"
#include "probes/gpu_inventory.hpp"
#include "probes/node_layout.hpp"

#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// What one rank gets on its node.
struct RankBinding {
    unsigned local_rank = 0;
    std::optional<probes::Gpu> gpu; ///< nullopt with --cpu-only
    unsigned cuda_index = 0; ///< the GPU's position in the pool: its CUDA device number
    probes::CpuSet cpus; ///< CPUs to bind to (all allowed CPUs with --bind none)
    std::vector<unsigned> numa; ///< NUMA nodes for memory (empty: no memory binding)
    unsigned cores = 0; ///< whole cores in `cpus`
    bool shared = false; ///< too few cores: these CPUs are shared with other ranks
    std::string hca;
};

/// The plan for one node.
struct NodePlan {
    std::vector<RankBinding> ranks;
    std::vector<std::string> notes;
};

/// The plan for `local_ranks` ranks on a node: pure, so gpurun (to preview) and each rank's helper
/// (to bind) compute the same answer. Local rank i gets pool GPU i / ranks_per_gpu; ranks that share
/// a domain (NUMA node, package) split its free whole cores. Throws probes::Error when the node
/// cannot hold the ranks (more ranks than GPUs, too few cores for --cpus-per-rank).
NodePlan plan_node(const probes::NodeLayout& layout, const std::vector<probes::Gpu>& pool, const PlanOptions& options,
    unsigned local_ranks, const std::string& host = "");

/// One rank of the job.
struct JobRank {
    unsigned rank = 0;
    std::string host;
    RankBinding binding;
};

struct JobPlan {
    std::vector<JobRank> ranks;
    std::vector<HostSlots> hosts; ///< every host used, with the ranks it runs as its slots
    std::vector<std::string> notes;
};

/// Places `np` ranks (default: every GPU of every host) on the hosts in order, filling each
/// host's slots like `mpirun --map-by slot`, and plans each node from `layout` (the real nodes
/// plan from their own topology). No hosts means this node alone, named `local_host`.
JobPlan plan_job(const probes::NodeLayout& layout, const std::vector<probes::Gpu>& pool, const PlanOptions& options,
    std::optional<unsigned> np, const std::vector<HostSlots>& hosts, const std::string& local_host);

} // namespace launcher
