#pragma once

// What decides whether GPU peer-to-peer traffic takes the short path (the "pci" collector): the
// IOMMU mode, whether this is a virtual machine, and PCIe ACS on the bridges above each NVIDIA GPU,
// from sysfs and config space. For the p2p probe.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace doctor::facts {

/// The IOMMU as the kernel set it up.
struct PciIommu {
    unsigned groups = 0; ///< entries of /sys/kernel/iommu_groups; 0: off or absent
    std::map<std::string, unsigned> types; ///< group type ("DMA", "DMA-FQ", "identity", ...) → groups
    std::vector<std::string> cmdline_options; ///< the iommu*, intel_iommu*, amd_iommu* words of /proc/cmdline

    static constexpr auto fields()
    {
        return std::tuple{field("groups", &PciIommu::groups), field("types", &PciIommu::types),
            list("cmdline_options", &PciIommu::cmdline_options, Ceilings::devices, "IOMMU boot options")};
    }
};

/// Whether this is a virtual machine, and what says so.
struct PciVm {
    bool virtual_machine = false;
    std::optional<std::string> evidence; ///< "/sys/class/dmi/id/sys_vendor is 'QEMU'"
    std::optional<std::string> sys_vendor; ///< DMI, as read
    std::optional<std::string> product_name;

    static constexpr auto fields()
    {
        return std::tuple{field("virtual", &PciVm::virtual_machine), field("evidence", &PciVm::evidence),
            field("sys_vendor", &PciVm::sys_vendor), field("product_name", &PciVm::product_name)};
    }
};

/// An NVIDIA GPU in sysfs.
struct PciGpu {
    std::string bus_id;
    std::optional<std::vector<std::string>> upstream_bridges; ///< bus ids, nearest first
    std::optional<std::string> iommu_group;
    std::optional<std::string> iommu_type; ///< its group's type

    static constexpr auto fields()
    {
        return std::tuple{field("bus_id", &PciGpu::bus_id, 0, Kind::bus_id),
            list("upstream_bridges", &PciGpu::upstream_bridges, Ceilings::devices, "bridges above one GPU",
                Kind::bus_id),
            field("iommu_group", &PciGpu::iommu_group), field("iommu_type", &PciGpu::iommu_type)};
    }
};

/// A bridge above a GPU and its ACS Control register, when its extended config space could be read.
struct PciBridge {
    std::string bus_id;
    bool readable = false; ///< its whole config space (4 KiB) was read
    std::optional<std::string> reason; ///< why not: "config missing", "unreadable (needs root)"
    std::optional<std::uint64_t> config_bytes; ///< how much of it was readable
    std::optional<bool> acs; ///< it has the ACS capability
    std::optional<unsigned> acs_offset;
    std::optional<std::string> acs_control; ///< "0x001d"
    std::optional<bool> source_validation;
    std::optional<bool> request_redirect;
    std::optional<bool> completion_redirect;

    /// ACS sends peer-to-peer traffic up to the root complex.
    bool redirects() const { return request_redirect.value_or(false) || completion_redirect.value_or(false); }

    static constexpr auto fields()
    {
        return std::tuple{field("bus_id", &PciBridge::bus_id, 0, Kind::bus_id), field("readable", &PciBridge::readable),
            field("reason", &PciBridge::reason), field("config_bytes", &PciBridge::config_bytes),
            field("acs", &PciBridge::acs), field("acs_offset", &PciBridge::acs_offset),
            field("acs_control", &PciBridge::acs_control), field("source_validation", &PciBridge::source_validation),
            field("request_redirect", &PciBridge::request_redirect),
            field("completion_redirect", &PciBridge::completion_redirect)};
    }
};

struct PciFacts {
    PciIommu iommu;
    PciVm vm;
    std::vector<PciGpu> gpus; ///< NVIDIA GPUs under /sys/bus/pci/devices, in bus order
    std::vector<PciBridge> bridges; ///< every bridge above them, once

    static constexpr auto fields()
    {
        return std::tuple{field("iommu", &PciFacts::iommu), field("vm", &PciFacts::vm),
            list("gpus", &PciFacts::gpus, Ceilings::gpus, "GPUs"),
            list("bridges", &PciFacts::bridges, Ceilings::devices, "PCI bridges")};
    }
};

} // namespace doctor::facts
