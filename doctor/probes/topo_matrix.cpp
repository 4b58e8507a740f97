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

// The topology facts' GPU objects by normalised bus id.
std::map<std::string, const nlohmann::json*> topology_gpus(const nlohmann::json* topology)
{
    std::map<std::string, const nlohmann::json*> out;
    if (topology == nullptr || !topology->contains("gpus") || !(*topology)["gpus"].is_array()) {
        return out;
    }
    for (const auto& g : (*topology)["gpus"]) {
        out[normal_bus_id(g.value("bus_id", std::string()))] = &g;
    }
    return out;
}

void place(TopoGpu& gpu, const std::map<std::string, const nlohmann::json*>& located)
{
    auto it = located.find(gpu.bus_id);
    if (it == located.end()) {
        return;
    }
    const nlohmann::json& g = *it->second;
    gpu.cpus = g.value("cpus", std::string());
    if (g.contains("numa") && g["numa"].is_array()) {
        gpu.numa = g["numa"].get<std::vector<unsigned>>();
    }
    if (g.contains("hca") && g["hca"].is_string()) {
        gpu.nic = g["hca"].get<std::string>();
    }
    if (gpu.name.empty()) {
        gpu.name = g.value("name", std::string());
    }
}

// Lists the GPUs of `gpus` (nvml or topology facts) in `m` and sets up the matrix with X on the
// diagonal; returns each bus id's position.
std::map<std::string, std::size_t> start_matrix(const nlohmann::json& gpus, const char* source, TopoMatrix& m)
{
    m.source = source;
    std::map<std::string, std::size_t> position;
    if (gpus.is_array()) {
        for (const auto& g : gpus) {
            TopoGpu gpu;
            gpu.index = g.value("index", 0U);
            gpu.bus_id = normal_bus_id(g.value("bus_id", std::string()));
            gpu.name = g.value("name", std::string());
            position[gpu.bus_id] = m.gpus.size();
            m.gpus.push_back(std::move(gpu));
        }
    }
    const std::size_t n = m.gpus.size();
    m.link.assign(n, std::vector<std::string>(n, "?"));
    for (std::size_t i = 0; i < n; ++i) {
        m.link[i][i] = "X";
    }
    return position;
}

void from_nvml(const nlohmann::json& nvml, TopoMatrix& m)
{
    auto position = start_matrix(nvml["gpus"], "nvml", m);
    const std::size_t n = m.gpus.size();
    std::map<unsigned, std::size_t> by_index;
    for (std::size_t i = 0; i < n; ++i) {
        by_index[m.gpus[i].index] = i;
    }
    if (nvml.contains("pairs") && nvml["pairs"].is_array()) {
        for (const auto& p : nvml["pairs"]) {
            auto a = by_index.find(p.value("a", 0U));
            auto b = by_index.find(p.value("b", 0U));
            if (a == by_index.end() || b == by_index.end() || !p.contains("ancestor")) {
                continue;
            }
            const std::string text = link_from_ancestor(p["ancestor"].get<int>());
            m.link[a->second][b->second] = text;
            m.link[b->second][a->second] = text;
        }
    }
    // NVLinks: to a peer GPU directly, or (NVSwitch systems) to a switch every GPU reaches.
    std::vector<std::map<std::string, unsigned>> remote(n);
    bool any_link = false;
    for (const auto& g : nvml["gpus"]) {
        auto at = position.find(normal_bus_id(g.value("bus_id", std::string())));
        if (at == position.end() || !g.contains("nvlinks") || !g["nvlinks"].is_array()) {
            continue;
        }
        for (const auto& r : g["nvlinks"]) {
            if (r.is_string()) {
                ++remote[at->second][normal_bus_id(r.get<std::string>())];
                any_link = true;
            }
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

void from_topology(const nlohmann::json& topology, TopoMatrix& m)
{
    auto position = start_matrix(topology.contains("gpus") ? topology["gpus"] : nlohmann::json(), "hwloc", m);
    const std::size_t n = m.gpus.size();
    if (!topology.contains("links") || !topology["links"].is_array()) {
        if (n > 1) {
            m.notes.push_back("the topology facts have no GPU links (a snapshot from an older gpudoctor?)");
        }
        return;
    }
    for (const auto& l : topology["links"]) {
        auto a = position.find(normal_bus_id(l.value("a", std::string())));
        auto b = position.find(normal_bus_id(l.value("b", std::string())));
        if (a == position.end() || b == position.end()) {
            continue;
        }
        const std::string text = l.value("link", std::string("?"));
        m.link[a->second][b->second] = text;
        m.link[b->second][a->second] = text;
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
    const nlohmann::json* nvml = collector_facts(facts, "nvml");
    const nlohmann::json* topology = collector_facts(facts, "topology");
    const bool topology_ok = topology != nullptr && collector_error(facts, "topology").empty();
    const std::string topology_source = topology_ok ? topology->value("source", std::string("live")) : "";
    const bool topology_file = topology_ok && topology_source != "live";
    const bool nvml_ok = nvml != nullptr && collector_error(facts, "nvml").empty() &&
        !probes::gpus_unavailable(facts).has_value() && nvml->contains("gpus") && (*nvml)["gpus"].is_array();
    if (nvml_ok && !topology_file) {
        from_nvml(*nvml, m);
        if (!topology_ok) {
            m.notes.push_back(fmt::format("CPU and NUMA affinity unknown: the hwloc topology was not read ({})",
                topology == nullptr ? "not collected" : collector_error(facts, "topology")));
        }
    } else if (topology_ok) {
        from_topology(*topology, m);
        if (topology_file) {
            m.notes.push_back(fmt::format("links from the hwloc PCI tree of {} (NVML is not asked about a file's "
                                          "GPUs, so NVLinks are not shown)",
                topology_source));
        } else if (auto why = probes::gpus_unavailable(facts); why && m.gpus.empty()) {
            m.notes.push_back(fmt::format("{}; the hwloc PCI tree has no NVIDIA GPU either", *why));
        } else if (why) {
            m.notes.push_back(fmt::format("links from the hwloc PCI tree, NVLinks not shown: {}", *why));
        }
    } else {
        if (auto why = probes::gpus_unavailable(facts)) {
            m.notes.push_back(*why);
        }
        if (topology != nullptr && !topology_ok) {
            m.notes.push_back(
                fmt::format("the hwloc topology could not be read: {}", collector_error(facts, "topology")));
        }
        return m;
    }
    const auto located = topology_gpus(topology_ok ? topology : nullptr);
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
    const std::string topology_error = collector_error(facts, "topology");
    if (m.source.empty() && !topology_error.empty()) {
        fmt::print(stderr, "gpudoctor topo: cannot read the topology: {}\n", topology_error);
        return ctx.topology_file.empty() ? 3 : 2;
    }
    if (m.gpus.empty() && ctx.topology_file.empty()) {
        // This machine's GPUs need NVML (or an NVIDIA device in hwloc's PCI tree): without either,
        // topo could not do its work, as monitor cannot.
        const auto* nvml = collector_facts(facts, "nvml");
        std::string why = collector_error(facts, "nvml");
        if (why.empty() && nvml != nullptr && nvml->is_object() && nvml->value("nvml_loaded", true) == false) {
            why = nvml->value("nvml_error", std::string("not loaded"));
        }
        if (!why.empty()) {
            fmt::print(stderr, "gpudoctor topo: no GPU found, and NVML is unavailable: {}\n", why);
            return 3;
        }
    }
    return 0;
}

} // namespace doctor::probes
