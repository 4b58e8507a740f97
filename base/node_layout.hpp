#pragma once

#include "base/cpu_set.hpp"
#include "base/pci_address.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace base {

/// A NUMA node. Nodes without CPUs (GPU memory, HBM, CXL) are kept but flagged: ranks are never
/// bound to them.
struct NumaNode {
    unsigned os_index = 0;
    CpuSet cpus; ///< allowed CPUs of the node; empty for CPU-less nodes
    std::uint64_t memory = 0; ///< bytes
    bool gpu_memory = false; ///< hwloc subtype "GPUMemory"
    bool has_cpus() const { return !cpus.empty() && !gpu_memory; }
};

/// A processor package (socket).
struct Package {
    unsigned os_index = 0;
    CpuSet cpus;
};

/// Where an I/O device sits relative to the CPUs: the allowed CPUs of its nearest non-I/O
/// ancestor (walking up past ancestors whose allowed CPUs are empty), and the NUMA nodes with CPUs
/// among them.
struct Locality {
    CpuSet cpus;
    std::vector<unsigned> numa; ///< NUMA OS indexes, ascending
    std::string source; ///< "hwloc", "sysfs" or "unknown"
    bool known() const { return source != "unknown"; }
};

/// One object above a PCI function in the topology tree. Chains of two functions meet at their
/// lowest common ancestor, which says how traffic between them runs (see base::pci_link).
struct PciAncestor {
    enum class Kind { pci_bridge, host_bridge, cpu_side };
    Kind kind = Kind::cpu_side;
    std::uint64_t id = 0; ///< hwloc gp_index: the same object has the same id in every chain
    std::string name; ///< a bridge's bus id ("0000:f0:1f.0"), "HostBridge", "Package", "Group", ...
    CpuSet cpus; ///< cpu_side only: the object's allowed CPUs
};

/// One PCI function as the topology sees it.
struct PciFunction {
    PciAddress address;
    std::uint16_t vendor_id = 0;
    std::uint16_t device_id = 0;
    std::uint16_t class_id = 0; ///< class and subclass, e.g. 0x0302
    std::string name; ///< model name where the topology has one
    std::string uuid; ///< "GPU-..." where the topology has one (hwloc NVML osdev)
    std::vector<std::string> os_devices;
    Locality locality;
    std::string nearest_hca; ///< the closest OpenFabrics device in the PCI tree, if any
    std::vector<PciAncestor> ancestors; ///< nearest first, up to the root; empty when not known

    /// An NVIDIA GPU: vendor 0x10de with class 3D controller (0x0302) or VGA (0x0300). NVSwitch
    /// (0x0680), audio and other vendors' VGA are not GPUs.
    bool is_nvidia_gpu() const { return vendor_id == 0x10de && (class_id == 0x0302 || class_id == 0x0300); }
};

/// An InfiniBand / OpenFabrics device (mlx5_0, hfi1_0, ...).
struct Hca {
    std::string name;
    PciAddress address;
    Locality locality;
};

/// Everything about one node that a launch plan needs, as plain data: built from hwloc by
/// base::Topology, or written by hand in tests.
struct NodeLayout {
    std::string hostname;
    CpuSet allowed; ///< CPUs this process may use (cgroups, affinity)
    std::vector<CpuSet> cores; ///< allowed PUs of each core (SMT siblings together)
    std::vector<NumaNode> numa_nodes;
    std::vector<Package> packages;
    std::vector<PciFunction> pci; ///< in PCI bus order
    std::vector<Hca> hcas; ///< in PCI bus order

    const PciFunction* find_pci(const PciAddress& address) const;
    /// NUMA nodes with CPUs that share CPUs with `cpus`, ascending OS index.
    std::vector<unsigned> numa_of(const CpuSet& cpus) const;
    /// The union of the packages that share CPUs with `cpus`.
    CpuSet packages_of(const CpuSet& cpus) const;
    /// Whole cores with at least one PU in `cpus`, each reduced to its PUs in `cpus`.
    std::vector<CpuSet> cores_in(const CpuSet& cpus) const;
    /// The first HCA (bus order) whose locality shares CPUs with `cpus`; "" when none does.
    std::string nearest_hca(const CpuSet& cpus) const;
    /// NUMA nodes that have CPUs.
    std::vector<const NumaNode*> cpu_numa_nodes() const;
};

} // namespace base
