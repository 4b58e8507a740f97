#pragma once

#include "base/node_layout.hpp"
#include "base/pci_address.hpp"
#include "base/sysroot.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace base {

struct NvmlGpu;

/// One GPU of this node, with where it sits.
struct Gpu {
    unsigned physical_index = 0; ///< position among all the node's GPUs in PCI bus order
    PciAddress bus_id;
    std::string name;
    std::string uuid; ///< "GPU-..." when known (NVML, or the topology's NVML osdev)
    std::optional<std::uint64_t> memory_total;
    std::vector<std::string> mig_uuids;
    /// What selects this GPU in CUDA_VISIBLE_DEVICES: the incoming entry, else the UUID, else the
    /// PCI-order index (valid with CUDA_DEVICE_ORDER=PCI_BUS_ID).
    std::string selector;
    Locality locality;
    std::string hca; ///< nearest OpenFabrics device, "" when none
};

/// The GPUs a job may use on this node, in CUDA's order: the order of CUDA_VISIBLE_DEVICES when
/// it is set, else PCI bus order.
struct GpuInventory {
    std::vector<Gpu> pool;
    std::string source; ///< "nvml" or "topology" (hwloc PCI devices)
    std::vector<std::string> notes; ///< why a fallback was taken, locality caveats
    bool visible_devices_set = false; ///< CUDA_VISIBLE_DEVICES narrowed the pool
};

/// NVIDIA GPUs among the topology's PCI devices, in PCI bus order.
std::vector<Gpu> gpus_from_topology(const NodeLayout& layout);

/// GPUs as NVML reports them, placed with the topology (or sysfs when hwloc lacks the device),
/// sorted into PCI bus order.
std::vector<Gpu> gpus_from_nvml(
    const std::vector<NvmlGpu>& nvml_gpus, const NodeLayout& layout, const Sysroot& sysroot);

/// Locality from /sys/bus/pci/devices/<bdf>/{local_cpulist,numa_node}; source "unknown" when
/// neither says anything.
Locality sysfs_locality(const PciAddress& address, const NodeLayout& layout, const Sysroot& sysroot);

/// Narrows and orders `all` (PCI order) by a CUDA_VISIBLE_DEVICES value: indexes, "GPU-<uuid>"
/// (unique prefixes allowed), "MIG-<uuid>" or "MIG-GPU-<uuid>/gi/ci". Throws base::Error for an
/// entry that matches no GPU or one listed twice.
std::vector<Gpu> select_visible(const std::vector<Gpu>& all, std::string_view visible_devices);

struct InventoryOptions {
    bool from_topology_file = false; ///< never ask this machine's NVML about a file's GPUs
    Sysroot sysroot;
    std::optional<std::string> visible_devices; ///< CUDA_VISIBLE_DEVICES, when set
    std::string nvml_library; ///< "" for the default (GPUKIT_NVML_LIBRARY or soname)
    /// How long NVML may take to list the GPUs. It is asked in a child process, so that an NVML
    /// that hangs or crashes (a wedged driver) costs this long and a note, not the program.
    std::chrono::milliseconds nvml_timeout{10000};
};

/// The GPUs NVML lists, asked in a child process with `timeout`. Throws base::Error when NVML
/// does not load, does not answer in time ("NVML did not answer in 10 s"), or crashes.
std::vector<NvmlGpu> nvml_gpus_guarded(const std::string& library, std::chrono::milliseconds timeout);

/// The pool: NVML when it loads, else the topology's PCI devices; then CUDA_VISIBLE_DEVICES.
GpuInventory discover_gpus(const NodeLayout& layout, const InventoryOptions& options);

} // namespace base
