#pragma once

#include "probes/dynamic_library.hpp"

#include <string>

namespace probes {

/// The slice of the CUDA driver API (cuda.h) this project calls, declared here so the build needs
/// no CUDA headers.
namespace cuda_abi {
using Result = int;
constexpr Result success = 0;
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
};

/// The CUDA driver library (libcuda.so.1), loaded but not initialised: the driver's CUDA version
/// can be read without cuInit, so a driver that refuses to initialise still says which runtimes
/// it supports. Throws probes::Error when the library is missing or lacks a required symbol; the
/// message names the file.
class Cuda {
public:
    /// Loads `GPUKIT_CUDA_LIBRARY` when set, else "libcuda.so.1".
    static Cuda load();
    static Cuda load(const std::string& file);

    /// cuInit(0). Throws probes::Error naming the file and CUDA's own error text.
    void init() const;
    /// The CUDA version the driver supports, as cuDriverGetVersion encodes it (12040 = 12.4).
    /// Throws probes::Error.
    int driver_version() const;
    /// Visible CUDA devices (cuDeviceGetCount); needs init(). Throws probes::Error.
    int device_count() const;
    /// CUDA's error text for a result: "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected
    /// (CUDA error 100)".
    std::string describe(cuda_abi::Result rc) const;

    const CudaApi& api() const { return m_api; }
    const std::string& file() const { return m_library.file(); }

    /// The library file that load() would open.
    static std::string default_file();

    /// "12.4" for a CUDA version as the driver and runtime APIs encode it (1000 * major + 10 * minor).
    static std::string version_text(int version);

private:
    Cuda(DynamicLibrary library, CudaApi api);

    DynamicLibrary m_library;
    CudaApi m_api;
};

} // namespace probes
