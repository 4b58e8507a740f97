#pragma once

// InfiniBand/RoCE ports and the GPUDirect RDMA module (the "network" collector), from sysfs and
// /proc/modules. For the network and nccl-env probes and fleet.

#include "doctor/facts/schema.hpp"

#include <optional>
#include <string>
#include <vector>

namespace doctor::facts {

/// One port as sysfs shows it; a file that could not be read is missing.
struct IbPort {
    unsigned port = 0;
    std::optional<std::string> state; ///< "4: ACTIVE"
    std::optional<std::string> phys_state; ///< "5: LinkUp"
    std::optional<std::string> rate; ///< "200 Gb/sec (4X HDR)"
    std::optional<std::string> link_layer; ///< "InfiniBand" or "Ethernet" (RoCE)

    static constexpr auto fields()
    {
        return std::tuple{field("port", &IbPort::port), field("state", &IbPort::state),
            field("phys_state", &IbPort::phys_state), field("rate", &IbPort::rate),
            field("link_layer", &IbPort::link_layer)};
    }
};

/// A device of /sys/class/infiniband (mlx5_0, ...).
struct IbDevice {
    std::string name;
    std::vector<IbPort> ports; ///< in port order
    std::optional<std::vector<std::string>> netdevs; ///< its network interfaces (RoCE, IPoIB)

    static constexpr auto fields()
    {
        return std::tuple{field("name", &IbDevice::name),
            list("ports", &IbDevice::ports, Ceilings::devices, "ports of one device"),
            list("netdevs", &IbDevice::netdevs, Ceilings::devices, "network interfaces of one device")};
    }
};

/// One of the files by which NCCL tells that GPUDirect RDMA is there.
struct PeermemFile {
    std::string file; ///< "/sys/module/nvidia_peermem/version"
    std::optional<std::string> version;

    static constexpr auto fields()
    {
        return std::tuple{field("file", &PeermemFile::file), field("version", &PeermemFile::version)};
    }
};

/// The GPUDirect RDMA module: NCCL's own tests for it.
struct Peermem {
    std::vector<PeermemFile> files; ///< those that exist
    /// nvidia_peermem or nv_peer_mem when loaded; null when /proc/modules could not be read.
    std::optional<std::vector<std::string>> modules;

    static constexpr auto fields()
    {
        return std::tuple{list("files", &Peermem::files, Ceilings::devices, "GPUDirect RDMA files"),
            nullable("modules", &Peermem::modules)};
    }
};

struct NetworkFacts {
    std::vector<IbDevice> infiniband; ///< every device of /sys/class/infiniband, in name order
    Peermem peermem;

    static constexpr auto fields()
    {
        return std::tuple{list("infiniband", &NetworkFacts::infiniband, Ceilings::devices, "InfiniBand devices"),
            field("peermem", &NetworkFacts::peermem)};
    }
};

} // namespace doctor::facts
