#pragma once

#include "doctor/probes/table.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace doctor::probes {

/// One GPU of the matrix, with where it sits.
struct TopoGpu {
    unsigned index = 0; ///< NVML index (NVML source) or PCI-order index (hwloc source)
    std::string bus_id; ///< "0000:1b:00.0"
    std::string name;
    std::string cpus; ///< cpulist of the GPU's locality; "" when unknown
    std::vector<unsigned> numa; ///< NUMA nodes of that locality; empty when unknown
    std::string nic; ///< nearest OpenFabrics device; "" when none
};

/// The GPU↔GPU link matrix of `nvidia-smi topo -m`, built from facts alone: the topology probe
/// judges it and `gpudoctor topo` prints it.
struct TopoMatrix {
    std::string source; ///< "nvml", "hwloc" or "" when there is nothing
    std::vector<TopoGpu> gpus;
    std::vector<std::vector<std::string>> link; ///< link[i][j]: "X", "NV12", "PIX", ..., "SYS", "?"
    std::vector<std::string> notes; ///< why a source was used, what is unknown
    /// NVLinks between GPU i and j (0 for a PCIe-only pair).
    unsigned nvlinks(std::size_t i, std::size_t j) const;
};

/// The matrix from the "nvml" facts when NVML answered about a live topology (NV# from each GPU's
/// "nvlinks", the rest from "pairs" ancestor levels), else from the "topology" facts' "links"
/// (the hwloc PCI tree). Localities come from the topology facts, matched by bus id.
TopoMatrix topo_matrix(const Facts& facts);

/// `nvidia-smi topo -m` for NVML's common-ancestor level (nvmlGpuTopologyLevel_t): 0 and 10 PIX,
/// 20 PXB, 30 PHB, 40 NODE, 50 SYS, anything else "?".
std::string link_from_ancestor(int level);

/// The matrix as `nvidia-smi topo -m` prints it (GPU columns, CPU Affinity, NUMA Affinity, NIC),
/// then the legend.
std::string render_topo_text(const TopoMatrix& matrix);

/// The same for programs: {"source", "gpus": [{index, bus_id, name, cpus, numa, nic}],
/// "matrix": [[...]], "legend": {...}, "notes": [...]}.
nlohmann::json render_topo_json(const TopoMatrix& matrix);

/// `gpudoctor topo`: collects topology (and NVML unless ctx has a topology file) and prints the
/// matrix to stdout. Returns the exit status: 0; 2 when the --topology file cannot be read; 3 when
/// this machine's topology cannot.
int run_topo(const CollectContext& ctx, bool json);

} // namespace doctor::probes
