#include "doctor/checks/checks.hpp"
#include "probes/gpu_inventory.hpp"
#include "probes/topology.hpp"

namespace doctor::checks {

// The node as hwloc sees it: NUMA nodes, each NVIDIA GPU's PCI locality and nearest HCA, the
// HCAs. Live (with PCI devices) or from --topology.
Collector topology_collector()
{
    return {"topology", [](const CollectContext& ctx) {
                probes::Topology topology = ctx.topology_file.empty() ? probes::Topology::load_live(true)
                                                                      : probes::Topology::load_xml(ctx.topology_file);
                const probes::NodeLayout layout = topology.layout();
                nlohmann::json out;
                out["source"] = ctx.topology_file.empty() ? "live" : ctx.topology_file;
                out["hostname"] = layout.hostname;
                out["allowed_cpus"] = layout.allowed.to_list();
                out["cores"] = layout.cores.size();
                nlohmann::json numa = nlohmann::json::array();
                for (const auto& n : layout.numa_nodes) {
                    numa.push_back({{"os_index", n.os_index},
                                    {"cpus", n.cpus.to_list()},
                                    {"memory", n.memory},
                                    {"gpu_memory", n.gpu_memory}});
                }
                out["numa_nodes"] = numa;
                nlohmann::json gpus = nlohmann::json::array();
                for (const auto& g : probes::gpus_from_topology(layout)) {
                    gpus.push_back({{"index", g.physical_index},
                                    {"bus_id", g.bus_id.to_string()},
                                    {"name", g.name},
                                    {"cpus", g.locality.cpus.to_list()},
                                    {"numa", g.locality.numa},
                                    {"hca", g.hca.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.hca)}});
                }
                out["gpus"] = gpus;
                nlohmann::json hcas = nlohmann::json::array();
                for (const auto& h : layout.hcas) {
                    hcas.push_back({{"name", h.name},
                                    {"bus_id", h.address.to_string()},
                                    {"cpus", h.locality.cpus.to_list()},
                                    {"numa", h.locality.numa}});
                }
                out["hcas"] = hcas;
                return out;
            }};
}

} // namespace doctor::checks
