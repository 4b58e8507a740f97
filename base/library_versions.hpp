#pragma once

// What `gpurun --version` and `gpudoctor --version` say besides their own version: the hwloc they
// were built with and run against, and, where found, the NVIDIA driver and NCCL.

#include <chrono>
#include <string>

namespace base {

/// The libraries a gpukit program runs against. A GPU library that is missing or unusable has an
/// empty version and a note saying why; that is not an error.
struct LibraryVersions {
    std::string hwloc_built; ///< the hwloc release the program was compiled with (HWLOC_VERSION)
    unsigned hwloc_built_api = 0; ///< HWLOC_API_VERSION, e.g. 0x20800
    unsigned hwloc_runtime_api = 0; ///< hwloc_get_api_version() of the library loaded now
    std::string driver; ///< NVIDIA driver version from NVML ("550.54.15"), or ""
    std::string driver_note; ///< why not: "not found (libnvidia-ml.so.1)", "no answer in 3 s", ...
    std::string nccl; ///< "2.21.5", or ""
    std::string nccl_note;
    std::string data_dir; ///< the installed share/gpukit beside this program's bin/, or "" when absent
};

/// Where an installed gpukit keeps its data (topologies, examples, policy.toml, slurm/): found from
/// this program's own location, /proc/self/exe's directory + "/../share/gpukit", never from a path
/// fixed at build time, so a relocated prefix works. "" when that directory does not exist (a
/// build tree).
std::string installed_data_dir();

/// hwloc's API version number as text: 0x00020800 is "2.8.0".
std::string hwloc_api_text(unsigned api_version);

/// Reads the versions. NVML and NCCL (GPUKIT_NVML_LIBRARY, GPUKIT_NCCL_LIBRARY) are loaded in a
/// child process: a wedged driver that hangs in nvmlInit, or a library that crashes, costs at most
/// `deadline` and becomes a note. Only nvmlInit, nvmlSystemGetDriverVersion and ncclGetVersion
/// are called. Never throws.
LibraryVersions library_versions(std::chrono::milliseconds deadline = std::chrono::seconds(3));

/// The --version text: "PROGRAM (gpukit) VERSION", one line per library, and the data directory
/// when there is one.
std::string version_text(const std::string& program, const std::string& version, const LibraryVersions& libraries);

} // namespace base
