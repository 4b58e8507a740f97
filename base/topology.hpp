#pragma once

#include "base/binding.hpp"
#include "base/cpu_set.hpp"
#include "base/node_layout.hpp"

#include <string>
#include <vector>

struct hwloc_topology;

namespace base {

/// How traffic between two PCI devices runs, in `nvidia-smi topo -m` terms: through at most one
/// PCIe switch (PIX), several bridges below the host bridge (PXB), the host bridge (PHB), the
/// interconnect between host bridges of one NUMA node (NODE), or between NUMA nodes (SYS).
enum class PciLink { self, pix, pxb, phb, node, sys, unknown };

/// "X", "PIX", "PXB", "PHB", "NODE", "SYS", "?".
const char* to_string(PciLink link);

/// The link between two PCI functions of `layout`, from their ancestor chains (walked by hand:
/// hwloc's common-ancestor call misbehaves on I/O objects). PIX when each side has at most one
/// bridge below the common bridge (a switch: upstream port over downstream ports); PXB for deeper
/// bridge trees; PHB when the chains meet at a host bridge; across host bridges NODE when the two
/// devices share a NUMA node (or the meeting point spans at most one), else SYS. `unknown` when
/// either chain is empty or they do not meet.
PciLink pci_link(const NodeLayout& layout, const PciFunction& a, const PciFunction& b);

/// Loading a topology has a deadline: default_topology_timeout_s seconds, or the variable's value
/// (whole seconds, 1 to 86400). Past it the process ends with a message saying so (exit 2 for an
/// XML file, 3 for the machine's own).
inline constexpr const char* topology_timeout_variable = "GPUKIT_TOPOLOGY_TIMEOUT";
inline constexpr unsigned default_topology_timeout_s = 30;

/// The deadline in seconds; throws base::Error when the variable is not a number in range.
unsigned topology_load_timeout();

/// The hwloc topology of this machine (live) or of an XML file, with I/O devices kept. The only
/// place that talks to hwloc.
class Topology {
public:
    /// Discovers this machine; `with_io` adds PCI devices (a PCI scan costs several ms, and
    /// CPU-only plans do not need it). Throws base::Error naming the failing hwloc call.
    static Topology load_live(bool with_io = true);
    /// Loads an hwloc XML file (v1 or v2). A file hwloc cannot read, or one that would crash it, is
    /// a base::Error naming the file. With `crash_guard` the loading is tried in a child process
    /// first (hwloc crashes on some malformed files); without, a file that gpurun already loaded is
    /// read once, which is what the per-rank helper does.
    static Topology load_xml(const std::string& path, bool crash_guard = true);

    ~Topology();
    Topology(Topology&& other) noexcept;
    Topology& operator=(Topology&&) = delete;
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    /// The node as plain data.
    NodeLayout layout() const;

    /// True for this machine's live topology; false for XML, which describes another (or a past)
    /// machine: a plan made from it is not bound (base/binding.hpp).
    bool is_this_system() const;

private:
    explicit Topology(hwloc_topology* topology) : m_topology(topology) { }
    hwloc_topology* m_topology = nullptr;
};

} // namespace base
