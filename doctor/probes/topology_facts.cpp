#include "base/gpu_inventory.hpp"
#include "base/topology.hpp"
#include "doctor/probes/table.hpp"

namespace doctor::probes {

namespace {

// The objects above a GPU up to the first CPU-side one, nearest first: "0000:f0:1f.0",
// "HostBridge", "Package". Lets a snapshot show why a pair got its link class.
nlohmann::json pci_path(const base::PciFunction* fn)
{
    nlohmann::json out = nlohmann::json::array();
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
nlohmann::json gpu_links(const base::NodeLayout& layout, const std::vector<base::Gpu>& gpus)
{
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t a = 0; a < gpus.size(); ++a) {
        for (std::size_t b = a + 1; b < gpus.size(); ++b) {
            const base::PciFunction* fa = layout.find_pci(gpus[a].bus_id);
            const base::PciFunction* fb = layout.find_pci(gpus[b].bus_id);
            base::PciLink link =
                fa != nullptr && fb != nullptr ? base::pci_link(layout, *fa, *fb) : base::PciLink::unknown;
            out.push_back({{"a", gpus[a].bus_id.to_string()}, {"b", gpus[b].bus_id.to_string()},
                {"link", base::to_string(link)}});
        }
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
                const base::NodeLayout layout = topology.layout();
                nlohmann::json out;
                out["source"] = ctx.topology_file.empty() ? "live" : ctx.topology_file;
                out["hostname"] = layout.hostname;
                out["allowed_cpus"] = layout.allowed.to_list();
                out["cores"] = layout.cores.size();
                nlohmann::json numa = nlohmann::json::array();
                for (const auto& n : layout.numa_nodes) {
                    numa.push_back({{"os_index", n.os_index}, {"cpus", n.cpus.to_list()}, {"memory", n.memory},
                        {"gpu_memory", n.gpu_memory}});
                }
                out["numa_nodes"] = numa;
                nlohmann::json gpus = nlohmann::json::array();
                const auto topology_gpus = base::gpus_from_topology(layout);
                for (const auto& g : topology_gpus) {
                    gpus.push_back({{"index", g.physical_index}, {"bus_id", g.bus_id.to_string()}, {"name", g.name},
                        {"cpus", g.locality.cpus.to_list()}, {"numa", g.locality.numa},
                        {"hca", g.hca.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.hca)},
                        {"pci_path", pci_path(layout.find_pci(g.bus_id))}});
                }
                out["gpus"] = gpus;
                out["links"] = gpu_links(layout, topology_gpus);
                nlohmann::json hcas = nlohmann::json::array();
                for (const auto& h : layout.hcas) {
                    hcas.push_back({{"name", h.name}, {"bus_id", h.address.to_string()},
                        {"cpus", h.locality.cpus.to_list()}, {"numa", h.locality.numa}});
                }
                out["hcas"] = hcas;
                return out;
            }};
}

} // namespace doctor::probes
