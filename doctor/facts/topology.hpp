#pragma once

// The node as hwloc sees it (the "topology" collector): its NUMA nodes, where each NVIDIA GPU sits
// (CPUs, NUMA node, nearest HCA, path up the PCI tree), the link class of every GPU pair from the
// PCI tree, and the HCAs. For the topology, gpus, binding and network probes and `gpudoctor topo`.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doctor::facts {

/// A NUMA node; nodes without CPUs (GPU memory, HBM, CXL) are listed too.
struct TopologyNuma {
    unsigned os_index = 0;
    std::string cpus; ///< cpulist of its allowed CPUs; "" for a node without CPUs
    std::optional<std::uint64_t> memory; ///< bytes
    bool gpu_memory = false; ///< hwloc subtype "GPUMemory": no rank is bound to it

    /// A node ranks may be bound to.
    bool has_cpus() const { return !cpus.empty() && !gpu_memory; }

    static constexpr auto fields()
    {
        return std::tuple{field("os_index", &TopologyNuma::os_index), field("cpus", &TopologyNuma::cpus),
            field("memory", &TopologyNuma::memory), field("gpu_memory", &TopologyNuma::gpu_memory)};
    }
};

/// One NVIDIA GPU of the PCI tree. Where it sits may be unknown (a VM without NUMA affinity, a
/// topology file without the PCI tree): then `cpus` is "" and `numa` is empty.
struct TopologyGpu {
    unsigned index = 0; ///< position among the node's GPUs in PCI bus order
    std::string bus_id; ///< "0000:1b:00.0"
    std::optional<std::string> name;
    std::optional<std::string> cpus; ///< cpulist of the CPUs near it; "" when unknown
    std::optional<std::vector<unsigned>> numa; ///< its NUMA nodes; empty when unknown
    std::optional<std::string> hca; ///< the OpenFabrics device nearest in the PCI tree; none when none
    /// The objects above it up to the first CPU-side one, nearest first ("0000:f0:1f.0",
    /// "HostBridge", "Package"): why a pair got its link class.
    std::optional<std::vector<std::string>> pci_path;

    /// Its CPUs and NUMA nodes are both known.
    bool located() const { return cpus && !cpus->empty() && numa && !numa->empty(); }

    static constexpr auto fields()
    {
        return std::tuple{field("index", &TopologyGpu::index, 0, Kind::gpu_index),
            field("bus_id", &TopologyGpu::bus_id, 0, Kind::bus_id), field("name", &TopologyGpu::name),
            field("cpus", &TopologyGpu::cpus),
            list("numa", &TopologyGpu::numa, Ceilings::devices, "NUMA nodes of one GPU"),
            field("hca", &TopologyGpu::hca),
            list("pci_path", &TopologyGpu::pci_path, Ceilings::devices, "PCI objects above one GPU")};
    }
};

/// Two GPUs of the PCI tree and how traffic between them runs.
struct TopologyLink {
    std::string a; ///< bus id
    std::string b;
    std::string link; ///< nvidia-smi topo -m's class: "PIX", "PXB", "PHB", "NODE", "SYS" or "?"

    static constexpr auto fields()
    {
        return std::tuple{field("a", &TopologyLink::a, 0, Kind::bus_id), field("b", &TopologyLink::b, 0, Kind::bus_id),
            field("link", &TopologyLink::link)};
    }
};

/// An InfiniBand/OpenFabrics device (mlx5_0, hfi1_0, ...).
struct TopologyHca {
    std::string name;
    std::string bus_id;
    std::optional<std::string> cpus; ///< cpulist of the CPUs near it
    std::optional<std::vector<unsigned>> numa; ///< its NUMA nodes; empty when unknown

    static constexpr auto fields()
    {
        return std::tuple{field("name", &TopologyHca::name), field("bus_id", &TopologyHca::bus_id, 0, Kind::bus_id),
            field("cpus", &TopologyHca::cpus),
            list("numa", &TopologyHca::numa, Ceilings::devices, "NUMA nodes of one HCA")};
    }
};

/// The node's topology, this machine's (live) or a --topology file's.
struct TopologyFacts {
    std::string source; ///< "live", or the hwloc XML file read
    std::optional<std::string> hostname;
    std::optional<std::string> allowed_cpus; ///< cpulist of the CPUs this process may use
    std::optional<unsigned> cores;
    std::optional<std::vector<TopologyNuma>> numa_nodes;
    std::vector<TopologyGpu> gpus; ///< in PCI bus order
    /// Every pair of `gpus`, from the PCI tree; missing in a snapshot of a gpudoctor before it.
    std::optional<std::vector<TopologyLink>> links;
    std::optional<std::vector<TopologyHca>> hcas; ///< in PCI bus order

    /// This machine's topology, not a file's (which describes another machine, or a past one).
    bool live() const { return source == "live"; }

    static constexpr auto fields()
    {
        return std::tuple{field("source", &TopologyFacts::source), field("hostname", &TopologyFacts::hostname),
            field("allowed_cpus", &TopologyFacts::allowed_cpus), field("cores", &TopologyFacts::cores),
            list("numa_nodes", &TopologyFacts::numa_nodes, Ceilings::devices, "NUMA nodes"),
            list("gpus", &TopologyFacts::gpus, Ceilings::gpus, "GPUs"),
            list("links", &TopologyFacts::links, Ceilings::pairs, "GPU pairs"),
            list("hcas", &TopologyFacts::hcas, Ceilings::devices, "HCAs")};
    }
};

} // namespace doctor::facts
