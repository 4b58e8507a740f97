#pragma once

// What NVML and the driver's files say about the node's GPUs (the "nvml" collector), for the
// driver, gpus, p2p, topology, binding and frameworks probes, the Prometheus writer and fleet.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doctor::facts {

/// NVML's row remapping counts (Ampere and later).
struct RemappedRows {
    unsigned corrected = 0;
    unsigned uncorrected = 0;
    bool pending = false;
    bool failure = false;

    static constexpr auto fields()
    {
        return std::tuple{field("corrected", &RemappedRows::corrected),
            field("uncorrected", &RemappedRows::uncorrected), field("pending", &RemappedRows::pending),
            field("failure", &RemappedRows::failure)};
    }
};

/// One GPU as NVML reports it; a value NVML did not give is missing.
struct NvmlGpu {
    unsigned index = 0;
    std::string bus_id; ///< "0000:1b:00.0"
    std::optional<std::string> name; ///< "NVIDIA A100-SXM4-80GB"
    std::optional<std::string> uuid;
    std::optional<std::uint64_t> memory_total; ///< bytes
    std::optional<int>
        compute_mode; ///< as NVML numbers them: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
    std::optional<int> persistence; ///< 1 on
    std::optional<unsigned> processes; ///< compute processes on it
    std::optional<bool> ecc_enabled;
    std::optional<std::uint64_t> ecc_corrected; ///< since manufacture (aggregate)
    std::optional<std::uint64_t> ecc_uncorrected;
    std::optional<std::uint64_t> ecc_corrected_volatile; ///< since the last driver load or reset
    std::optional<std::uint64_t> ecc_uncorrected_volatile;
    std::optional<unsigned> retired_pages_single;
    std::optional<unsigned> retired_pages_double;
    std::optional<bool> retired_pages_pending;
    std::optional<RemappedRows> remapped_rows;
    std::optional<std::uint64_t> clock_event_reasons; ///< NVML's bit mask
    std::optional<unsigned> pcie_gen;
    std::optional<unsigned> pcie_max_gen;
    std::optional<unsigned> pcie_width;
    std::optional<unsigned> pcie_max_width;
    std::optional<unsigned> utilization; ///< percent of time a kernel ran
    std::optional<std::vector<std::string>> nvlinks; ///< the remote end of each active link

    static constexpr auto fields()
    {
        return std::tuple{field("index", &NvmlGpu::index, 0, Kind::gpu_index),
            field("bus_id", &NvmlGpu::bus_id, 0, Kind::bus_id), field("name", &NvmlGpu::name),
            field("uuid", &NvmlGpu::uuid), field("memory_total", &NvmlGpu::memory_total),
            field("compute_mode", &NvmlGpu::compute_mode), field("persistence", &NvmlGpu::persistence),
            field("processes", &NvmlGpu::processes), field("ecc_enabled", &NvmlGpu::ecc_enabled),
            field("ecc_corrected", &NvmlGpu::ecc_corrected), field("ecc_uncorrected", &NvmlGpu::ecc_uncorrected),
            field("ecc_corrected_volatile", &NvmlGpu::ecc_corrected_volatile),
            field("ecc_uncorrected_volatile", &NvmlGpu::ecc_uncorrected_volatile),
            field("retired_pages_single", &NvmlGpu::retired_pages_single),
            field("retired_pages_double", &NvmlGpu::retired_pages_double),
            field("retired_pages_pending", &NvmlGpu::retired_pages_pending),
            field("remapped_rows", &NvmlGpu::remapped_rows),
            field("clock_event_reasons", &NvmlGpu::clock_event_reasons), field("pcie_gen", &NvmlGpu::pcie_gen),
            field("pcie_max_gen", &NvmlGpu::pcie_max_gen), field("pcie_width", &NvmlGpu::pcie_width),
            field("pcie_max_width", &NvmlGpu::pcie_max_width), field("utilization", &NvmlGpu::utilization),
            list("nvlinks", &NvmlGpu::nvlinks, nvlinks_per_gpu, "NVLinks of one GPU")};
    }

    /// NVML_NVLINK_MAX_LINKS is 18.
    static constexpr std::size_t nvlinks_per_gpu = 18;
};

/// Two GPUs (NVML indexes) and what NVML says of the pair.
struct NvmlPair {
    unsigned a = 0;
    unsigned b = 0;
    std::optional<int> p2p_read; ///< NVML's P2P status: 0 OK, 4 disabled by a registry key, ...
    std::optional<int> p2p_write;
    std::optional<int> ancestor; ///< NVML's topology level of their common ancestor

    static constexpr auto fields()
    {
        return std::tuple{field("a", &NvmlPair::a, 0, Kind::gpu_index), field("b", &NvmlPair::b, 0, Kind::gpu_index),
            field("p2p_read", &NvmlPair::p2p_read), field("p2p_write", &NvmlPair::p2p_write),
            field("ancestor", &NvmlPair::ancestor)};
    }
};

/// The driver and every GPU NVML lists.
struct NvmlFacts {
    std::optional<std::string> driver_file; ///< /proc/driver/nvidia/version's first line
    std::optional<std::string> kernel_module_version;
    std::optional<std::string> nvml_library; ///< the file loaded (or tried)
    bool nvml_loaded = false;
    std::optional<std::string> nvml_error; ///< why NVML could not be used
    std::optional<std::string> driver_version;
    std::optional<int> cuda_driver_version; ///< 12040 for CUDA 12.4
    std::optional<std::vector<NvmlGpu>> gpus; ///< when NVML loaded
    std::optional<std::vector<NvmlPair>> pairs; ///< every pair of `gpus`

    static constexpr auto fields()
    {
        return std::tuple{nullable("driver_file", &NvmlFacts::driver_file),
            field("kernel_module_version", &NvmlFacts::kernel_module_version),
            field("nvml_library", &NvmlFacts::nvml_library), field("nvml_loaded", &NvmlFacts::nvml_loaded),
            field("nvml_error", &NvmlFacts::nvml_error), field("driver_version", &NvmlFacts::driver_version),
            field("cuda_driver_version", &NvmlFacts::cuda_driver_version),
            list("gpus", &NvmlFacts::gpus, Ceilings::gpus, "GPUs"),
            list("pairs", &NvmlFacts::pairs, Ceilings::pairs, "GPU pairs")};
    }
};

} // namespace doctor::facts
