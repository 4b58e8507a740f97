#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"
#include "doctor/probes/topo_matrix.hpp"

#include <fmt/format.h>
#include <map>

namespace doctor::probes {

namespace {

std::string gpu_label(const TopoGpu& g)
{
    return fmt::format("gpu {} ({})", g.index, g.bus_id);
}

// "8 GPUs from NVML: 28 pairs NV12; NUMA 0: gpu 0-3 ..." in a few words.
std::string summary(const TopoMatrix& m)
{
    std::map<std::string, unsigned> kinds;
    for (std::size_t i = 0; i < m.gpus.size(); ++i) {
        for (std::size_t j = i + 1; j < m.gpus.size(); ++j) {
            ++kinds[m.link[i][j]];
        }
    }
    std::vector<std::string> link_parts;
    for (const auto& [kind, count] : kinds) {
        link_parts.push_back(fmt::format("{}×{}", count, kind));
    }
    std::map<std::string, std::vector<std::string>> by_numa;
    for (const auto& g : m.gpus) {
        std::string where = g.numa.empty() ? "NUMA ?" : fmt::format("NUMA {}", fmt::join(g.numa, ","));
        by_numa[where].push_back(std::to_string(g.index) + (g.nic.empty() ? "" : "/" + g.nic));
    }
    std::vector<std::string> numa_parts;
    for (const auto& [where, gpus] : by_numa) {
        numa_parts.push_back(fmt::format("{}: gpu {}", where, fmt::join(gpus, " ")));
    }
    return fmt::format("{} GPU{} from {}; {}{}", m.gpus.size(), m.gpus.size() == 1 ? "" : "s",
        m.source == "nvml" ? "NVML" : "the hwloc PCI tree",
        link_parts.empty() ? "" : fmt::format("pairs {}; ", fmt::join(link_parts, ", ")), fmt::join(numa_parts, "; "));
}

} // namespace

Probe topology_probe()
{
    Probe p;
    p.name = "topology";
    p.summary = "GPU↔GPU links (NVLink, PCIe, across sockets), each GPU's NUMA node, CPUs and nearest NIC";
    p.collectors = {"nvml", "topology"};
    p.codes = {
        {"topology.ok", Severity::pass, "the GPU topology is known and has no slow pairs",
            "Every GPU pair is linked by NVLink or within one socket's PCIe tree, and every GPU's NUMA node and CPUs "
            "are known. The message summarises the link classes (nvidia-smi topo -m legend) and where each GPU sits; "
            "'gpudoctor topo' prints the whole matrix.",
            ""},
        {"topology.gpu_pairs_across_sockets", Severity::warn, "GPU pairs talk across the CPU interconnect",
            "Some GPU pairs are SYS in the nvidia-smi topo -m legend (PCIe as well as the SMP interconnect between "
            "NUMA nodes: QPI/UPI/Infinity Fabric) and have no NVLink between them. Collective traffic such as NCCL "
            "all-reduce between them goes through the CPUs, at a fraction of NVLink or same-switch PCIe bandwidth, "
            "and P2P may be unavailable. That is how PCIe-only dual-socket nodes are built; it is a warning because "
            "jobs that span the sockets will be slower than their GPU count suggests.",
            "keep communicating ranks on one socket's GPUs (CUDA_VISIBLE_DEVICES, one job per socket), or use a node "
            "with NVLink; 'gpudoctor topo' shows which pairs are SYS"},
        {"topology.gpu_numa_unknown", Severity::warn, "a GPU's CPU locality is unknown",
            "Neither hwloc nor sysfs (numa_node, local_cpulist) says which CPUs and NUMA node are near the GPU, so "
            "gpurun cannot pin its rank near it. Common in VMs whose firmware reports no NUMA affinity for PCI "
            "devices (numa_node -1) and with topology files that lack the PCI tree.",
            "check /sys/bus/pci/devices/{bus_id}/numa_node; in a VM, ask for a NUMA-aware guest topology; otherwise "
            "bind ranks by hand (gpurun --bind=none and numactl)"},
        {"topology.single_gpu", Severity::pass, "one GPU: no GPU pairs",
            "The node has one GPU, so there is no GPU↔GPU link to judge; its NUMA node and CPUs are known.", ""},
        {"topology.link_unknown", Severity::warn, "the link between some GPU pairs is unknown",
            "NVML gave no common-ancestor level for the pair and the hwloc PCI tree did not place both GPUs "
            "(a topology file without bridges, or GPUs hwloc does not list).",
            "run 'nvidia-smi topo -m' to see the links; write the topology again with lstopo --of xml"},
    };
    p.judge = [](const Facts& facts, const Policy&, Findings& out) {
        const TopoMatrix m = topo_matrix(facts);
        if (m.gpus.empty()) {
            std::string why = gpus_unavailable(facts).value_or("no NVIDIA GPU");
            out.skip(fmt::format("not checked: {}",
                why +
                    (m.source == "hwloc" ? "; the hwloc PCI tree has no "
                                           "NVIDIA GPU either"
                                         : "")));
            return;
        }
        std::vector<std::string> across;
        std::vector<std::string> unknown;
        nlohmann::json across_pairs = nlohmann::json::array();
        for (std::size_t i = 0; i < m.gpus.size(); ++i) {
            for (std::size_t j = i + 1; j < m.gpus.size(); ++j) {
                const std::string& link = m.link[i][j];
                if (link == "SYS" && m.nvlinks(i, j) == 0) {
                    across.push_back(fmt::format("{}-{}", m.gpus[i].index, m.gpus[j].index));
                    across_pairs.push_back({{"a", m.gpus[i].bus_id}, {"b", m.gpus[j].bus_id}, {"link", link}});
                } else if (link == "?") {
                    unknown.push_back(fmt::format("{}-{}", m.gpus[i].index, m.gpus[j].index));
                }
            }
        }
        if (!across.empty()) {
            out.add("topology.gpu_pairs_across_sockets", "host",
                fmt::format("{} of {} GPU pairs are SYS (across NUMA nodes/sockets) without NVLink: {}; "
                            "all-reduce between them goes through the CPU interconnect",
                    across.size(), m.gpus.size() * (m.gpus.size() - 1) / 2, fmt::join(across, ", ")),
                {{"pairs", across_pairs}, {"source", m.source}});
        }
        if (!unknown.empty()) {
            out.add("topology.link_unknown", "host",
                fmt::format("the link of GPU pairs {} is unknown ({})", fmt::join(unknown, ", "),
                    m.notes.empty() ? "no common-ancestor level" : m.notes.front()),
                {{"pairs", unknown}, {"source", m.source}});
        }
        for (const auto& g : m.gpus) {
            if (g.cpus.empty() || g.numa.empty()) {
                out.add("topology.gpu_numa_unknown", gpu_label(g),
                    fmt::format("which CPUs and NUMA node are near the GPU is unknown (CPUs '{}', NUMA "
                                "'{}'){}",
                        g.cpus, fmt::join(g.numa, ","), m.notes.empty() ? "" : fmt::format("; {}", m.notes.front())),
                    {{"bus_id", g.bus_id}, {"cpus", g.cpus}, {"numa", g.numa}});
            }
        }
        if (out.empty()) {
            out.add(
                m.gpus.size() == 1 ? "topology.single_gpu" : "topology.ok", "host", summary(m), render_topo_json(m));
        }
    };
    return p;
}

} // namespace doctor::probes
