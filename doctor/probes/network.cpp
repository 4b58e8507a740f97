#include "base/error.hpp"
#include "base/sysroot.hpp"
#include "base/text.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <sstream>

namespace doctor::probes {

namespace {

// NCCL's own GPUDirect RDMA test (src/transport/net_ib/gdr.cc): any of these files.
constexpr const char* peermem_files[] = {
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
};

std::vector<std::string> entries(const std::filesystem::path& dir)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<facts::IbDevice> infiniband_facts(const base::Sysroot& root)
{
    std::vector<facts::IbDevice> devices;
    for (const auto& dev : entries(root.path("/sys/class/infiniband"))) {
        const std::string base = "/sys/class/infiniband/" + dev;
        std::vector<std::string> port_names = entries(root.path(base + "/ports"));
        std::sort(port_names.begin(), port_names.end(), [](const std::string& a, const std::string& b) {
            return std::strtol(a.c_str(), nullptr, 10) < std::strtol(b.c_str(), nullptr, 10);
        });
        facts::IbDevice device;
        device.name = dev;
        for (const auto& port : port_names) {
            if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
                continue;
            }
            const std::string p = fmt::format("{}/ports/{}", base, port);
            device.ports.push_back(
                {static_cast<unsigned>(std::strtoul(port.c_str(), nullptr, 10)), root.read_line(p + "/state"),
                    root.read_line(p + "/phys_state"), root.read_line(p + "/rate"), root.read_line(p + "/link_layer")});
        }
        device.netdevs = entries(root.path(base + "/device/net"));
        devices.push_back(std::move(device));
    }
    return devices;
}

facts::Peermem peermem_facts(const base::Sysroot& root)
{
    facts::Peermem out;
    for (const char* file : peermem_files) {
        if (root.exists(file)) {
            out.files.push_back({file, root.read_line(file)});
        }
    }
    if (auto modules = root.read("/proc/modules")) {
        out.modules.emplace();
        std::istringstream in(*modules);
        std::string line;
        while (std::getline(in, line)) {
            const std::string name = line.substr(0, line.find(' '));
            if (name == "nvidia_peermem" || name == "nv_peer_mem") {
                out.modules->push_back(name);
            }
        }
    }
    return out;
}

// "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"; "" when unreadable.
std::string state_word(const std::optional<std::string>& v)
{
    if (!v) {
        return "";
    }
    std::string s = *v;
    if (auto colon = s.find(':'); colon != std::string::npos) {
        s.erase(0, colon + 1);
    }
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t\r\n") + 1);
    return s;
}

// "200 Gb/sec (4X HDR)" -> 200; nullopt for anything else.
std::optional<double> rate_gbps(const std::optional<std::string>& v)
{
    if (!v) {
        return std::nullopt;
    }
    const char* begin = v->c_str();
    char* end = nullptr;
    const double rate = std::strtod(begin, &end);
    if (end == begin || v->find("Gb/sec", static_cast<std::size_t>(end - begin)) == std::string::npos || rate < 0) {
        return std::nullopt;
    }
    return rate;
}

bool port_up(const facts::IbPort& port)
{
    return base::upper_case(state_word(port.state)) == "ACTIVE" &&
        base::upper_case(state_word(port.phys_state)) == "LINKUP";
}

std::string link_layer(const facts::IbPort& port)
{
    return port.link_layer.value_or("link layer unknown");
}

void judge_ports(const std::vector<facts::IbDevice>& devices, const Policy& policy, Findings& out)
{
    const bool any_up = std::any_of(devices.begin(), devices.end(),
        [](const facts::IbDevice& d) { return std::any_of(d.ports.begin(), d.ports.end(), port_up); });
    for (const auto& d : devices) {
        if (d.ports.empty()) {
            out.add("network.port_unknown", d.name,
                fmt::format("{}: no ports under /sys/class/infiniband/{}/ports", d.name, d.name), facts::write(d));
        }
        for (const auto& port : d.ports) {
            const std::string who = fmt::format("{} port {}", d.name, port.port);
            const std::string state = state_word(port.state);
            const std::string phys = state_word(port.phys_state);
            nlohmann::json seen = facts::write(port);
            seen["device"] = d.name;
            if (state.empty()) {
                out.add("network.port_unknown", who, "state not readable", seen);
                continue;
            }
            if (!port_up(port)) {
                out.add(any_up ? Severity::warn : Severity::fail, "network.port_down", who,
                    fmt::format("{} (phys_state {}), {}{}", state, phys.empty() ? std::string("unknown") : phys,
                        link_layer(port),
                        any_up ? ": NCCL uses the other ports, with less bandwidth"
                               : ": no port of this node is up, so NCCL falls back to TCP sockets between "
                                 "nodes"),
                    seen);
                continue;
            }
            const auto rate = rate_gbps(port.rate);
            if (!rate) {
                out.add("network.rate_unknown", who,
                    fmt::format("up but its rate is unreadable: {}",
                        port.rate ? base::quote_input(*port.rate) : std::string("no rate file")),
                    seen);
                continue;
            }
            seen["rate_gbps"] = *rate;
            if (*rate < policy.ib_min_rate_gbps) {
                out.add("network.rate_low", who,
                    fmt::format("{1:g} Gb/s ({0}), below {2:g} Gb/s (policy "
                                "network.ib_min_rate_gbps)",
                        link_layer(port), *rate, policy.ib_min_rate_gbps),
                    seen);
                continue;
            }
            out.add("network.port_ok", who, fmt::format("ACTIVE at {}, {}", *port.rate, link_layer(port)), seen);
        }
    }
}

void judge_peermem(const facts::Peermem& peermem, std::size_t gpus, Findings& out)
{
    std::vector<std::string> seen;
    for (const auto& f : peermem.files) {
        seen.push_back(f.file);
    }
    for (const auto& m : peermem.modules.value_or(std::vector<std::string>())) {
        seen.push_back(fmt::format("module {}", m));
    }
    if (!seen.empty()) {
        out.add("network.gdr_ok", "host", fmt::format("GPUDirect RDMA module present ({})", fmt::join(seen, ", ")),
            facts::write(peermem));
    } else if (gpus > 0) {
        out.add("network.no_peermem", "host",
            "InfiniBand/RoCE present but no GPUDirect RDMA module (nvidia_peermem): inter-node GPU traffic "
            "goes through host memory, about half the bandwidth",
            facts::write(peermem));
    }
}

std::string numa_text(const std::vector<unsigned>& numa)
{
    return numa.empty() ? std::string("unknown") : fmt::format("{}", fmt::join(numa, ","));
}

// The topology's nearest HCA is the closest in the PCI tree, even across sockets; "on its side of
// the node" means the HCA shares a NUMA node with the GPU.
void judge_nearest_nic(const facts::TopologyFacts& topology, bool have_rdma, Findings& out)
{
    if (topology.gpus.empty()) {
        return;
    }
    if (!topology.hcas || topology.hcas->empty()) {
        if (have_rdma) {
            out.add("network.gpu_nic_unknown", "host",
                "NIC nearest each GPU not known: the topology shows no HCA (hwloc without PCI devices, or "
                "a --topology file without them)");
        }
        return;
    }
    const std::vector<unsigned> unknown;
    std::vector<std::string> pairs;
    nlohmann::json mapping = nlohmann::json::object();
    for (const auto& g : topology.gpus) {
        const std::string who = fmt::format("gpu {} ({})", g.index, g.bus_id);
        const auto& gpu_numa = g.numa ? *g.numa : unknown;
        const std::string hca_name = g.hca.value_or("");
        std::vector<unsigned> hca_numa;
        for (const auto& h : *topology.hcas) {
            if (h.name == hca_name && h.numa) {
                hca_numa = *h.numa;
            }
        }
        const bool same_side = gpu_numa.empty() || hca_numa.empty() ||
            std::any_of(gpu_numa.begin(), gpu_numa.end(),
                [&](unsigned n) { return std::find(hca_numa.begin(), hca_numa.end(), n) != hca_numa.end(); });
        if (!hca_name.empty() && same_side) {
            pairs.push_back(fmt::format("gpu {} -> {}", g.index, hca_name));
            mapping[std::to_string(g.index)] = hca_name;
            continue;
        }
        const nlohmann::json seen = {{"gpu", facts::write(g)},
            {"nearest_hca", hca_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(hca_name)},
            {"hca_numa", hca_numa}};
        out.add("network.gpu_no_near_nic", who,
            hca_name.empty() ? fmt::format("no InfiniBand/RoCE NIC on its side of the node (NUMA node {}): its "
                                           "inter-node traffic crosses the CPU interconnect",
                                   numa_text(gpu_numa))
                             : fmt::format("no InfiniBand/RoCE NIC on its side of the node (NUMA node {}); the "
                                           "nearest, {}, is on NUMA node {}: its inter-node traffic crosses the CPU "
                                           "interconnect",
                                   numa_text(gpu_numa), hca_name, numa_text(hca_numa)),
            seen);
    }
    if (!pairs.empty()) {
        out.add("network.gpu_nic", "host", fmt::format("nearest NIC: {}", fmt::join(pairs, ", ")), mapping);
    }
}

} // namespace

// InfiniBand/RoCE ports and the GPUDirect RDMA module, from sysfs and /proc/modules.
Collector network_collector()
{
    return {"network", [](const CollectContext& ctx) {
                base::Sysroot root(ctx.sysroot);
                return facts::write(facts::NetworkFacts{infiniband_facts(root), peermem_facts(root)});
            }};
}

Probe network_probe()
{
    Probe p;
    p.name = "network";
    p.summary = "InfiniBand/RoCE ports (state, rate), GPUDirect RDMA module, NIC nearest each GPU";
    p.collectors = {"network", "topology"};
    p.codes = {
        {"network.no_rdma", Severity::pass, "no InfiniBand/RoCE devices",
            "/sys/class/infiniband is empty or absent. A single-node job needs none; jobs across nodes use TCP "
            "sockets, an order of magnitude slower.",
            ""},
        {"network.port_ok", Severity::pass, "an InfiniBand/RoCE port is up",
            "state ACTIVE, phys_state LinkUp, rate at least the "
            "policy's network.ib_min_rate_gbps.",
            ""},
        {"network.port_down", Severity::fail, "an InfiniBand/RoCE port is not up",
            "The port's state is not ACTIVE or its phys_state not LinkUp (sysfs). A failure when no port of the node "
            "is up (NCCL falls back to TCP sockets between nodes); a warning when other ports are up (NCCL uses "
            "those, with less bandwidth; the port may also be deliberately unused). INIT with LinkUp means no subnet "
            "manager has configured the port; Polling means no link (cable, switch port).",
            "check the cable and the switch port (ibstat, ibv_devinfo); an InfiniBand port stuck in INIT needs a "
            "subnet manager (opensm)",
            Severity::warn},
        {"network.port_unknown", Severity::skip, "an InfiniBand/RoCE port not checked",
            "The port's state file could not be read, or the device has no ports in sysfs.", ""},
        {"network.rate_low", Severity::warn, "an InfiniBand/RoCE port is slower than the policy",
            "The port is up at a rate below network.ib_min_rate_gbps: a cable or switch port that trained at a lower "
            "speed or width, or an older HCA. Applies to RoCE ports too.",
            "check the cable and switch port for a link trained at a lower speed or width "
            "(ibstat, mlxlink); or lower network.ib_min_rate_gbps for this cluster"},
        {"network.rate_unknown", Severity::skip, "an InfiniBand/RoCE port's rate not checked",
            "The port is up but its rate file does not read like '200 Gb/sec (4X HDR)'.", ""},
        {"network.gdr_ok", Severity::pass, "GPUDirect RDMA module present",
            "One of NCCL's own tests for GPUDirect RDMA holds: /sys/kernel/mm/memory_peers/nv_mem*/version, "
            "/sys/module/nvidia_peermem/version, or nvidia_peermem in /proc/modules.",
            ""},
        {"network.no_peermem", Severity::warn, "no GPUDirect RDMA module",
            "The node has InfiniBand/RoCE and GPUs but neither nvidia_peermem nor nv_peer_mem is loaded: NCCL logs "
            "'GPU Direct RDMA Disabled' and inter-node GPU traffic is staged through host memory, about half the "
            "bandwidth. NCCL 2.19+ can use DMA-BUF instead with the open GPU kernel modules on Linux 5.12+, which "
            "this check cannot see.",
            "modprobe nvidia_peermem (ships with the NVIDIA driver; MOFED must be installed first), and "
            "load it at boot; NCCL 2.19+ with the open GPU kernel modules on Linux 5.12+ can use DMA-BUF "
            "instead"},
        {"network.gpu_nic", Severity::pass, "NIC nearest each GPU",
            "The InfiniBand/RoCE HCA on the same side of the node as each GPU (hwloc), the one NCCL should use for "
            "it.",
            ""},
        {"network.gpu_no_near_nic", Severity::warn, "a GPU has no NIC on its side of the node",
            "The node has HCAs, but none shares this GPU's CPU socket/NUMA node: its inter-node traffic crosses the "
            "CPU interconnect (SYS in nvidia-smi topo -m), and GPUDirect RDMA across the interconnect is slow or off.",
            "put a NIC on each CPU socket that has GPUs, or place ranks so that the GPUs near a NIC "
            "do the inter-node traffic"},
        {"network.gpu_nic_unknown", Severity::skip, "NIC nearest each GPU not known",
            "The node has InfiniBand/RoCE devices but the topology shows no HCA, so GPU-NIC locality is unknown.", ""},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const facts::NetworkFacts& network = *facts.network().get();
        const facts::TopologyFacts& topology = *facts.topology().get();
        const bool have_rdma = !network.infiniband.empty();
        if (!have_rdma) {
            out.add("network.no_rdma", "host",
                "no InfiniBand/RoCE devices (a single-node job needs none; across nodes NCCL uses TCP "
                "sockets)");
        } else {
            judge_ports(network.infiniband, policy, out);
            judge_peermem(network.peermem, topology.gpus.size(), out);
        }
        judge_nearest_nic(topology, have_rdma, out);
    };
    return p;
}

} // namespace doctor::probes
