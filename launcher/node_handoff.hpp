#pragma once

#include "launcher/binding_plan.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace launcher {

/// Where gpurun hands its plan for this node to the rank helpers on this node (in the launcher's
/// environment, passed like -x NAME). A helper that finds the plan made for the node and the
/// conditions it runs in binds from it instead of loading the topology and asking NVML again; on
/// any other host, or where anything differs, it plans from its own topology as always. The helper
/// removes the variable before it starts the program.
inline constexpr const char* node_plan_variable = "GPURUN_NODE_PLAN";

/// This node as a plan sees it: its topology (`options.topology_file`, else the live one, with
/// its PCI devices unless --cpu-only) and, unless --cpu-only, its GPUs narrowed by
/// `visible_devices` (CUDA_VISIBLE_DEVICES; null when unset). gpurun reads it to plan; a helper
/// that was handed no plan for its node reads it to plan itself.
struct ThisNode {
    base::NodeLayout layout;
    base::GpuInventory inventory;
};
ThisNode read_this_node(const PlanOptions& options, const char* visible_devices);

/// What a plan for this node was made under: a helper uses the plan only where all of it is the same.
struct NodeKey {
    std::string host; ///< the kernel's node name (uname)
    std::string boot_id; ///< /proc/sys/kernel/random/boot_id: this boot of this machine
    std::string affinity; ///< the CPUs the process may run on (sched_getaffinity), as a list
    std::optional<std::string> visible_devices; ///< CUDA_VISIBLE_DEVICES, nullopt when unset
    friend bool operator==(const NodeKey&, const NodeKey&) = default;
};

/// The key of the calling process on this node, with `visible_devices` as its CUDA_VISIBLE_DEVICES.
NodeKey this_node_key(const char* visible_devices);

/// The text of node_plan_variable: the plan's ranks (what each binds to and gets) under `key`.
std::string write_node_plan(const NodeKey& key, const NodePlan& plan);

/// The plan in `text` when it was made under `key` for `local_ranks` ranks; nullopt when it was
/// made elsewhere or under other conditions (the helper then plans itself). Throws base::Error for
/// text write_node_plan did not write.
std::optional<NodePlan> read_node_plan(std::string_view text, const NodeKey& key, unsigned local_ranks);

} // namespace launcher
