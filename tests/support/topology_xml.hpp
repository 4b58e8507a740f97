#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace test_support {

/// Writes hwloc v2 XML topologies for tests, so no test depends on a captured machine. The shape:
/// Machine > Package > (Group per NUMA node when a package has several) > NUMANode, Cores > PUs,
/// and host bridges (optionally with PCI switches) carrying PCI devices and their OS devices.
class TopologyXml {
public:
    explicit TopologyXml(std::string hostname = "testnode") : m_hostname(std::move(hostname)) { }

    /// A package; returns its index (also its OS index).
    unsigned package();
    /// A NUMA node with `cores` cores of `smt` PUs each, in `package`; returns its position.
    unsigned numa(unsigned package, unsigned os_index, unsigned cores, unsigned smt = 1);
    /// A CPU-less GPU-memory NUMA node (hwloc subtype "GPUMemory") in `package`.
    void gpu_memory_numa(unsigned package, unsigned os_index);

    struct Attach {
        enum class Kind { numa, package, machine, pci_switch } kind;
        unsigned index;
    };
    static Attach at_numa(unsigned position) { return {Attach::Kind::numa, position}; }
    static Attach at_package(unsigned package) { return {Attach::Kind::package, package}; }
    static Attach at_machine() { return {Attach::Kind::machine, 0}; }
    static Attach at_switch(unsigned sw) { return {Attach::Kind::pci_switch, sw}; }

    /// A PCIe switch below a host bridge at `where`; returns its index for at_switch().
    unsigned pci_switch(Attach where);
    /// A PCI device. `os_devices` are (name, osdev_type) pairs: 3 = OpenFabrics, 2 = network,
    /// 1 = GPU, 5 = co-processor. `infos` are (name, value) pairs put on the first OS device.
    void pci(Attach where, const std::string& bus_id, std::uint16_t vendor, std::uint16_t device,
        std::uint16_t class_id, std::vector<std::pair<std::string, int>> os_devices = {},
        std::vector<std::pair<std::string, std::string>> infos = {});
    /// An NVIDIA datacenter GPU (10de:20b0, class 0302), optionally with an nvml OS device
    /// carrying a UUID.
    void gpu(Attach where, const std::string& bus_id, const std::string& uuid = "");
    /// A Mellanox InfiniBand HCA (15b3:101b, class 0207) with its OpenFabrics device.
    void hca(Attach where, const std::string& bus_id, const std::string& name);

    /// Number PUs Linux-style: first thread of every core, then the second (0-63,64-127).
    void linux_smt_numbering() { m_linux_smt = true; }
    /// Only these PU OS indexes are allowed (cgroup cpuset).
    void allow_only(std::vector<unsigned> pus) { m_allowed = std::move(pus); }

    std::string xml() const;
    /// Writes xml() to `path` and returns it.
    std::filesystem::path write(const std::filesystem::path& path) const;

private:
    struct Pci {
        Attach where;
        std::string bus_id;
        std::uint16_t vendor, device, class_id;
        std::vector<std::pair<std::string, int>> os_devices;
        std::vector<std::pair<std::string, std::string>> infos;
    };
    struct Numa {
        unsigned package, os_index, cores, smt;
        bool gpu_memory;
    };
    struct Switch {
        Attach where;
    };
    std::string m_hostname;
    unsigned m_packages = 0;
    std::vector<Numa> m_numa;
    std::vector<Pci> m_pci;
    std::vector<Switch> m_switches;
    bool m_linux_smt = false;
    std::optional<std::vector<unsigned>> m_allowed;
};

} // namespace test_support
