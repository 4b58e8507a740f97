#pragma once

#include "doctor/engine/gpu_table.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace doctor::engine {

/// What the node is expected to be: built-in defaults (share/gpukit/policy.toml, compiled in),
/// overridden by `--policy FILE`, then by flags such as `--expect-gpus`.
struct Policy {
    std::string min_driver = "535.0"; ///< oldest acceptable NVIDIA driver
    std::optional<unsigned> expect_gpus; ///< nullopt: at least one
    std::string min_nccl = "2.18.0"; ///< oldest NCCL without a warning
    std::string min_cudnn = "8.9.0";
    double min_shm_gib = 1.0; ///< /dev/shm below this is a warning (NCCL SHM)
    bool memlock_unlimited = true; ///< RDMA needs unlimited locked memory
    unsigned min_nofile = 65536;
    double ib_min_rate_gbps = 100.0; ///< an active IB port slower than this warns
    unsigned max_other_processes = 0; ///< processes on a GPU before the job starts

    // The deep tier ([deep] and [[deep.floor]]).
    std::size_t copy_bytes = std::size_t{256} << 20; ///< each timed copy
    unsigned copies = 8; ///< copies per sample
    unsigned copy_samples = 5; ///< samples; the median is judged
    std::size_t allreduce_bytes = std::size_t{1} << 30; ///< per GPU
    unsigned allreduce_iterations = 20;
    double pcie_fraction = 0.7; ///< host copies below this share of the PCIe link fail (no model floor)
    double outlier_fraction = 0.6; ///< a GPU or pair below this share of its peers' median warns
    /// The policy's own floors ([[deep.floor]]), over the GPU table's; each `model` is the table's
    /// row it names, or the name given for a GPU the table lacks.
    std::vector<DeepFloor> floors;
    /// The most [[deep.floor]] tables one policy file may hold: one per GPU model is a few dozen.
    static constexpr std::size_t max_floors = 10000;

    /// The floor of the GPU called `gpu_name` (NVML's name): the policy's for the GPU table's row
    /// that names it (gpu_table.hpp), else that row's own; nullptr for none.
    const DeepFloor* floor_for(const std::string& gpu_name) const;

    /// Reads TOML text over the current values. Throws base::Error naming the file, line and key.
    void merge_toml(const std::string& text, const std::string& origin);
    /// The built-in defaults, as the TOML shipped in share/gpukit/policy.toml.
    static Policy defaults();
    static const char* default_toml();
};

/// Compares dotted version strings numerically ("535.104.05" < "550.54"); non-numeric parts
/// compare as 0.
int compare_versions(const std::string& a, const std::string& b);

} // namespace doctor::engine
