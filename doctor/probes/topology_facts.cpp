#include "base/gpu_inventory.hpp"
#include "base/topology.hpp"
#include "doctor/probes/table.hpp"

namespace doctor::probes {

namespace {

// The objects above a GPU up to the first CPU-side one, nearest first: "0000:f0:1f.0",
// "HostBridge", "Package". Lets a snapshot show why a pair got its link class.
std::vector<std::string> pci_path(const base::PciFunction* fn)
{
    std::vector<std::string> out;
    if (fn == nullptr) {
        return out;
    }
    for (const auto& a : fn->ancestors) {
        out.push_back(a.name);
        if (a.kind == base::PciAncestor::Kind::cpu_side) {
            break;
        }
    }
    return out;
}

// The nvidia-smi topo -m class of every GPU pair, from the hwloc PCI tree.
std::vector<facts::TopologyLink> gpu_links(const base::NodeLayout& layout, const std::vector<base::Gpu>& gpus)
{
    std::vector<facts::TopologyLink> out;
    for (std::size_t a = 0; a < gpus.size(); ++a) {
        for (std::size_t b = a + 1; b < gpus.size(); ++b) {
            const base::PciFunction* fa = layout.find_pci(gpus[a].bus_id);
            const base::PciFunction* fb = layout.find_pci(gpus[b].bus_id);
            base::PciLink link =
                fa != nullptr && fb != nullptr ? base::pci_link(layout, *fa, *fb) : base::PciLink::unknown;
            out.push_back({gpus[a].bus_id.to_string(), gpus[b].bus_id.to_string(), base::to_string(link)});
        }
    }
    return out;
}

facts::TopologyFacts topology_facts(const base::NodeLayout& layout, const std::string& topology_file)
{
    facts::TopologyFacts out;
    out.source = topology_file.empty() ? "live" : topology_file;
    out.hostname = layout.hostname;
    out.allowed_cpus = layout.allowed.to_list();
    out.cores = static_cast<unsigned>(layout.cores.size());
    out.numa_nodes.emplace();
    for (const auto& n : layout.numa_nodes) {
        out.numa_nodes->push_back({n.os_index, n.cpus.to_list(), n.memory, n.gpu_memory});
    }
    const auto gpus = base::gpus_from_topology(layout);
    for (const auto& g : gpus) {
        facts::TopologyGpu gpu;
        gpu.index = g.physical_index;
        gpu.bus_id = g.bus_id.to_string();
        gpu.name = g.name;
        gpu.cpus = g.locality.cpus.to_list();
        gpu.numa = g.locality.numa;
        if (!g.hca.empty()) {
            gpu.hca = g.hca;
        }
        gpu.pci_path = pci_path(layout.find_pci(g.bus_id));
        out.gpus.push_back(std::move(gpu));
    }
    out.links = gpu_links(layout, gpus);
    out.hcas.emplace();
    for (const auto& h : layout.hcas) {
        out.hcas->push_back({h.name, h.address.to_string(), h.locality.cpus.to_list(), h.locality.numa});
    }
    return out;
}

} // namespace

// The node as hwloc sees it: NUMA nodes, each NVIDIA GPU's PCI locality, path up the PCI tree
// and nearest HCA, the link class of every GPU pair, the HCAs. Live (with PCI devices) or from --topology.
Collector topology_collector()
{
    // No crash guard for a --topology file: gpudoctor has loaded it under the guard already, and
    // this collector runs in a child process of its own anyway.
    return {"topology", [](const CollectContext& ctx) {
                base::Topology topology = ctx.topology_file.empty()
                    ? base::Topology::load_live(true)
                    : base::Topology::load_xml(ctx.topology_file, false);
                return facts::write(topology_facts(topology.layout(), ctx.topology_file));
            }};
}

} // namespace doctor::probes
