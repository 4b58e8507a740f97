#pragma once

// gpudoctor's one GPU table (share/gpukit/gpus.toml, compiled in): each kind of GPU with its
// memory, training speed, compute capability, NVLink, and the bandwidths check --deep holds it to;
// and the one rule by which a GPU's name (NVML's, or one a user types) names a row. fit reads the
// memory and speed, the policy the floors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::engine {

/// A CUDA compute capability, e.g. 9.0 for Hopper.
struct ComputeCapability {
    unsigned major = 0;
    unsigned minor = 0;
    friend bool operator==(const ComputeCapability&, const ComputeCapability&) = default;
};
/// "8.6" → {8, 6}; nullopt for anything else.
std::optional<ComputeCapability> parse_compute_capability(const std::string& text);
std::string to_string(const ComputeCapability& cc);

/// What of a GPU's make the memory it takes depends on; nullopt where it is not known.
struct GpuTraits {
    std::optional<ComputeCapability> compute_capability;
    std::optional<bool> nvlink; ///< whether it reaches its peers over NVLink (more NCCL channels)
    friend bool operator==(const GpuTraits&, const GpuTraits&) = default;
};

/// Bandwidth a GPU model must reach in the deep tier (GB/s). Unset values are not judged against
/// a model floor (host copies then fall back to a fraction of the PCIe link).
struct DeepFloor {
    std::string model; ///< the GPU table's row it is for, or (a policy's floor) the name it was given
    std::optional<double> h2d_gbps;
    std::optional<double> d2h_gbps;
    std::optional<double> d2d_gbps;
    std::optional<double> p2p_gbps; ///< every GPU pair with peer access
    std::optional<double> allreduce_busbw_gbps; ///< NCCL all-reduce busbw over `allreduce_gpus` GPUs
    unsigned allreduce_gpus = 8;
    std::string source; ///< "the GPU table", "the policy" (said in findings)

    bool any() const { return h2d_gbps || d2h_gbps || d2d_gbps || p2p_gbps || allreduce_busbw_gbps; }
};

/// One kind of GPU.
struct GpuModel {
    std::string name;
    std::vector<std::string> aliases; ///< other names, NVML's among them ("NVIDIA A100-SXM4-80GB")
    std::uint64_t memory = 0; ///< bytes, about what NVML reports as total
    double speed = 1; ///< relative training throughput, V100 = 1; rough
    std::string note; ///< e.g. that CUDA 12 dropped it
    GpuTraits traits; ///< compute capability (always given) and NVLink (unknown unless said)
    DeepFloor floor; ///< what check --deep holds it to; nothing where no floor is known
};

/// GPU names compare without case, spaces, '-', '_' and a leading "NVIDIA" or "Tesla": "NVIDIA
/// A100-SXM4-80GB" and "a100 sxm4 80gb" are one name.
std::string gpu_key(std::string_view name);

class GpuTable {
public:
    /// The shipped table.
    static const GpuTable& builtin();
    static const char* builtin_toml();
    /// Reads a table in the same format. Throws base::Error naming `origin`, the line and the key.
    static GpuTable from_toml(const std::string& text, const std::string& origin);

    /// The row `name` names: a row's name or alias (gpu_key), else a family name (the part before
    /// the first '-') that only one row has. nullptr for none, or a family of several.
    const GpuModel* match(std::string_view name) const;

    /// The same, for a name a user gave: base::Error for an unknown name (with the closest one) and
    /// for a family of several ("A100": A100-40GB or A100-80GB).
    const GpuModel& find(std::string_view name) const;

    const std::vector<GpuModel>& models() const { return m_models; }

private:
    std::vector<GpuModel> m_models;
};

} // namespace doctor::engine
