#pragma once

#include "probes/dynamic_library.hpp"
#include "probes/pci_address.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace probes {

/// The slice of the NVML C ABI this project calls, declared here so the build needs no NVIDIA
/// headers. Layouts follow nvml.h (NVML 11/12).
namespace nvml_abi {
using Return = int;
using Device = struct DeviceOpaque*;
constexpr Return success = 0;
constexpr Return error_not_supported = 3;
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

/// The NVML library, loaded and initialised. Throws probes::Error when the library is missing,
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
    std::optional<std::string> driver_version() const;
    const NvmlApi& api() const { return m_api; }
    const std::string& file() const { return m_library.file(); }

    /// The library file that load() would open.
    static std::string default_file();

private:
    Nvml(DynamicLibrary library, NvmlApi api);
    std::string describe(nvml_abi::Return rc) const;

    DynamicLibrary m_library;
    NvmlApi m_api;
    bool m_initialised = false;
};

} // namespace probes
