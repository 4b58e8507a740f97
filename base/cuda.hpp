#pragma once

#include "base/dynamic_library.hpp"

#include <cstddef>
#include <string>

namespace base {

/// The slice of the CUDA driver API (cuda.h) this project calls, declared here so the build needs
/// no CUDA headers.
namespace cuda_abi {
using Result = int;
using Device = int;
using Context = struct CUctx_st*;
using Stream = struct CUstream_st*;
using Event = struct CUevent_st*;
using DevicePtr = unsigned long long;
constexpr Result success = 0;
constexpr Result out_of_memory = 2; // CUDA_ERROR_OUT_OF_MEMORY
constexpr Result peer_access_already_enabled = 704; // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
constexpr unsigned host_alloc_portable = 0x01; // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned stream_non_blocking = 0x1; // CU_STREAM_NON_BLOCKING
constexpr unsigned event_default = 0x0; // CU_EVENT_DEFAULT
} // namespace cuda_abi

/// One struct of CUDA driver API function pointers, filled by one loader. Required symbols are
/// checked at load; an optional one that is null means "feature absent".
struct CudaApi {
    // required
    cuda_abi::Result (*init)(unsigned int) = nullptr; // cuInit
    cuda_abi::Result (*driver_version)(int*) = nullptr; // cuDriverGetVersion
    cuda_abi::Result (*device_count)(int*) = nullptr; // cuDeviceGetCount
    // optional
    cuda_abi::Result (*error_string)(cuda_abi::Result, const char**) = nullptr; // cuGetErrorString
    cuda_abi::Result (*error_name)(cuda_abi::Result, const char**) = nullptr; // cuGetErrorName

    // The deep tier's copies (gpudoctor check --deep). Every current driver exports them; a
    // library that lacks one cannot measure bandwidth (Cuda::missing_copy_symbol names it).
    // The names are the ones cuda.h maps the API to (cuMemAlloc is cuMemAlloc_v2, ...).
    cuda_abi::Result (*device_get)(cuda_abi::Device*, int) = nullptr; // cuDeviceGet
    cuda_abi::Result (*device_name)(char*, int, cuda_abi::Device) = nullptr; // cuDeviceGetName
    cuda_abi::Result (*device_pci_bus_id)(char*, int, cuda_abi::Device) = nullptr; // cuDeviceGetPCIBusId
    cuda_abi::Result (*primary_ctx_retain)(cuda_abi::Context*, cuda_abi::Device) = nullptr; // cuDevicePrimaryCtxRetain
    cuda_abi::Result (*primary_ctx_release)(cuda_abi::Device) = nullptr; // cuDevicePrimaryCtxRelease_v2
    cuda_abi::Result (*ctx_set_current)(cuda_abi::Context) = nullptr; // cuCtxSetCurrent
    cuda_abi::Result (*mem_alloc)(cuda_abi::DevicePtr*, std::size_t) = nullptr; // cuMemAlloc_v2
    cuda_abi::Result (*mem_free)(cuda_abi::DevicePtr) = nullptr; // cuMemFree_v2
    cuda_abi::Result (*mem_host_alloc)(void**, std::size_t, unsigned) = nullptr; // cuMemHostAlloc
    cuda_abi::Result (*mem_free_host)(void*) = nullptr; // cuMemFreeHost
    cuda_abi::Result (*memcpy_htod_async)(cuda_abi::DevicePtr, const void*, std::size_t,
        cuda_abi::Stream) = nullptr; // cuMemcpyHtoDAsync_v2
    cuda_abi::Result (*memcpy_dtoh_async)(void*, cuda_abi::DevicePtr, std::size_t,
        cuda_abi::Stream) = nullptr; // cuMemcpyDtoHAsync_v2
    cuda_abi::Result (*memcpy_dtod_async)(cuda_abi::DevicePtr, cuda_abi::DevicePtr, std::size_t,
        cuda_abi::Stream) = nullptr; // cuMemcpyDtoDAsync_v2
    cuda_abi::Result (*memcpy_peer_async)(cuda_abi::DevicePtr, cuda_abi::Context, cuda_abi::DevicePtr,
        cuda_abi::Context, std::size_t, cuda_abi::Stream) = nullptr; // cuMemcpyPeerAsync
    cuda_abi::Result (*stream_create)(cuda_abi::Stream*, unsigned) = nullptr; // cuStreamCreate
    cuda_abi::Result (*stream_destroy)(cuda_abi::Stream) = nullptr; // cuStreamDestroy_v2
    cuda_abi::Result (*stream_synchronize)(cuda_abi::Stream) = nullptr; // cuStreamSynchronize
    cuda_abi::Result (*event_create)(cuda_abi::Event*, unsigned) = nullptr; // cuEventCreate
    cuda_abi::Result (*event_record)(cuda_abi::Event, cuda_abi::Stream) = nullptr; // cuEventRecord
    cuda_abi::Result (*event_synchronize)(cuda_abi::Event) = nullptr; // cuEventSynchronize
    cuda_abi::Result (*event_elapsed_time)(float*, cuda_abi::Event, cuda_abi::Event) = nullptr; // cuEventElapsedTime
    cuda_abi::Result (*event_destroy)(cuda_abi::Event) = nullptr; // cuEventDestroy_v2
    cuda_abi::Result (*device_can_access_peer)(
        int*, cuda_abi::Device, cuda_abi::Device) = nullptr; // cuDeviceCanAccessPeer
    cuda_abi::Result (*ctx_enable_peer_access)(cuda_abi::Context, unsigned) = nullptr; // cuCtxEnablePeerAccess
};

/// The CUDA driver library (libcuda.so.1), loaded but not initialised: the driver's CUDA version
/// can be read without cuInit, so a driver that refuses to initialise still says which runtimes
/// it supports. Throws base::Error when the library is missing or lacks a required symbol; the
/// message names the file.
class Cuda {
public:
    /// Loads `GPUKIT_CUDA_LIBRARY` when set, else "libcuda.so.1".
    static Cuda load();
    static Cuda load(const std::string& file);

    /// cuInit(0). Throws base::Error naming the file and CUDA's own error text.
    void init() const;
    /// The CUDA version the driver supports, as cuDriverGetVersion encodes it (12040 = 12.4).
    /// Throws base::Error.
    int driver_version() const;
    /// Visible CUDA devices (cuDeviceGetCount); needs init(). Throws base::Error.
    int device_count() const;
    /// CUDA's error text for a result: "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected
    /// (CUDA error 100)".
    std::string describe(cuda_abi::Result rc) const;

    /// The first deep-tier symbol (CudaApi, "copies") the library lacks, or nullptr when it has
    /// them all.
    const char* missing_copy_symbol() const { return m_missing_copy_symbol; }

    /// Calls that must succeed: throws base::Error "<what> failed: <describe(rc)>".
    void check(cuda_abi::Result rc, const std::string& what) const;

    const CudaApi& api() const { return m_api; }
    const std::string& file() const { return m_library.file(); }

    /// The library file that load() would open.
    static std::string default_file();

    /// "12.4" for a CUDA version as the driver and runtime APIs encode it (1000 * major + 10 * minor).
    static std::string version_text(int version);

private:
    Cuda(DynamicLibrary library, CudaApi api, const char* missing_copy_symbol);

    DynamicLibrary m_library;
    CudaApi m_api;
    const char* m_missing_copy_symbol = nullptr;
};

} // namespace base
