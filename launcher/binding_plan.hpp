#pragma once

#include "base/cpu_set.hpp"
#include "base/gpu_inventory.hpp"
#include "base/node_layout.hpp"
#include "launcher/launch_options.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// The most ranks a job may have: far beyond any cluster, and a bound on the memory a plan takes.
inline constexpr unsigned max_job_ranks = 1'000'000;

/// The most GPUs --gpus-per-node may give a host: more than any node holds (a DGX-2 has 16).
inline constexpr unsigned max_gpus_per_node = 1024;

/// The most ranks --ranks-per-gpu may give one GPU.
inline constexpr unsigned max_ranks_per_gpu = 64;

/// What one rank gets on its node.
struct RankBinding {
    unsigned local_rank = 0;
    std::optional<base::Gpu> gpu; ///< nullopt with --cpu-only
    unsigned cuda_index = 0; ///< the GPU's position in the pool: its CUDA device number
    base::CpuSet cpus; ///< CPUs to bind to (all allowed CPUs with --bind none)
    std::vector<unsigned> numa; ///< NUMA nodes for memory (empty: no memory binding)
    unsigned cores = 0; ///< whole cores in `cpus`
    bool shared = false; ///< too few cores: these CPUs are shared with other ranks
    std::string hca;
    /// Chosen by the rank's helper on its host: this node cannot preview that host (it has no GPUs,
    /// or fewer than the host's ranks, and no --topology HOST=FILE was given). The GPU, CPUs and
    /// NIC above are then empty.
    bool on_host = false;
};

/// The plan for one node.
struct NodePlan {
    std::vector<RankBinding> ranks;
    std::vector<std::string> notes;
};

/// The plan for `local_ranks` ranks on a node: pure, so gpurun (to preview) and each rank's helper
/// (to bind) compute the same answer. Local rank i gets pool GPU i / ranks_per_gpu; ranks that share
/// a domain (NUMA node, package) split its free whole cores. Throws base::Error when the node
/// cannot hold the ranks (more ranks than GPUs, too few cores for --cpus-per-rank).
NodePlan plan_node(const base::NodeLayout& layout, const std::vector<base::Gpu>& pool, const PlanOptions& options,
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

/// The variables --nic-binding gives a rank whose nearest HCA is `hca`, port 1: UCX_NET_DEVICES
/// (ucx, nccl), and NCCL_IB_HCA with '=' for an exact name match (nccl). The helper sets each one
/// the user has not set.
std::vector<std::pair<std::string, std::string>> nic_variables(NicBinding binding, const std::string& hca);

/// What a node is made of, for planning: its layout and its GPU pool.
struct NodeSpec {
    base::NodeLayout layout;
    std::vector<base::Gpu> pool;
};

/// A host's spec: `own` is false for a host previewed with the default (this node's) topology.
struct HostSpec {
    const NodeSpec* spec = nullptr;
    bool own = false;
};

/// Whether `host` names the node gpurun runs on, called `local_host` (its host name).
bool is_this_node(const std::string& host, const std::string& local_host);

/// How many ranks a node holds by default: its GPUs times --ranks-per-gpu; with --cpu-only, its
/// cores.
unsigned node_capacity(const NodeSpec& node, const PlanOptions& options);

/// Places `np` ranks (default: every GPU of every host) on the hosts in order, filling each
/// host's slots (default: its capacity) like `mpirun --map-by slot`, and plans each node from the
/// spec `spec_of` gives for it (a real node's helper plans from its own topology). No hosts means
/// this node alone, named `local_host`. Hosts with the same spec and rank count share one plan, so
/// a thousand identical nodes cost one node plan.
JobPlan plan_job(const std::function<HostSpec(const std::string& host)>& spec_of, const PlanOptions& options,
    std::optional<unsigned> np, const std::vector<HostSlots>& hosts, const std::string& local_host);

/// plan_job with one topology for every host.
JobPlan plan_job(const base::NodeLayout& layout, const std::vector<base::Gpu>& pool, const PlanOptions& options,
    std::optional<unsigned> np, const std::vector<HostSlots>& hosts, const std::string& local_host);

} // namespace launcher
