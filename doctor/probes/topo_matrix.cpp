#include "doctor/probes/topo_matrix.hpp"

#include "base/pci_address.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/probes/gpu_facts.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <iostream>
#include <map>

namespace doctor::probes {

namespace {

const std::vector<std::pair<const char*, const char*>> legend = {
    {"X", "Self"},
    {"SYS", "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"},
    {"NODE", "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"},
    {"PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"},
    {"PXB", "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)"},
    {"PIX", "Connection traversing at most a single PCIe bridge"},
    {"NV#", "Connection traversing a bonded set of # NVLinks"},
};

std::string normal_bus_id(const std::string& text)
{
    auto address = base::PciAddress::parse(text);
    return address ? address->to_string() : text;
}

std::string numa_text(const std::vector<unsigned>& numa)
{
    return numa.empty() ? "N/A" : fmt::format("{}", fmt::join(numa, ","));
}

// The topology facts' GPUs by normalised bus id.
std::map<std::string, const facts::TopologyGpu*> topology_gpus(const facts::TopologyFacts* topology)
{
    std::map<std::string, const facts::TopologyGpu*> out;
    if (topology == nullptr) {
        return out;
    }
    for (const auto& g : topology->gpus) {
        out[normal_bus_id(g.bus_id)] = &g;
    }
    return out;
}

void place(TopoGpu& gpu, const std::map<std::string, const facts::TopologyGpu*>& located)
{
    auto it = located.find(gpu.bus_id);
    if (it == located.end()) {
        return;
    }
    const facts::TopologyGpu& g = *it->second;
    gpu.cpus = g.cpus.value_or("");
    gpu.numa = g.numa.value_or(std::vector<unsigned>());
    gpu.nic = g.hca.value_or("");
    if (gpu.name.empty()) {
        gpu.name = g.name.value_or("");
    }
}

// Adds a GPU to `m`; returns its position.
std::size_t add_gpu(TopoMatrix& m, unsigned index, const std::string& bus_id, const std::optional<std::string>& name)
{
    m.gpus.push_back({index, normal_bus_id(bus_id), name.value_or(""), "", {}, ""});
    return m.gpus.size() - 1;
}

// Sets up the matrix of the GPUs of `m` with X on the diagonal and "?" elsewhere; returns each bus
// id's position.
std::map<std::string, std::size_t> start_matrix(TopoMatrix& m)
{
    std::map<std::string, std::size_t> position;
    const std::size_t n = m.gpus.size();
    for (std::size_t i = 0; i < n; ++i) {
        position[m.gpus[i].bus_id] = i;
    }
    m.link.assign(n, std::vector<std::string>(n, "?"));
    for (std::size_t i = 0; i < n; ++i) {
        m.link[i][i] = "X";
    }
    return position;
}

void from_nvml(const facts::NvmlFacts& nvml, TopoMatrix& m)
{
    m.source = "nvml";
    const std::vector<facts::NvmlGpu> none;
    const auto& gpus = nvml.gpus ? *nvml.gpus : none;
    for (const auto& g : gpus) {
        add_gpu(m, g.index, g.bus_id, g.name);
    }
    auto position = start_matrix(m);
    const std::size_t n = m.gpus.size();
    std::map<unsigned, std::size_t> by_index;
    for (std::size_t i = 0; i < n; ++i) {
        by_index[m.gpus[i].index] = i;
    }
    for (const auto& p : nvml.pairs.value_or(std::vector<facts::NvmlPair>())) {
        auto a = by_index.find(p.a);
        auto b = by_index.find(p.b);
        if (a == by_index.end() || b == by_index.end() || !p.ancestor) {
            continue;
        }
        const std::string text = link_from_ancestor(*p.ancestor);
        m.link[a->second][b->second] = text;
        m.link[b->second][a->second] = text;
    }
    // NVLinks: to a peer GPU directly, or (NVSwitch systems) to a switch every GPU reaches.
    std::vector<std::map<std::string, unsigned>> remote(n);
    bool any_link = false;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        for (const auto& r : gpus[i].nvlinks.value_or(std::vector<std::string>())) {
            ++remote[i][normal_bus_id(r)];
            any_link = true;
        }
    }
    if (!any_link) {
        return;
    }
    // Each GPU's links to NVSwitches (remote ends that are no GPU), counted once per GPU, not per pair.
    std::vector<unsigned> switch_links(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        for (const auto& [bus, links] : remote[i]) {
            if (position.count(bus) == 0) {
                switch_links[i] += links;
            }
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
            if (i == j) {
                continue;
            }
            unsigned direct = 0;
            auto it = remote[i].find(m.gpus[j].bus_id);
            if (it != remote[i].end()) {
                direct = it->second;
            }
            const unsigned through_switch = std::min(switch_links[i], switch_links[j]);
            const unsigned links = std::max(direct, through_switch);
            if (links > 0) {
                m.link[i][j] = fmt::format("NV{}", links);
            }
        }
    }
}

void from_topology(const facts::TopologyFacts& topology, TopoMatrix& m)
{
    m.source = "hwloc";
    for (const auto& g : topology.gpus) {
        add_gpu(m, g.index, g.bus_id, g.name);
    }
    auto position = start_matrix(m);
    const std::size_t n = m.gpus.size();
    if (!topology.links) {
        if (n > 1) {
            m.notes.push_back("the topology facts have no GPU links (a snapshot from an older gpudoctor?)");
        }
        return;
    }
    for (const auto& l : *topology.links) {
        auto a = position.find(normal_bus_id(l.a));
        auto b = position.find(normal_bus_id(l.b));
        if (a == position.end() || b == position.end()) {
            continue;
        }
        m.link[a->second][b->second] = l.link;
        m.link[b->second][a->second] = l.link;
    }
}

} // namespace

unsigned TopoMatrix::nvlinks(std::size_t i, std::size_t j) const
{
    const std::string& text = link.at(i).at(j);
    if (text.size() > 2 && text.compare(0, 2, "NV") == 0) {
        return static_cast<unsigned>(std::stoul(text.substr(2)));
    }
    return 0;
}

std::string link_from_ancestor(int level)
{
    switch (level) {
    case 0: // NVML_TOPOLOGY_INTERNAL: two GPUs on one board, behind its own switch
    case 10:
        return "PIX";
    case 20:
        return "PXB";
    case 30:
        return "PHB";
    case 40:
        return "NODE";
    case 50:
        return "SYS";
    default:
        return "?";
    }
}

TopoMatrix topo_matrix(const Facts& facts)
{
    TopoMatrix m;
    const facts::NvmlFacts* nvml = facts.nvml().get();
    const facts::TopologyFacts* topology = facts.topology().get();
    const bool topology_file = topology != nullptr && !topology->live();
    const bool nvml_ok = nvml != nullptr && !probes::gpus_unavailable(facts).has_value() && nvml->gpus;
    if (nvml_ok && !topology_file) {
        from_nvml(*nvml, m);
        if (topology == nullptr) {
            m.notes.push_back(fmt::format("CPU and NUMA affinity unknown: the hwloc topology was not read ({})",
                facts.has("topology") ? facts.error("topology") : "not collected"));
        }
    } else if (topology != nullptr) {
        from_topology(*topology, m);
        if (topology_file) {
            m.notes.push_back(fmt::format("links from the hwloc PCI tree of {} (NVML is not asked about a file's "
                                          "GPUs, so NVLinks are not shown)",
                topology->source));
        } else if (auto why = probes::gpus_unavailable(facts); why && m.gpus.empty()) {
            m.notes.push_back(fmt::format("{}; the hwloc PCI tree has no NVIDIA GPU either", *why));
        } else if (why) {
            m.notes.push_back(fmt::format("links from the hwloc PCI tree, NVLinks not shown: {}", *why));
        }
    } else {
        if (auto why = probes::gpus_unavailable(facts)) {
            m.notes.push_back(*why);
        }
        if (facts.has("topology")) {
            m.notes.push_back(fmt::format("the hwloc topology could not be read: {}", facts.error("topology")));
        }
        return m;
    }
    const auto located = topology_gpus(topology);
    for (auto& gpu : m.gpus) {
        place(gpu, located);
    }
    return m;
}

std::string render_topo_text(const TopoMatrix& m)
{
    if (m.gpus.empty()) {
        std::string out = "No NVIDIA GPU found.\n";
        for (const auto& note : m.notes) {
            out += fmt::format("  {}\n", note);
        }
        return out;
    }
    std::string out = fmt::format("{:<8}", "");
    for (const auto& g : m.gpus) {
        out += fmt::format("{:<8}", fmt::format("GPU{}", g.index));
    }
    out += fmt::format("{:<16}{:<15}{}\n", "CPU Affinity", "NUMA Affinity", "NIC");
    for (std::size_t i = 0; i < m.gpus.size(); ++i) {
        const auto& g = m.gpus[i];
        out += fmt::format("{:<8}", fmt::format("GPU{}", g.index));
        for (std::size_t j = 0; j < m.gpus.size(); ++j) {
            out += fmt::format("{:<8}", fmt::format(" {}", m.link[i][j]));
        }
        out += fmt::format(
            "{:<16}{:<15}{}\n", g.cpus.empty() ? "N/A" : g.cpus, numa_text(g.numa), g.nic.empty() ? "N/A" : g.nic);
    }
    out += "\nLegend:\n\n";
    for (const auto& [key, text] : legend) {
        out += fmt::format("  {:<4} = {}\n", key, text);
    }
    out += fmt::format("\nSource: {}\n", m.source == "nvml" ? "NVML" : "hwloc PCI tree");
    for (std::size_t i = 0; i < m.gpus.size(); ++i) {
        out += fmt::format("  GPU{} {} {}\n", m.gpus[i].index, m.gpus[i].bus_id, m.gpus[i].name);
    }
    for (const auto& note : m.notes) {
        out += fmt::format("Note: {}\n", note);
    }
    return out;
}

nlohmann::json render_topo_json(const TopoMatrix& m)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : m.gpus) {
        gpus.push_back({{"index", g.index}, {"bus_id", g.bus_id}, {"name", g.name},
            {"cpus", g.cpus.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.cpus)}, {"numa", g.numa},
            {"nic", g.nic.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.nic)}});
    }
    nlohmann::json legend_json = nlohmann::json::object();
    for (const auto& [key, text] : legend) {
        legend_json[key] = text;
    }
    return {{"source", m.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.source)}, {"gpus", gpus},
        {"matrix", m.link}, {"legend", legend_json}, {"notes", m.notes}};
}

int run_topo(const CollectContext& ctx, bool json)
{
    std::vector<const Collector*> collectors;
    for (const auto& c : collector_table()) {
        if (c.name == "topology" || (c.name == "nvml" && ctx.topology_file.empty())) {
            collectors.push_back(&c);
        }
    }
    const Facts facts = collect(collectors, ctx);
    const TopoMatrix m = topo_matrix(facts);
    if (json) {
        std::cout << render_topo_json(m).dump(2) << '\n';
    } else {
        std::cout << render_topo_text(m);
    }
    const std::string topology_error = facts.error("topology");
    if (m.source.empty() && !topology_error.empty()) {
        fmt::print(stderr, "gpudoctor topo: cannot read the topology: {}\n", topology_error);
        return ctx.topology_file.empty() ? 3 : 2;
    }
    if (m.gpus.empty() && ctx.topology_file.empty()) {
        // This machine's GPUs need NVML (or an NVIDIA device in hwloc's PCI tree): without either,
        // topo could not do its work, as monitor cannot.
        const auto* nvml = facts.nvml().get();
        std::string why = facts.error("nvml");
        if (why.empty() && nvml != nullptr && !nvml->nvml_loaded) {
            why = nvml->nvml_error.value_or("not loaded");
        }
        if (!why.empty()) {
            fmt::print(stderr, "gpudoctor topo: no GPU found, and NVML is unavailable: {}\n", why);
            return 3;
        }
    }
    return 0;
}

} // namespace doctor::probes
