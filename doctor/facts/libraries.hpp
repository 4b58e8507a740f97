#pragma once

// Which CUDA driver API libcuda.so.1 offers and which CUDA runtime, cuDNN, cuBLAS and NCCL the
// dynamic loader finds, with their versions (the "libraries" collector). For the libraries probe
// and fleet.

#include "doctor/facts/schema.hpp"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace doctor::facts {

/// libcuda.so.1 (or GPUKIT_CUDA_LIBRARY): loaded or not, cuDriverGetVersion's answer, cuInit's.
struct CudaDriverLibrary {
    std::optional<std::string> file; ///< the file loaded (or tried)
    std::optional<std::string> missing; ///< why it did not load: the probe then checks nothing
    std::optional<int> raw; ///< cuDriverGetVersion: 12040 for CUDA 12.4
    std::optional<std::string> version; ///< "12.4"
    std::optional<std::string> version_error; ///< cuDriverGetVersion failed
    std::optional<int> device_count; ///< cuDeviceGetCount after cuInit
    std::optional<std::string> init_error; ///< cuInit (or cuDeviceGetCount) failed

    /// The CUDA version the driver supports as a number (12040), from `raw` or else `version`.
    std::optional<int> supports() const;

    static constexpr auto fields()
    {
        return std::tuple{field("file", &CudaDriverLibrary::file), field("missing", &CudaDriverLibrary::missing),
            field("raw", &CudaDriverLibrary::raw), field("version", &CudaDriverLibrary::version),
            field("version_error", &CudaDriverLibrary::version_error),
            field("device_count", &CudaDriverLibrary::device_count),
            field("init_error", &CudaDriverLibrary::init_error)};
    }
};

/// One user-space library (CUDA runtime, cuDNN, cuBLAS, NCCL): the first file that loaded and its
/// version; or a file that loaded but could not say its version (`error`); or none (`missing`).
struct CudaLibrary {
    std::optional<std::string> file; ///< the file that loaded
    std::optional<std::string> version; ///< "9.1.0"; missing when the library was not usable
    std::optional<std::int64_t> raw; ///< the version call's number: cudnnGetVersion's 90100
    std::optional<std::string> error; ///< it loaded but lacks its version call, or the call failed
    std::optional<std::string> missing; ///< no file loaded: the loader's errors
    std::optional<std::vector<std::string>> tried; ///< the files tried, in order

    static constexpr auto fields()
    {
        return std::tuple{field("file", &CudaLibrary::file), field("version", &CudaLibrary::version),
            field("raw", &CudaLibrary::raw), field("error", &CudaLibrary::error, 0, Kind::text),
            field("missing", &CudaLibrary::missing, 0, Kind::text),
            list("tried", &CudaLibrary::tried, Ceilings::devices, "files tried")};
    }
};

/// The driver library and the four user-space libraries, each missing from facts that lack it.
struct LibrariesFacts {
    std::optional<std::string> ld_library_path; ///< LD_LIBRARY_PATH of the environment checked; null when unset
    std::optional<CudaDriverLibrary> cuda_driver;
    std::optional<CudaLibrary> cudart;
    std::optional<CudaLibrary> cudnn;
    std::optional<CudaLibrary> cublas;
    std::optional<CudaLibrary> nccl;

    static constexpr auto fields()
    {
        return std::tuple{field("ld_library_path", &LibrariesFacts::ld_library_path, 0, Kind::text),
            field("cuda_driver", &LibrariesFacts::cuda_driver), field("cudart", &LibrariesFacts::cudart),
            field("cudnn", &LibrariesFacts::cudnn), field("cublas", &LibrariesFacts::cublas),
            field("nccl", &LibrariesFacts::nccl)};
    }
};

/// The CUDA version in a version text ("12.4", "12.4.1", "12") as CUDA numbers it (12040).
inline std::optional<int> cuda_version_number(const std::string& text)
{
    const char* end = text.data() + text.size();
    int major = 0;
    int minor = 0;
    const auto [after_major, major_error] = std::from_chars(text.data(), end, major);
    if (major_error != std::errc() || major < 0 || major > 1000) {
        return std::nullopt;
    }
    if (after_major != end && *after_major == '.') {
        const auto [after_minor, minor_error] = std::from_chars(after_major + 1, end, minor);
        if (minor_error != std::errc() || minor < 0 || minor > 99) {
            return std::nullopt;
        }
    }
    return major * 1000 + minor * 10;
}

inline std::optional<int> CudaDriverLibrary::supports() const
{
    if (raw) {
        return raw;
    }
    return version ? cuda_version_number(*version) : std::nullopt;
}

} // namespace doctor::facts
