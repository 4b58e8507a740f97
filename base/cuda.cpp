#include "base/cuda.hpp"

#include "base/error.hpp"

#include <cstdlib>
#include <fmt/format.h>

namespace base {

std::string Cuda::default_file()
{
    const char* override_file = std::getenv("GPUKIT_CUDA_LIBRARY");
    if (override_file != nullptr && *override_file != '\0') {
        return override_file;
    }
    return "libcuda.so.1";
}

std::string Cuda::version_text(int version)
{
    return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

Cuda Cuda::load()
{
    return load(default_file());
}

Cuda Cuda::load(const std::string& file)
{
    DynamicLibrary library(file);
    CudaApi api;
    const char* missing = nullptr;
    auto require = [&](auto& fn, const char* symbol) {
        if (!library.bind(fn, symbol) && missing == nullptr) {
            missing = symbol;
        }
    };
    require(api.init, "cuInit");
    require(api.driver_version, "cuDriverGetVersion");
    require(api.device_count, "cuDeviceGetCount");
    if (missing != nullptr) {
        throw Error(fmt::format("{} is not a usable CUDA driver library: it lacks {}; point GPUKIT_CUDA_LIBRARY "
                                "at libcuda.so.1 from the NVIDIA driver",
            file, missing));
    }
    library.bind(api.error_string, "cuGetErrorString");
    library.bind(api.error_name, "cuGetErrorName");
    const char* missing_copy = nullptr;
    auto copy_symbol = [&](auto& fn, const char* symbol) {
        if (!library.bind(fn, symbol) && missing_copy == nullptr) {
            missing_copy = symbol;
        }
    };
    copy_symbol(api.device_get, "cuDeviceGet");
    copy_symbol(api.device_name, "cuDeviceGetName");
    copy_symbol(api.device_pci_bus_id, "cuDeviceGetPCIBusId");
    copy_symbol(api.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    copy_symbol(api.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
    copy_symbol(api.ctx_set_current, "cuCtxSetCurrent");
    copy_symbol(api.mem_alloc, "cuMemAlloc_v2");
    copy_symbol(api.mem_free, "cuMemFree_v2");
    copy_symbol(api.mem_host_alloc, "cuMemHostAlloc");
    copy_symbol(api.mem_free_host, "cuMemFreeHost");
    copy_symbol(api.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
    copy_symbol(api.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
    copy_symbol(api.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    copy_symbol(api.memcpy_peer_async, "cuMemcpyPeerAsync");
    copy_symbol(api.stream_create, "cuStreamCreate");
    copy_symbol(api.stream_destroy, "cuStreamDestroy_v2");
    copy_symbol(api.stream_synchronize, "cuStreamSynchronize");
    copy_symbol(api.event_create, "cuEventCreate");
    copy_symbol(api.event_record, "cuEventRecord");
    copy_symbol(api.event_synchronize, "cuEventSynchronize");
    copy_symbol(api.event_elapsed_time, "cuEventElapsedTime");
    copy_symbol(api.event_destroy, "cuEventDestroy_v2");
    copy_symbol(api.device_can_access_peer, "cuDeviceCanAccessPeer");
    copy_symbol(api.ctx_enable_peer_access, "cuCtxEnablePeerAccess");
    return Cuda(std::move(library), api, missing_copy);
}

Cuda::Cuda(DynamicLibrary library, CudaApi api, const char* missing_copy_symbol)
    : m_library(std::move(library)), m_api(api), m_missing_copy_symbol(missing_copy_symbol)
{
}

void Cuda::check(cuda_abi::Result rc, const std::string& what) const
{
    if (rc != cuda_abi::success) {
        throw Error(fmt::format("{} failed: {}", what, describe(rc)));
    }
}

std::string Cuda::describe(cuda_abi::Result rc) const
{
    const char* name = nullptr;
    const char* text = nullptr;
    if (m_api.error_name == nullptr || m_api.error_name(rc, &name) != cuda_abi::success) {
        name = nullptr;
    }
    if (m_api.error_string == nullptr || m_api.error_string(rc, &text) != cuda_abi::success) {
        text = nullptr;
    }
    if (name != nullptr && text != nullptr) {
        return fmt::format("{}: {} (CUDA error {})", name, text, rc);
    }
    if (name != nullptr || text != nullptr) {
        return fmt::format("{} (CUDA error {})", name != nullptr ? name : text, rc);
    }
    return fmt::format("CUDA error {}", rc);
}

void Cuda::init() const
{
    cuda_abi::Result rc = m_api.init(0);
    if (rc != cuda_abi::success) {
        throw Error(fmt::format("cuInit failed in {}: {}", file(), describe(rc)));
    }
}

int Cuda::driver_version() const
{
    int version = 0;
    cuda_abi::Result rc = m_api.driver_version(&version);
    if (rc != cuda_abi::success) {
        throw Error(fmt::format("cuDriverGetVersion failed in {}: {}", file(), describe(rc)));
    }
    return version;
}

int Cuda::device_count() const
{
    int count = 0;
    cuda_abi::Result rc = m_api.device_count(&count);
    if (rc != cuda_abi::success) {
        throw Error(fmt::format("cuDeviceGetCount failed in {}: {}", file(), describe(rc)));
    }
    return count;
}

} // namespace base
