#include "base/node_layout.hpp"

#include <algorithm>

namespace base {

const PciFunction* NodeLayout::find_pci(const PciAddress& address) const
{
    for (const auto& fn : pci) {
        if (fn.address == address) {
            return &fn;
        }
    }
    return nullptr;
}

std::vector<unsigned> NodeLayout::numa_of(const CpuSet& cpus) const
{
    std::vector<unsigned> out;
    for (const auto& node : numa_nodes) {
        if (node.has_cpus() && node.cpus.intersects(cpus)) {
            out.push_back(node.os_index);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

CpuSet NodeLayout::packages_of(const CpuSet& cpus) const
{
    CpuSet out;
    for (const auto& package : packages) {
        if (package.cpus.intersects(cpus)) {
            out = out.unite(package.cpus);
        }
    }
    return out.empty() ? cpus : out;
}

std::vector<CpuSet> NodeLayout::cores_in(const CpuSet& cpus) const
{
    std::vector<CpuSet> out;
    for (const auto& core : cores) {
        CpuSet mine = core.intersect(cpus);
        if (!mine.empty()) {
            out.push_back(std::move(mine));
        }
    }
    return out;
}

std::string NodeLayout::nearest_hca(const CpuSet& cpus) const
{
    for (const auto& hca : hcas) {
        if (hca.locality.known() && hca.locality.cpus.intersects(cpus)) {
            return hca.name;
        }
    }
    return "";
}

std::vector<const NumaNode*> NodeLayout::cpu_numa_nodes() const
{
    std::vector<const NumaNode*> out;
    for (const auto& node : numa_nodes) {
        if (node.has_cpus()) {
            out.push_back(&node);
        }
    }
    return out;
}

} // namespace base
