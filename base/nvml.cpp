#include "base/nvml.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace base {

namespace {

std::string c_string(const char* buffer, std::size_t size)
{
    std::size_t n = 0;
    while (n < size && buffer[n] != '\0') {
        ++n;
    }
    return std::string(buffer, n);
}

// The process-list call and the size of the entries it fills. The _v3 call took the 24-byte
// nvmlProcessInfo_v2_t when it appeared (R510), silently switched to a 32-byte struct (with
// usedGpuCcProtectedMemory) in drivers 530/535.43 to 535.86, and went back to 24 bytes in
// 535.98, where the 32-byte layout moved to nvmlDeviceGetRunningProcessDetailList. So, as nvitop
// does: 32 bytes only when the driver has nvmlDeviceGetConfComputeMemSizeInfo (535 era) but not
// nvmlDeviceGetRunningProcessDetailList (535.98+); else 24 with _v3; 24 with _v2; 16 unversioned.
void bind_process_list(const DynamicLibrary& library, NvmlApi& api)
{
    if (library.bind(api.running_processes, "nvmlDeviceGetComputeRunningProcesses_v3")) {
        const bool struct_v3 = library.find("nvmlDeviceGetConfComputeMemSizeInfo") != nullptr &&
            library.find("nvmlDeviceGetRunningProcessDetailList") == nullptr;
        api.process_info_size = struct_v3 ? 32 : 24;
        api.running_processes_symbol = "nvmlDeviceGetComputeRunningProcesses_v3";
    } else if (library.bind(api.running_processes, "nvmlDeviceGetComputeRunningProcesses_v2")) {
        api.process_info_size = 24;
        api.running_processes_symbol = "nvmlDeviceGetComputeRunningProcesses_v2";
    } else if (library.bind(api.running_processes, "nvmlDeviceGetComputeRunningProcesses")) {
        api.process_info_size = 16;
        api.running_processes_symbol = "nvmlDeviceGetComputeRunningProcesses";
    }
}

// Bytes the call wrote into a buffer filled with `fill` beforehand: up to the last byte that changed.
// Every layout ends with a field a driver never leaves as 0xAA bytes (computeInstanceId is
// 0xFFFFFFFF without MIG, usedGpuCcProtectedMemory and usedGpuMemory have zero high bytes).
std::size_t bytes_written(const std::vector<unsigned char>& buffer, unsigned char fill)
{
    std::size_t n = buffer.size();
    while (n > 0 && buffer[n - 1] == fill) {
        --n;
    }
    return n;
}

} // namespace

std::string Nvml::default_file()
{
    const char* override_file = std::getenv("GPUKIT_NVML_LIBRARY");
    if (override_file != nullptr && *override_file != '\0') {
        return override_file;
    }
    return "libnvidia-ml.so.1";
}

Nvml Nvml::load()
{
    return load(default_file());
}

Nvml Nvml::load(const std::string& file)
{
    DynamicLibrary library(file);
    NvmlApi api;
    const char* missing = nullptr;
    auto require = [&](auto& fn, const char* symbol) {
        if (!library.bind(fn, symbol) && missing == nullptr) {
            missing = symbol;
        }
    };
    require(api.init, "nvmlInit_v2");
    require(api.shutdown, "nvmlShutdown");
    require(api.device_count, "nvmlDeviceGetCount_v2");
    require(api.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    if (!library.bind(api.pci_info, "nvmlDeviceGetPciInfo_v3")) {
        require(api.pci_info, "nvmlDeviceGetPciInfo_v2");
    }
    if (missing != nullptr) {
        throw Error(fmt::format("{} is not a usable NVML library: it lacks {}; point GPUKIT_NVML_LIBRARY "
                                "at libnvidia-ml.so.1 from the NVIDIA driver",
            file, missing));
    }
    library.bind(api.error_string, "nvmlErrorString");
    library.bind(api.name, "nvmlDeviceGetName");
    library.bind(api.uuid, "nvmlDeviceGetUUID");
    library.bind(api.memory, "nvmlDeviceGetMemoryInfo");
    library.bind(api.driver_version, "nvmlSystemGetDriverVersion");
    library.bind(api.max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
    library.bind(api.mig_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
    library.bind(api.cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2");
    library.bind(api.compute_mode, "nvmlDeviceGetComputeMode");
    library.bind(api.persistence_mode, "nvmlDeviceGetPersistenceMode");
    bind_process_list(library, api);
    library.bind(api.power_usage, "nvmlDeviceGetPowerUsage");
    library.bind(api.temperature, "nvmlDeviceGetTemperature");
    library.bind(api.clock_info, "nvmlDeviceGetClockInfo");
    library.bind(api.ecc_mode, "nvmlDeviceGetEccMode");
    library.bind(api.total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
    library.bind(api.retired_pages, "nvmlDeviceGetRetiredPages");
    library.bind(api.retired_pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
    library.bind(api.remapped_rows, "nvmlDeviceGetRemappedRows");
    if (!library.bind(api.clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons")) {
        library.bind(api.clock_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    }
    library.bind(api.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    library.bind(api.pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
    library.bind(api.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    library.bind(api.pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
    library.bind(api.utilization, "nvmlDeviceGetUtilizationRates");
    library.bind(api.p2p_status, "nvmlDeviceGetP2PStatus");
    library.bind(api.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    library.bind(api.nvlink_state, "nvmlDeviceGetNvLinkState");
    library.bind(api.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    library.bind(api.cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability");

    Nvml nvml(std::move(library), api);
    nvml_abi::Return rc = api.init();
    if (rc != nvml_abi::success) {
        throw Error(fmt::format("nvmlInit_v2 failed in {}: {}", nvml.file(), nvml.describe(rc)));
    }
    nvml.m_initialised = true;
    return nvml;
}

Nvml::Nvml(DynamicLibrary library, NvmlApi api)
    : m_library(std::move(library)), m_api(api), m_process_info_size(api.process_info_size)
{
}

Nvml::Nvml(Nvml&& other) noexcept
    : m_library(std::move(other.m_library)), m_api(other.m_api), m_initialised(other.m_initialised),
      m_process_info_size(other.m_process_info_size)
{
    other.m_initialised = false;
}

Nvml::~Nvml()
{
    if (m_initialised) {
        m_api.shutdown();
    }
}

std::optional<std::vector<unsigned>> active_nvlinks(const NvmlApi& api, nvml_abi::Device device)
{
    if (api.nvlink_state == nullptr) {
        return std::nullopt;
    }
    std::vector<unsigned> up;
    for (unsigned link = 0; link < nvml_abi::max_nvlinks; ++link) {
        int active = 0;
        const nvml_abi::Return rc = api.nvlink_state(device, link, &active);
        if (rc != nvml_abi::success) {
            if (link == 0 && rc != nvml_abi::error_not_supported) {
                return std::nullopt;
            }
            break;
        }
        if (active != 0) {
            up.push_back(link);
        }
    }
    return up;
}

std::string Nvml::describe(nvml_abi::Return rc) const
{
    if (m_api.error_string != nullptr) {
        const char* text = m_api.error_string(rc);
        if (text != nullptr) {
            return fmt::format("{} (NVML error {})", text, rc);
        }
    }
    return fmt::format("NVML error {}", rc);
}

nvml_abi::Device Nvml::handle(unsigned index) const
{
    nvml_abi::Device device = nullptr;
    nvml_abi::Return rc = m_api.handle_by_index(index, &device);
    if (rc != nvml_abi::success) {
        throw Error(fmt::format("nvmlDeviceGetHandleByIndex_v2({}) failed: {}", index, describe(rc)));
    }
    return device;
}

std::vector<NvmlGpu> Nvml::gpus() const
{
    unsigned int count = 0;
    nvml_abi::Return rc = m_api.device_count(&count);
    if (rc != nvml_abi::success) {
        throw Error(fmt::format("nvmlDeviceGetCount_v2 failed: {}", describe(rc)));
    }
    std::vector<NvmlGpu> out;
    for (unsigned int i = 0; i < count; ++i) {
        nvml_abi::Device device = handle(i);
        nvml_abi::PciInfo pci{};
        rc = m_api.pci_info(device, &pci);
        if (rc != nvml_abi::success) {
            throw Error(fmt::format("nvmlDeviceGetPciInfo of GPU {} failed: {}", i, describe(rc)));
        }
        NvmlGpu gpu;
        gpu.index = i;
        auto bus = PciAddress::parse(c_string(pci.bus_id, sizeof pci.bus_id));
        if (!bus) {
            bus = PciAddress::parse(c_string(pci.bus_id_legacy, sizeof pci.bus_id_legacy));
        }
        if (!bus) {
            bus = PciAddress{pci.domain, static_cast<std::uint8_t>(pci.bus), static_cast<std::uint8_t>(pci.device), 0};
        }
        gpu.bus_id = *bus;
        std::array<char, 256> text{};
        if (m_api.name != nullptr && m_api.name(device, text.data(), text.size()) == nvml_abi::success) {
            gpu.name = c_string(text.data(), text.size());
        }
        text.fill('\0');
        if (m_api.uuid != nullptr && m_api.uuid(device, text.data(), text.size()) == nvml_abi::success) {
            gpu.uuid = c_string(text.data(), text.size());
        }
        nvml_abi::Memory memory{};
        if (m_api.memory != nullptr && m_api.memory(device, &memory) == nvml_abi::success) {
            gpu.memory_total = memory.total;
        }
        unsigned int max_mig = 0;
        if (m_api.max_mig_devices != nullptr && m_api.mig_handle_by_index != nullptr && m_api.uuid != nullptr &&
            m_api.max_mig_devices(device, &max_mig) == nvml_abi::success) {
            for (unsigned int m = 0; m < max_mig; ++m) {
                nvml_abi::Device mig = nullptr;
                if (m_api.mig_handle_by_index(device, m, &mig) != nvml_abi::success) {
                    continue;
                }
                text.fill('\0');
                if (m_api.uuid(mig, text.data(), text.size()) == nvml_abi::success) {
                    gpu.mig_uuids.push_back(c_string(text.data(), text.size()));
                }
            }
        }
        out.push_back(std::move(gpu));
    }
    return out;
}

std::vector<NvmlProcess> Nvml::compute_processes(nvml_abi::Device device) const
{
    if (m_api.running_processes == nullptr) {
        throw Error(fmt::format("{} has no nvmlDeviceGetComputeRunningProcesses (_v3, _v2 or unversioned)", file()));
    }
    constexpr unsigned char fill = 0xAA;
    constexpr unsigned largest_entry = 32;
    unsigned int count = 0;
    nvml_abi::Return rc = m_api.running_processes(device, &count, nullptr);
    for (int attempt = 0; rc == nvml_abi::error_insufficient_size && attempt < 4; ++attempt) {
        // The list changes between calls: room for more than were just counted. Room for the
        // largest entry too, so a driver that writes 32-byte entries never overruns the buffer.
        const unsigned capacity = count * 2 + 5;
        std::vector<unsigned char> buffer(std::size_t(capacity) * largest_entry, fill);
        count = capacity;
        rc = m_api.running_processes(device, &count, buffer.data());
        if (rc != nvml_abi::success) {
            continue;
        }
        count = std::min(count, capacity);
        unsigned stride = m_process_info_size;
        const std::size_t written = bytes_written(buffer, fill);
        if (stride != 16 && count > 0 && written > std::size_t(count) * stride) {
            // The driver wrote more than `count` entries of the size chosen at load: the 535.43
            // to 535.86 layout behind a symbol that did not say so. Read it as it is written.
            stride = 32;
        } else if (stride == 32 && count > 0 && written <= std::size_t(count) * 24) {
            stride = 24;
        }
        m_process_info_size = stride;
        std::vector<NvmlProcess> out;
        for (unsigned i = 0; i < count; ++i) {
            const unsigned char* entry = buffer.data() + std::size_t(i) * stride;
            unsigned int pid = 0;
            unsigned long long used = 0;
            std::memcpy(&pid, entry, sizeof pid);
            std::memcpy(&used, entry + 8, sizeof used);
            NvmlProcess p;
            p.pid = pid;
            if (used != ~0ULL) {
                p.used_memory = used;
            }
            out.push_back(p);
        }
        return out;
    }
    if (rc == nvml_abi::success) {
        return {}; // no process: nothing to size
    }
    throw Error(fmt::format("{} failed: {}", m_api.running_processes_symbol, describe(rc)));
}

std::optional<std::string> Nvml::driver_version() const
{
    if (m_api.driver_version == nullptr) {
        return std::nullopt;
    }
    std::array<char, 96> text{};
    if (m_api.driver_version(text.data(), text.size()) != nvml_abi::success) {
        return std::nullopt;
    }
    return c_string(text.data(), text.size());
}

} // namespace base
