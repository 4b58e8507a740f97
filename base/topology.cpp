#include "base/topology.hpp"

#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/process.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <hwloc.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

namespace base {

namespace {

CpuSet to_cpu_set(hwloc_const_bitmap_t bitmap)
{
    std::vector<unsigned> cpus;
    if (bitmap == nullptr || hwloc_bitmap_weight(bitmap) < 0) {
        return CpuSet();
    }
    for (int id = hwloc_bitmap_first(bitmap); id != -1; id = hwloc_bitmap_next(bitmap, id)) {
        cpus.push_back(static_cast<unsigned>(id));
    }
    return CpuSet(std::move(cpus));
}

struct Bitmap {
    hwloc_bitmap_t bits = hwloc_bitmap_alloc();
    Bitmap() = default;
    explicit Bitmap(const std::vector<unsigned>& ids)
    {
        for (unsigned id : ids) {
            hwloc_bitmap_set(bits, id);
        }
    }
    ~Bitmap() { hwloc_bitmap_free(bits); }
    Bitmap(const Bitmap&) = delete;
    Bitmap& operator=(const Bitmap&) = delete;
};

const char* info(hwloc_obj_t obj, const char* name)
{
    const char* value = hwloc_obj_get_info_by_name(obj, name);
    return value != nullptr ? value : "";
}

/// An XML topology read into memory (read_input_file: bounded, and a FIFO is read once).
struct XmlInput {
    std::string path;
    std::string text;
};

hwloc_topology_t prepare(const XmlInput* xml, bool with_io)
{
    hwloc_topology_t topology = nullptr;
    // Keep hwloc from dlopen()ing its plugins (libxml2+ICU, OpenCL, X11/NVCtrl; libpciaccess too
    // without I/O): hwloc_topology_set_components() cannot stop that, it comes too late.
    const bool set_blacklist = std::getenv("HWLOC_PLUGINS_BLACKLIST") == nullptr;
    if (set_blacklist) {
        setenv("HWLOC_PLUGINS_BLACKLIST",
            with_io ? "hwloc_xml_libxml,hwloc_opencl,hwloc_gl" : "hwloc_xml_libxml,hwloc_opencl,hwloc_gl,hwloc_pci", 1);
    }
    const int init_rc = hwloc_topology_init(&topology);
    if (set_blacklist) {
        unsetenv("HWLOC_PLUGINS_BLACKLIST"); // not for mpirun or the program
    }
    if (init_rc != 0) {
        throw Error(fmt::format("hwloc_topology_init failed: {}", std::strerror(errno)));
    }
    if (xml != nullptr &&
        hwloc_topology_set_xmlbuffer(topology, xml->text.c_str(), static_cast<int>(xml->text.size() + 1)) != 0) {
        int err = errno;
        hwloc_topology_destroy(topology);
        if (err == EINVAL) {
            throw Error(
                fmt::format("cannot read topology {}: not an hwloc XML file (hwloc_topology_set_xmlbuffer: {}); "
                            "write one with lstopo --of xml",
                    xml->path, std::strerror(err)));
        }
        throw Error(fmt::format("cannot read topology {}: {}", xml->path, std::strerror(err)));
    }
    // PCI devices are dropped unless asked for, also from XML. Caches and other costly extras are
    // irrelevant to GPU locality and cost load time in the per-rank helper.
    hwloc_topology_set_io_types_filter(
        topology, with_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_cache_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_NONE);
#if HWLOC_API_VERSION >= 0x00020800
    hwloc_topology_set_flags(
        topology, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS | HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
#endif
    hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    // The x86 backend binds to every PU in turn to run cpuid (a VM exit each in a VM); sysfs has what we use.
    hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    return topology;
}

std::string load_too_long(const XmlInput* xml, unsigned seconds)
{
    return fmt::format("loading the topology{} took over {} s; hwloc's time grows fast with the number of objects: "
                       "is it the right file? Set {}=SECONDS to wait longer",
        xml != nullptr ? " " + xml->path : std::string(), seconds, topology_timeout_variable);
}

// hwloc's load time grows faster than the number of objects (a 14 MB XML of 200,000 PUs ran for
// minutes): past the deadline the process ends with a message, exit 2 for a file the user gave,
// 3 for this machine's own topology. The message is made before the alarm is armed.
int load_within_deadline(hwloc_topology_t topology, const XmlInput* xml, unsigned seconds)
{
    static std::string message;
    message = fmt::format("{}: {}\n", program_invocation_short_name, load_too_long(xml, seconds));
    const CallDeadline deadline(seconds, message.c_str(), xml != nullptr ? 2 : 3);
    return hwloc_topology_load(topology);
}

// `deadline` false: the caller keeps the time (a child the parent waits for).
hwloc_topology_t load(const XmlInput* xml, bool with_io = true, bool deadline = true)
{
    // Read before the topology is made: a bad value is an exception that must not leak it.
    const unsigned seconds = deadline ? topology_load_timeout() : 0;
    hwloc_topology_t topology = prepare(xml, with_io);
    if ((deadline ? load_within_deadline(topology, xml, seconds) : hwloc_topology_load(topology)) != 0) {
        int err = errno;
        hwloc_topology_destroy(topology);
        if (xml != nullptr) {
            throw Error(fmt::format("cannot read topology {}: not an hwloc XML file (hwloc_topology_load: {}); "
                                    "write one with lstopo --of xml",
                xml->path, std::strerror(err)));
        }
        throw Error(fmt::format("hwloc_topology_load failed: {}", std::strerror(err)));
    }
    return topology;
}

Locality locality_of(hwloc_topology_t topology, hwloc_obj_t io, const std::vector<NumaNode>& numa_nodes)
{
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topology);
    Locality out;
    for (hwloc_obj_t p = io->parent; p != nullptr; p = p->parent) {
        if (p->cpuset == nullptr) {
            continue; // still inside the I/O tree
        }
        CpuSet cpus = to_cpu_set(p->cpuset).intersect(to_cpu_set(allowed));
        if (!cpus.empty()) {
            out.cpus = std::move(cpus);
            break;
        }
    }
    for (const auto& node : numa_nodes) {
        if (node.has_cpus() && node.cpus.intersects(out.cpus)) {
            out.numa.push_back(node.os_index);
        }
    }
    std::sort(out.numa.begin(), out.numa.end());
    out.source = out.cpus.empty() ? "unknown" : "hwloc";
    return out;
}

bool is_openfabrics(hwloc_obj_t obj)
{
    return obj->type == HWLOC_OBJ_OS_DEVICE && obj->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

// Steps from `from` up to the lowest ancestor that also holds `target`; parent pointers are walked
// by hand because hwloc_get_common_ancestor_obj() misbehaves on I/O objects.
int steps_to_common_ancestor(hwloc_obj_t from, hwloc_obj_t target)
{
    int steps = 0;
    for (hwloc_obj_t a = from; a != nullptr; a = a->parent, ++steps) {
        for (hwloc_obj_t b = target; b != nullptr; b = b->parent) {
            if (a == b) {
                return steps;
            }
        }
    }
    return 1 << 20;
}

hwloc_obj_t pci_parent(hwloc_obj_t osdev)
{
    hwloc_obj_t p = osdev->parent;
    while (p != nullptr && p->type != HWLOC_OBJ_PCI_DEVICE) {
        p = p->parent;
        if (p != nullptr && p->cpuset != nullptr) {
            return nullptr;
        }
    }
    return p;
}

PciAddress address_of(hwloc_obj_t pci)
{
    const auto& a = pci->attr->pcidev;
    return PciAddress{a.domain, a.bus, a.dev, a.func};
}

// The objects above `pci`, nearest first: bridges, the host bridge, then CPU-side objects.
std::vector<PciAncestor> ancestors_of(hwloc_obj_t pci, const CpuSet& allowed)
{
    std::vector<PciAncestor> out;
    for (hwloc_obj_t p = pci->parent; p != nullptr; p = p->parent) {
        PciAncestor a;
        a.id = p->gp_index;
        if (p->type == HWLOC_OBJ_BRIDGE && p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
            a.kind = PciAncestor::Kind::host_bridge;
            a.name = "HostBridge";
        } else if (p->type == HWLOC_OBJ_BRIDGE) {
            a.kind = PciAncestor::Kind::pci_bridge;
            const auto& up = p->attr->bridge.upstream.pci;
            a.name = PciAddress{up.domain, up.bus, up.dev, up.func}.to_string();
        } else if (p->type == HWLOC_OBJ_PCI_DEVICE) {
            a.kind = PciAncestor::Kind::pci_bridge;
            a.name = address_of(p).to_string();
        } else {
            a.kind = PciAncestor::Kind::cpu_side;
            a.name = hwloc_obj_type_string(p->type);
            a.cpus = to_cpu_set(p->cpuset).intersect(allowed);
        }
        out.push_back(std::move(a));
    }
    return out;
}

} // namespace

unsigned topology_load_timeout()
{
    const char* text = std::getenv(topology_timeout_variable);
    if (text == nullptr || *text == '\0') {
        return default_topology_timeout_s;
    }
    unsigned seconds = 0;
    const std::string_view value(text);
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || end != value.data() + value.size() || seconds < 1 || seconds > 86400) {
        throw Error(fmt::format(
            "{}={}: expected whole seconds from 1 to 86400", topology_timeout_variable, quote_input(value)));
    }
    return seconds;
}

Topology Topology::load_live(bool with_io)
{
    return Topology(load(nullptr, with_io));
}

Topology Topology::load_xml(const std::string& path, bool crash_guard)
{
    const XmlInput xml{path, read_input_file(path, "topology")};
    if (!crash_guard) {
        return Topology(load(&xml));
    }
    // hwloc 2.9 crashes on some malformed XML (objects without complete_cpuset, for one). Load it
    // once in a child so bad input gives an error, not a crash. The child reports an ordinary
    // load error as its message (exit status 3); any other end of the child is a crash.
    // The child has the deadline, and goes with this process when it is killed.
    const unsigned seconds = topology_load_timeout();
    std::vector<Child> children;
    SpawnOptions options;
    options.die_with_parent = true;
    children.push_back(spawn_function(
        [&] {
            hwloc_topology_destroy(load(&xml, true, false));
            return std::string();
        },
        options));
    const ChildOutcome outcome = wait_for_children(children, std::chrono::seconds(seconds)).front();
    if (outcome.timed_out) {
        throw Error(load_too_long(&xml, seconds));
    }
    if (outcome.exited(3) && !outcome.output.empty()) {
        throw Error(outcome.output);
    }
    if (!outcome.exited(0)) {
        throw Error(fmt::format("cannot load topology {}: hwloc crashed reading it ({}); the file is malformed: "
                                "write it again with lstopo --of xml",
            path,
            outcome.signaled() ? strsignal(WTERMSIG(outcome.status))
                               : fmt::format("exit status {}", outcome.exit_code())));
    }
    return Topology(load(&xml));
}

Topology::~Topology()
{
    if (m_topology != nullptr) {
        hwloc_topology_destroy(m_topology);
    }
}

Topology::Topology(Topology&& other) noexcept : m_topology(other.m_topology)
{
    other.m_topology = nullptr;
}

bool Topology::is_this_system() const
{
    return hwloc_topology_is_thissystem(m_topology) != 0;
}

NodeLayout Topology::layout() const
{
    hwloc_topology_t t = m_topology;
    NodeLayout out;
    hwloc_obj_t root = hwloc_get_root_obj(t);
    out.hostname = info(root, "HostName");
    if (out.hostname.empty() && is_this_system()) {
        char name[256] = {};
        if (gethostname(name, sizeof name - 1) == 0) {
            out.hostname = name;
        }
    }
    out.allowed = to_cpu_set(hwloc_topology_get_allowed_cpuset(t)).intersect(to_cpu_set(root->cpuset));

    int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    if (ncores > 0) {
        for (hwloc_obj_t core = nullptr; (core = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_CORE, core));) {
            CpuSet pus = to_cpu_set(core->cpuset).intersect(out.allowed);
            if (!pus.empty()) {
                out.cores.push_back(std::move(pus));
            }
        }
    } else {
        for (unsigned cpu : out.allowed.cpus()) {
            out.cores.push_back(CpuSet{cpu});
        }
    }

    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
        NumaNode node;
        node.os_index = n->os_index;
        node.cpus = to_cpu_set(n->cpuset).intersect(out.allowed);
        node.memory = n->attr->numanode.local_memory;
        node.gpu_memory = n->subtype != nullptr && std::strcmp(n->subtype, "GPUMemory") == 0;
        out.numa_nodes.push_back(std::move(node));
    }
    std::sort(out.numa_nodes.begin(), out.numa_nodes.end(),
        [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

    for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, p));) {
        out.packages.push_back(Package{p->os_index, to_cpu_set(p->cpuset).intersect(out.allowed)});
    }

    std::vector<hwloc_obj_t> hca_objs;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
        if (is_openfabrics(o)) {
            hca_objs.push_back(o);
        }
    }

    for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_pcidev(t, p));) {
        PciFunction fn;
        fn.address = address_of(p);
        fn.vendor_id = p->attr->pcidev.vendor_id;
        fn.device_id = p->attr->pcidev.device_id;
        fn.class_id = p->attr->pcidev.class_id;
        fn.name = info(p, "PCIDevice");
        for (hwloc_obj_t child = p->io_first_child; child != nullptr; child = child->next_sibling) {
            if (child->type != HWLOC_OBJ_OS_DEVICE) {
                continue;
            }
            if (child->name != nullptr) {
                fn.os_devices.emplace_back(child->name);
            }
            if (*info(child, "GPUModel") != '\0') {
                fn.name = info(child, "GPUModel");
            }
            if (*info(child, "NVIDIAUUID") != '\0') {
                fn.uuid = info(child, "NVIDIAUUID");
            }
        }
        fn.locality = locality_of(t, p, out.numa_nodes);
        fn.ancestors = ancestors_of(p, out.allowed);
        int best = 1 << 30;
        PciAddress best_address{};
        for (hwloc_obj_t hca : hca_objs) {
            hwloc_obj_t hca_pci = pci_parent(hca);
            if (hca_pci == p) {
                continue;
            }
            int steps = steps_to_common_ancestor(p, hca);
            PciAddress address = hca_pci != nullptr ? address_of(hca_pci) : PciAddress{};
            if (steps < best || (steps == best && address < best_address)) {
                best = steps;
                best_address = address;
                fn.nearest_hca = hca->name != nullptr ? hca->name : "";
            }
        }
        out.pci.push_back(std::move(fn));
    }
    std::sort(out.pci.begin(), out.pci.end(),
        [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });

    for (hwloc_obj_t hca : hca_objs) {
        hwloc_obj_t hca_pci = pci_parent(hca);
        Hca h;
        h.name = hca->name != nullptr ? hca->name : "";
        h.address = hca_pci != nullptr ? address_of(hca_pci) : PciAddress{};
        h.locality = locality_of(t, hca, out.numa_nodes);
        out.hcas.push_back(std::move(h));
    }
    std::sort(out.hcas.begin(), out.hcas.end(), [](const Hca& a, const Hca& b) { return a.address < b.address; });
    return out;
}

const char* to_string(PciLink link)
{
    switch (link) {
    case PciLink::self:
        return "X";
    case PciLink::pix:
        return "PIX";
    case PciLink::pxb:
        return "PXB";
    case PciLink::phb:
        return "PHB";
    case PciLink::node:
        return "NODE";
    case PciLink::sys:
        return "SYS";
    case PciLink::unknown:
        break;
    }
    return "?";
}

PciLink pci_link(const NodeLayout& layout, const PciFunction& a, const PciFunction& b)
{
    if (a.address == b.address) {
        return PciLink::self;
    }
    if (a.ancestors.empty() || b.ancestors.empty()) {
        return PciLink::unknown;
    }
    for (std::size_t i = 0; i < a.ancestors.size(); ++i) {
        for (std::size_t j = 0; j < b.ancestors.size(); ++j) {
            if (a.ancestors[i].id != b.ancestors[j].id) {
                continue;
            }
            const PciAncestor& common = a.ancestors[i];
            switch (common.kind) {
            case PciAncestor::Kind::pci_bridge:
                // i and j bridges lie below the common one on each side.
                return i <= 1 && j <= 1 ? PciLink::pix : PciLink::pxb;
            case PciAncestor::Kind::host_bridge:
                return PciLink::phb;
            case PciAncestor::Kind::cpu_side:
                break;
            }
            const auto& na = a.locality.numa;
            const auto& nb = b.locality.numa;
            if (!na.empty() && !nb.empty()) {
                const bool shared = std::any_of(
                    na.begin(), na.end(), [&](unsigned n) { return std::find(nb.begin(), nb.end(), n) != nb.end(); });
                return shared ? PciLink::node : PciLink::sys;
            }
            return layout.numa_of(common.cpus).size() <= 1 ? PciLink::node : PciLink::sys;
        }
    }
    return PciLink::unknown;
}

} // namespace base
