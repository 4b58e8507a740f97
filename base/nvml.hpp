#pragma once

#include "base/dynamic_library.hpp"
#include "base/pci_address.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace base {

/// The slice of the NVML C ABI this project calls, declared here so the build needs no NVIDIA
/// headers. Layouts follow nvml.h (NVML 11/12).
namespace nvml_abi {
using Return = int;
using Device = struct DeviceOpaque*;
constexpr Return success = 0;
constexpr Return error_not_supported = 3;
constexpr Return error_no_permission = 4;
constexpr Return error_insufficient_size = 7;

struct PciInfo {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
};

struct Memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct Utilization {
    unsigned int gpu;
    unsigned int memory;
};

constexpr int p2p_caps_read = 0;
constexpr int p2p_caps_write = 1;
constexpr int memory_error_corrected = 0;
constexpr int memory_error_uncorrected = 1;
constexpr int ecc_counter_volatile = 0; ///< since the last driver load or GPU reset
constexpr int ecc_counter_aggregate = 1; ///< over the GPU's life
constexpr int page_retirement_double_bit = 1;
constexpr int page_retirement_single_bit = 0;
constexpr unsigned max_nvlinks = 18;
} // namespace nvml_abi

/// One struct of NVML function pointers, filled by one loader. Required symbols are checked at
/// load; an optional one that is null means "feature absent".
struct NvmlApi {
    // required
    nvml_abi::Return (*init)() = nullptr; // nvmlInit_v2
    nvml_abi::Return (*shutdown)() = nullptr; // nvmlShutdown
    nvml_abi::Return (*device_count)(unsigned int*) = nullptr; // nvmlDeviceGetCount_v2
    nvml_abi::Return (*handle_by_index)(unsigned int, nvml_abi::Device*) = nullptr; // ..._v2
    nvml_abi::Return (*pci_info)(nvml_abi::Device, nvml_abi::PciInfo*) = nullptr; // _v3, else _v2
    // optional
    const char* (*error_string)(nvml_abi::Return) = nullptr;
    nvml_abi::Return (*name)(nvml_abi::Device, char*, unsigned int) = nullptr;
    nvml_abi::Return (*uuid)(nvml_abi::Device, char*, unsigned int) = nullptr;
    nvml_abi::Return (*memory)(nvml_abi::Device, nvml_abi::Memory*) = nullptr;
    nvml_abi::Return (*driver_version)(char*, unsigned int) = nullptr;
    nvml_abi::Return (*max_mig_devices)(nvml_abi::Device, unsigned int*) = nullptr;
    nvml_abi::Return (*mig_handle_by_index)(nvml_abi::Device, unsigned int, nvml_abi::Device*) = nullptr;
    // health, for gpudoctor
    nvml_abi::Return (*cuda_driver_version)(int*) = nullptr; // ..._v2
    nvml_abi::Return (*compute_mode)(nvml_abi::Device, int*) = nullptr;
    nvml_abi::Return (*persistence_mode)(nvml_abi::Device, int*) = nullptr;
    /// nvmlDeviceGetComputeRunningProcesses: _v3, else _v2, else unversioned; the entries it fills
    /// are `process_info_size` bytes each (see Nvml::load).
    nvml_abi::Return (*running_processes)(nvml_abi::Device, unsigned int*, void*) = nullptr;
    unsigned process_info_size = 0; ///< 32, 24 or 16 bytes; 0 when running_processes is absent
    const char* running_processes_symbol = ""; ///< the symbol bound, for messages
    nvml_abi::Return (*power_usage)(nvml_abi::Device, unsigned int*) = nullptr; // milliwatts
    nvml_abi::Return (*temperature)(nvml_abi::Device, int, unsigned int*) = nullptr; // sensor 0: the die, °C
    nvml_abi::Return (*clock_info)(nvml_abi::Device, int, unsigned int*) = nullptr; // current MHz by clock type
    nvml_abi::Return (*ecc_mode)(nvml_abi::Device, int*, int*) = nullptr;
    nvml_abi::Return (*total_ecc_errors)(nvml_abi::Device, int, int, unsigned long long*) = nullptr;
    nvml_abi::Return (*retired_pages)(nvml_abi::Device, int, unsigned int*, unsigned long long*) = nullptr;
    nvml_abi::Return (*retired_pages_pending)(nvml_abi::Device, int*) = nullptr;
    nvml_abi::Return (*remapped_rows)(
        nvml_abi::Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*) = nullptr;
    nvml_abi::Return (*clock_event_reasons)(nvml_abi::Device, unsigned long long*) = nullptr;
    nvml_abi::Return (*pcie_gen)(nvml_abi::Device, unsigned int*) = nullptr;
    nvml_abi::Return (*pcie_max_gen)(nvml_abi::Device, unsigned int*) = nullptr;
    nvml_abi::Return (*pcie_width)(nvml_abi::Device, unsigned int*) = nullptr;
    nvml_abi::Return (*pcie_max_width)(nvml_abi::Device, unsigned int*) = nullptr;
    nvml_abi::Return (*utilization)(nvml_abi::Device, nvml_abi::Utilization*) = nullptr;
    nvml_abi::Return (*p2p_status)(nvml_abi::Device, nvml_abi::Device, int, int*) = nullptr;
    nvml_abi::Return (*common_ancestor)(nvml_abi::Device, nvml_abi::Device, int*) = nullptr;
    nvml_abi::Return (*nvlink_state)(nvml_abi::Device, unsigned int, int*) = nullptr;
    nvml_abi::Return (*nvlink_remote_pci)(nvml_abi::Device, unsigned int, nvml_abi::PciInfo*) = nullptr; // _v2
    nvml_abi::Return (*cuda_compute_capability)(nvml_abi::Device, int*, int*) = nullptr; // major, minor
};

/// What NVML says about one physical GPU.
struct NvmlGpu {
    unsigned index = 0;
    PciAddress bus_id;
    std::string name;
    std::string uuid;
    std::optional<std::uint64_t> memory_total;
    std::vector<std::string> mig_uuids; ///< MIG instances on this GPU, when MIG is enabled
};

/// A process with a CUDA context on a GPU, as NVML lists it. Inside a container the pid is the
/// host's, not one this process can see.
struct NvmlProcess {
    unsigned pid = 0;
    std::optional<std::uint64_t> used_memory; ///< nullopt when NVML cannot say (NVML_VALUE_NOT_AVAILABLE)
    friend bool operator==(const NvmlProcess&, const NvmlProcess&) = default;
};

/// The NVLinks of a GPU that are up, by link index: empty for a GPU without NVLink (its first
/// link NOT_SUPPORTED); nullopt where this NVML cannot say (no nvmlDeviceGetNvLinkState, or
/// another error on the first link). The links are asked in order until one is not there.
std::optional<std::vector<unsigned>> active_nvlinks(const NvmlApi& api, nvml_abi::Device device);

/// The NVML library, loaded and initialised. Throws base::Error when the library is missing,
/// lacks a required symbol, or nvmlInit fails; the message names the file and NVML's own error.
class Nvml {
public:
    /// Loads `GPUKIT_NVML_LIBRARY` when set, else "libnvidia-ml.so.1".
    static Nvml load();
    static Nvml load(const std::string& file);

    ~Nvml();
    Nvml(Nvml&&) noexcept;
    Nvml& operator=(Nvml&&) = delete;
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    std::vector<NvmlGpu> gpus() const;
    /// The handle of GPU `index` (NVML's enumeration). Throws base::Error.
    nvml_abi::Device handle(unsigned index) const;
    /// NVML's error text for a return code.
    std::string describe(nvml_abi::Return rc) const;
    std::optional<std::string> driver_version() const;
    /// The compute processes on a GPU, through the process-list call load() chose, with the
    /// INSUFFICIENT_SIZE retry NVML's dynamic list needs. Throws base::Error naming the call.
    std::vector<NvmlProcess> compute_processes(nvml_abi::Device device) const;
    /// The entry size compute_processes reads: as chosen at load, or as the driver was seen to
    /// write (see compute_processes).
    unsigned process_info_size() const { return m_process_info_size; }
    const NvmlApi& api() const { return m_api; }
    const std::string& file() const { return m_library.file(); }

    /// The library file that load() would open.
    static std::string default_file();

private:
    Nvml(DynamicLibrary library, NvmlApi api);

    DynamicLibrary m_library;
    NvmlApi m_api;
    bool m_initialised = false;
    mutable unsigned m_process_info_size = 0;
};

} // namespace base
