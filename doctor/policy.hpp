#pragma once

#include <optional>
#include <string>

namespace doctor {

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

    /// Reads TOML text over the current values. Throws probes::Error naming the file, line and key.
    void merge_toml(const std::string& text, const std::string& origin);
    /// The built-in defaults, as the TOML shipped in share/gpukit/policy.toml.
    static Policy defaults();
    static const char* default_toml();
};

/// Compares dotted version strings numerically ("535.104.05" < "550.54"); non-numeric parts
/// compare as 0.
int compare_versions(const std::string& a, const std::string& b);

} // namespace doctor
