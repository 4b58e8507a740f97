#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"
#include "doctor/probes/topo_matrix.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace doctor::probes {

namespace {

// nvmlGpuP2PStatus_t.
std::string p2p_status_name(int status)
{
    static const char* const names[] = {"OK", "CHIPSET_NOT_SUPPORTED", "GPU_NOT_SUPPORTED",
        "IOH_TOPOLOGY_NOT_SUPPORTED", "DISABLED_BY_REGKEY", "NOT_SUPPORTED", "UNKNOWN"};
    return status >= 0 && status <= 6 ? names[status] : fmt::format("status {}", status);
}

// The peer-access matrix from NVML: NCCL uses P2P only where both READ and WRITE are OK.
void judge_matrix(const facts::NvmlFacts& nvml, Findings& out)
{
    const std::vector<facts::NvmlGpu> none;
    const auto& gpus = nvml.gpus ? *nvml.gpus : none;
    if (gpus.size() < 2) {
        out.add("p2p.single_gpu", "host", fmt::format("not checked: {} GPU, so no GPU pairs", gpus.size()));
        return;
    }
    std::map<unsigned, const facts::NvmlGpu*> by_index;
    bool any_nvlink = false;
    for (const auto& g : gpus) {
        by_index[g.index] = &g;
        any_nvlink = any_nvlink || (g.nvlinks && !g.nvlinks->empty());
    }
    auto subject = [&](unsigned a, unsigned b) {
        auto bus = [&](unsigned i) {
            auto it = by_index.find(i);
            return it == by_index.end() ? std::string("?") : it->second->bus_id;
        };
        return fmt::format("gpu {} ({}) ↔ gpu {} ({})", a, bus(a), b, bus(b));
    };
    const std::vector<facts::NvmlPair> no_pairs;
    const auto& pairs = nvml.pairs ? *nvml.pairs : no_pairs;
    std::vector<std::string> unknown;
    unsigned ok = 0;
    for (const auto& p : pairs) {
        if (!p.p2p_read || !p.p2p_write) {
            unknown.push_back(fmt::format("{}-{}", p.a, p.b));
            continue;
        }
        const int read = *p.p2p_read;
        const int write = *p.p2p_write;
        if (read == 0 && write == 0) {
            ++ok;
            continue;
        }
        const std::string link = p.ancestor ? link_from_ancestor(*p.ancestor) : "?";
        const std::string statuses = fmt::format("read {}, write {}", p2p_status_name(read), p2p_status_name(write));
        if (link == "SYS" && !any_nvlink) {
            out.add("p2p.unavailable_across_sockets", subject(p.a, p.b),
                fmt::format("no P2P between GPUs on different sockets ({}; link SYS, no NVLink on this "
                            "node): expected on PCIe-only multi-socket nodes, traffic is staged "
                            "through host memory",
                    statuses),
                facts::write(p));
        } else {
            out.add("p2p.unavailable", subject(p.a, p.b),
                fmt::format("peer-to-peer is not available ({}; link {}): NCCL needs both READ and "
                            "WRITE and falls back to slower paths through host memory",
                    statuses, link),
                facts::write(p));
        }
    }
    if (!unknown.empty()) {
        out.add("p2p.status_unknown", "host",
            fmt::format("not checked: NVML gave no P2P status for GPU pairs {}", fmt::join(unknown, ", ")));
    }
    if (ok > 0 && ok == pairs.size()) {
        out.add("p2p.ok", "host", fmt::format("P2P read and write OK between all {} GPU pairs", ok), {{"pairs", ok}});
    }
}

void judge_iommu(const facts::PciFacts& pci, Findings& out)
{
    const facts::PciIommu& iommu = pci.iommu;
    std::map<std::string, unsigned> gpu_types;
    for (const auto& g : pci.gpus) {
        if (g.iommu_type) {
            ++gpu_types[*g.iommu_type];
        }
    }
    const auto& types = iommu.types;
    const auto& options = iommu.cmdline_options;
    auto has_option = [&](const std::string& o) {
        return std::find(options.begin(), options.end(), o) != options.end();
    };
    const bool pt_option = has_option("iommu=pt") || has_option("iommu.passthrough=1");
    auto translated_in = [](const std::map<std::string, unsigned>& t) {
        return t.count("DMA") + t.count("DMA-FQ") > 0;
    };
    std::string mode;
    if (!gpu_types.empty()) {
        mode = translated_in(gpu_types) ? "translated" : "passthrough";
    } else if (iommu.groups == 0) {
        mode = "off";
    } else if (translated_in(types)) {
        mode = types.count("identity") > 0 && pt_option ? "passthrough" : "translated";
    } else {
        mode = "passthrough";
    }
    const nlohmann::json f = {{"mode", mode}, {"groups", iommu.groups}, {"types", types},
        {"gpu_group_types", gpu_types}, {"cmdline_options", options}};
    const std::string opts = options.empty() ? "none" : fmt::format("{}", fmt::join(options, " "));
    if (mode == "translated" && !pci.vm.virtual_machine) {
        out.add("p2p.iommu_translated", "host",
            fmt::format("the IOMMU translates DMA (group types {}; kernel options {}): GPU peer and "
                        "GPUDirect traffic is redirected through the root complex, slow or hanging",
                gpu_types.empty() ? nlohmann::json(types).dump() : nlohmann::json(gpu_types).dump(), opts),
            f);
        return;
    }
    std::string why = mode == "off" ? "no IOMMU groups: the IOMMU is off or absent"
        : mode == "passthrough" ? fmt::format("the IOMMU is in passthrough (identity) mode (kernel options {})", opts)
                                : "the IOMMU translates DMA, which is expected inside a VM";
    out.add("p2p.iommu_ok", "host", why, f);
}

void judge_acs(const facts::PciFacts& pci, Findings& out)
{
    const nlohmann::json bridges = facts::write(pci.bridges);
    std::vector<std::string> unreadable;
    std::vector<const facts::PciBridge*> redirecting;
    unsigned checked = 0;
    for (const auto& b : pci.bridges) {
        if (!b.readable) {
            unreadable.push_back(b.bus_id);
            continue;
        }
        ++checked;
        if (b.redirects()) {
            redirecting.push_back(&b);
        }
    }
    if (!redirecting.empty() && pci.vm.virtual_machine) {
        out.add("p2p.acs_in_vm", "host",
            fmt::format("ACS redirect is on at {} bridge(s) above the GPUs, as expected in a virtual "
                        "machine ({}): the hypervisor needs it to isolate passed-through devices",
                redirecting.size(), pci.vm.evidence.value_or("virtual machine")),
            {{"bridges", bridges}});
    } else {
        auto on_off = [](const std::optional<bool>& bit) { return bit.value_or(false) ? "on" : "off"; };
        for (const facts::PciBridge* b : redirecting) {
            out.add("p2p.acs_enabled", fmt::format("bridge {}", b->bus_id),
                fmt::format("PCIe ACS redirect is on (ACS Control {}: request redirect {}, completion "
                            "redirect {}) on a bridge above the GPUs: peer-to-peer traffic is forced up "
                            "to the root complex, slow or broken (NCCL hangs, GPUDirect RDMA errors)",
                    b->acs_control.value_or("?"), on_off(b->request_redirect), on_off(b->completion_redirect)),
                facts::write(*b));
        }
    }
    if (!unreadable.empty()) {
        out.add("p2p.acs_unreadable", "host",
            fmt::format("ACS not checked on {} bridge(s) ({}): their extended config space is "
                        "unreadable (needs root)",
                unreadable.size(), fmt::join(unreadable, ", ")),
            {{"bridges", unreadable}});
    }
    if (redirecting.empty() && checked > 0) {
        out.add("p2p.acs_off", "host", fmt::format("no ACS redirect on the {} bridge(s) above the GPUs", checked),
            {{"bridges", bridges}});
    }
}

} // namespace

Probe p2p_probe()
{
    Probe p;
    p.name = "p2p";
    p.summary = "GPU peer access (NVML READ and WRITE), PCIe ACS on bridges above the GPUs, IOMMU mode";
    p.collectors = {"nvml", "pci"};
    p.codes = {
        {"p2p.ok", Severity::pass, "peer-to-peer works between every GPU pair",
            "nvmlDeviceGetP2PStatus answers OK for both READ and WRITE between every pair, which is what NCCL needs "
            "to use P2P (NVLink or PCIe) inside the node.",
            ""},
        {"p2p.unavailable", Severity::fail, "no peer-to-peer between two GPUs",
            "NVML reports READ or WRITE P2P as not OK (CHIPSET_NOT_SUPPORTED, GPU_NOT_SUPPORTED, "
            "IOH_TOPOLOGY_NOT_SUPPORTED, DISABLED_BY_REGKEY, NOT_SUPPORTED, UNKNOWN) for a pair that should have it. "
            "NCCL then copies through host memory (SHM), at a fraction of the bandwidth; for NVLink-connected GPUs it "
            "stops with 'P2P is disabled between NVLINK connected GPUs'. Common causes: PCIe ACS or a translating "
            "IOMMU (see p2p.acs_enabled, p2p.iommu_translated), BIOS settings, a VM without P2P passthrough, a "
            "driver registry key.",
            "check ACS and the IOMMU (this probe's other findings), the BIOS PCIe settings and 'nvidia-smi topo -p2p "
            "rw'; in a VM, ask for a P2P-capable GPU passthrough; status 4 means a driver registry key disabled P2P: "
            "remove it (NVreg_RegistryDwords) and reload the driver"},
        {"p2p.unavailable_across_sockets", Severity::warn,
            "no peer-to-peer between GPUs on different sockets (expected)",
            "On PCIe-only nodes with several sockets, P2P across the CPU interconnect (QPI/UPI) is usually not "
            "supported, so NVML reports it unavailable for SYS pairs; NCCL stages such traffic through host memory. "
            "Nothing is broken, but jobs that span both sockets communicate more slowly.",
            "keep communicating ranks on one socket's GPUs; nothing is broken"},
        {"p2p.status_unknown", Severity::skip, "NVML gave no P2P status",
            "The NVML library lacks nvmlDeviceGetP2PStatus or it failed for some pairs, so P2P was not checked there.",
            ""},
        {"p2p.single_gpu", Severity::skip, "one GPU: no pairs", "With a single GPU there is no peer access to check.",
            ""},
        {"p2p.acs_enabled", Severity::fail, "PCIe ACS redirect on a bridge above the GPUs",
            "Access Control Services with Request or Completion Redirect on a PCIe switch port or root port sends "
            "all peer-to-peer traffic up to the root complex: GPU P2P and GPUDirect RDMA become slow or hang, or IB "
            "reports IBV_WC_LOC_PROT_ERR. NCCL's documentation says to disable ACS on bare metal. Read from "
            "the ACS extended capability (0x000D) in the bridge's config space, ACS Control at offset +6, bits 2 and "
            "3.",
            "disable ACS in the BIOS, or at every boot: setpci -s {bus_id} ECAP_ACS+6.w=0000"},
        {"p2p.acs_off", Severity::pass, "no ACS redirect above the GPUs",
            "The bridges above the GPUs do not redirect P2P traffic.", ""},
        {"p2p.acs_in_vm", Severity::pass, "ACS redirect inside a virtual machine (expected)",
            "Hypervisors need ACS to isolate devices passed through to guests, so ACS redirect on the (virtual) "
            "bridges of a VM is expected and not a fault of the node.",
            ""},
        {"p2p.acs_unreadable", Severity::skip, "ACS not checked: config space needs root",
            "The PCIe extended config space (offset 0x100 and up of /sys/bus/pci/devices/<bdf>/config) is readable "
            "by root only; without it ACS cannot be checked. Also given when NVML lists GPUs but sysfs under --sysroot "
            "shows none (a container without /sys/bus/pci), so neither ACS nor the IOMMU could be looked at.",
            "run gpudoctor as root to check ACS"},
        {"p2p.iommu_translated", Severity::warn, "the IOMMU translates GPU DMA",
            "IOMMU groups of type DMA or DMA-FQ (not identity) mean the IOMMU translates device addresses: P2P "
            "traffic is redirected to the CPU root complex, slow, or hangs; IO_PAGE_FAULTs and zeroed tensors have "
            "been reported. NCCL's maintainers recommend iommu=pt.",
            "boot with iommu=pt (passthrough; with intel_iommu=on or amd_iommu=on), or disable the "
            "IOMMU (VT-d/AMD-Vi) in the BIOS if nothing needs it"},
        {"p2p.iommu_ok", Severity::pass, "the IOMMU does not get in the way",
            "The IOMMU is off, in passthrough (identity) mode, or translating inside a VM where that is expected.", ""},
    };
    p.judge = [](const Facts& facts, const Policy&, Findings& out) {
        const facts::PciFacts& pci = *facts.pci().get();
        const auto unavailable = gpus_unavailable(facts);
        const bool sysfs_gpus = !pci.gpus.empty();
        if (unavailable && !sysfs_gpus) {
            out.skip(fmt::format("not checked: {}", *unavailable + "; no NVIDIA GPU in sysfs either"));
            return;
        }
        if (unavailable) {
            out.add("p2p.status_unknown", "host", fmt::format("P2P status not checked: {}", *unavailable));
        } else {
            judge_matrix(*facts.nvml().get(), out);
        }
        if (!sysfs_gpus) {
            out.add(
                "p2p.acs_unreadable", "host", "ACS and IOMMU not checked: no NVIDIA GPU under /sys/bus/pci/devices");
            return;
        }
        judge_acs(pci, out);
        judge_iommu(pci, out);
    };
    return p;
}

} // namespace doctor::probes
