#include "doctor/facts/libraries.hpp"
#include "base/cuda.hpp"
#include "base/dynamic_library.hpp"
#include "base/error.hpp"
#include "base/nccl_allreduce.hpp"
#include "doctor/probes/table.hpp"

#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace doctor::probes {

namespace {

using facts::CudaDriverLibrary;
using facts::CudaLibrary;
using facts::LibrariesFacts;

/// A user-space CUDA library the probe looks for: the files tried in order (an env override
/// replaces them), and how its version is read once one of them loaded.
struct LibrarySpec {
    const char* key; ///< finding subject: "cudnn"
    std::optional<CudaLibrary> LibrariesFacts::*slot; ///< where its facts go
    const char* title; ///< "cuDNN"
    const char* override_env; ///< "GPUKIT_CUDNN_LIBRARY"
    std::vector<std::string> files;
    const char* symbol;
    /// Reads the version through `symbol` into `version` and `raw`, or throws base::Error.
    std::function<void(void*, CudaLibrary&)> read;
};

std::string join(const std::vector<std::string>& parts, const char* separator)
{
    std::string out;
    for (const auto& p : parts) {
        out += (out.empty() ? "" : separator) + p;
    }
    return out;
}

/// cuDNN's cudnnGetVersion(): major*1000+minor*100+patch before 9, major*10000+minor*100+patch
/// from 9 on (9.1.0 = 90100; 8.9.2 = 8902).
std::string cudnn_version_text(std::size_t v)
{
    if (v >= 90000) {
        return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
    }
    return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

std::vector<LibrarySpec> library_specs()
{
    std::vector<LibrarySpec> specs;
    specs.push_back({"cudart", &LibrariesFacts::cudart, "CUDA runtime", "GPUKIT_CUDART_LIBRARY",
        {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}, "cudaRuntimeGetVersion",
        [](void* symbol, CudaLibrary& lib) {
            auto fn = reinterpret_cast<int (*)(int*)>(symbol);
            int v = 0;
            if (int rc = fn(&v); rc != 0) {
                throw base::Error(fmt::format("cudaRuntimeGetVersion failed: cudaError {}", rc));
            }
            lib.version = base::Cuda::version_text(v);
            lib.raw = v;
        }});
    specs.push_back({"cudnn", &LibrariesFacts::cudnn, "cuDNN", "GPUKIT_CUDNN_LIBRARY",
        {"libcudnn.so", "libcudnn.so.9", "libcudnn.so.8"}, "cudnnGetVersion", [](void* symbol, CudaLibrary& lib) {
            auto fn = reinterpret_cast<std::size_t (*)()>(symbol);
            std::size_t v = fn();
            lib.version = cudnn_version_text(v);
            lib.raw = static_cast<std::int64_t>(v);
        }});
    specs.push_back({"cublas", &LibrariesFacts::cublas, "cuBLAS", "GPUKIT_CUBLAS_LIBRARY",
        {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}, "cublasGetProperty",
        [](void* symbol, CudaLibrary& lib) {
            // libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2
            auto fn = reinterpret_cast<int (*)(int, int*)>(symbol);
            int part[3] = {0, 0, 0};
            for (int type = 0; type < 3; ++type) {
                if (int rc = fn(type, &part[type]); rc != 0) {
                    throw base::Error(fmt::format("cublasGetProperty({}) failed: cublasStatus {}", type, rc));
                }
            }
            lib.version = fmt::format("{}.{}.{}", part[0], part[1], part[2]);
            lib.raw = part[0] * 10000 + part[1] * 100 + part[2];
        }});
    specs.push_back({"nccl", &LibrariesFacts::nccl, "NCCL", "GPUKIT_NCCL_LIBRARY", {"libnccl.so.2"}, "ncclGetVersion",
        [](void* symbol, CudaLibrary& lib) {
            auto fn = reinterpret_cast<int (*)(int*)>(symbol);
            int v = 0;
            if (int rc = fn(&v); rc != 0) {
                throw base::Error(fmt::format("ncclGetVersion failed: ncclResult {}", rc));
            }
            lib.version = base::nccl_version_text(v);
            lib.raw = v;
        }});
    return specs;
}

/// The first file of `spec` that loads and answers its version call: file, version and raw; file
/// and error when a file loaded but could not say its version; missing (the loader's errors) when
/// none loaded. Always with the files tried.
CudaLibrary find_library(const LibrarySpec& spec, const CollectContext& ctx)
{
    std::vector<std::string> files = spec.files;
    if (const char* forced = ctx.getenv(spec.override_env); forced != nullptr && *forced != '\0') {
        files = {forced};
    }
    std::vector<std::string> not_loaded;
    std::optional<CudaLibrary> unusable;
    for (const auto& file : files) {
        try {
            base::DynamicLibrary library(file);
            void* symbol = library.find(spec.symbol);
            if (symbol == nullptr) {
                if (!unusable) {
                    unusable.emplace();
                    unusable->file = file;
                    unusable->error = fmt::format("{} lacks {}", file, spec.symbol);
                }
                continue;
            }
            CudaLibrary out;
            spec.read(symbol, out);
            out.file = file;
            out.tried = files;
            return out;
        } catch (const base::Error& e) {
            not_loaded.push_back(e.what());
        }
    }
    if (unusable) {
        unusable->tried = files;
        return *unusable;
    }
    CudaLibrary out;
    out.missing = join(not_loaded, "; ");
    out.tried = files;
    return out;
}

CudaDriverLibrary cuda_driver_facts(const CollectContext& ctx)
{
    std::string file = base::Cuda::default_file();
    if (const char* forced = ctx.getenv("GPUKIT_CUDA_LIBRARY"); forced != nullptr && *forced != '\0') {
        file = forced;
    }
    CudaDriverLibrary out;
    out.file = file;
    std::optional<base::Cuda> cuda;
    try {
        cuda.emplace(base::Cuda::load(file));
    } catch (const base::Error& e) {
        out.missing = e.what();
        return out;
    }
    try {
        const int v = cuda->driver_version();
        out.raw = v;
        out.version = base::Cuda::version_text(v);
    } catch (const base::Error& e) {
        out.version_error = e.what();
    }
    try {
        cuda->init();
        out.device_count = cuda->device_count();
    } catch (const base::Error& e) {
        out.init_error = e.what();
    }
    return out;
}

/// "CUDA runtime 12.4 (libcudart.so.12)" for a found library.
std::string found_text(const LibrarySpec& spec, const CudaLibrary& lib)
{
    return fmt::format("{} {} ({})", spec.title, lib.version.value_or("?"), lib.file.value_or("?"));
}

std::string summary_of_found(const LibrariesFacts& facts)
{
    std::vector<std::string> found;
    for (const auto& spec : library_specs()) {
        if (const auto& lib = facts.*spec.slot; lib && lib->version) {
            found.push_back(found_text(spec, *lib));
        }
    }
    return found.empty() ? "" : fmt::format("; found {}", join(found, ", "));
}

void judge_library(const LibrarySpec& spec, const std::optional<CudaLibrary>& found, const CudaDriverLibrary& driver,
    const Policy& policy, Findings& out)
{
    const std::string subject = spec.key;
    CudaLibrary lib;
    if (found) {
        lib = *found;
    } else {
        lib.missing = "no facts";
    }
    const nlohmann::json written = facts::write(lib);
    if (lib.missing) {
        out.add("libraries.not_found", subject,
            fmt::format("{} not found ({}): not checked; frameworks such as PyTorch and TensorFlow often "
                        "bundle their own copy, so this matters only for programs that use the system's",
                spec.title, *lib.missing),
            written);
        return;
    }
    if (!lib.version) {
        nlohmann::json with_remedy = written;
        with_remedy["file"] = lib.file.value_or("?");
        with_remedy["library"] = spec.title;
        with_remedy["override"] = spec.override_env;
        out.add("libraries.unusable", subject,
            fmt::format("{} could not say its version: {}", spec.title, lib.error.value_or("?")), with_remedy);
        return;
    }
    const std::string key = spec.key;
    const std::string& version = *lib.version;
    if (key == "cudart") {
        const std::optional<int> supported = driver.supports();
        std::optional<std::int64_t> runtime = lib.raw;
        if (!runtime) {
            if (const auto number = facts::cuda_version_number(version)) {
                runtime = *number;
            }
        }
        if (!supported || !runtime) {
            out.add("libraries.runtime_not_compared", subject,
                fmt::format("{}: not compared with the driver: {}", found_text(spec, lib),
                    !supported ? "the CUDA version the driver supports is not known"
                               : "its version is not a CUDA version"),
                {{"cudart", written}, {"cuda_driver", facts::write(driver)}});
            return;
        }
        const std::string driver_version = base::Cuda::version_text(*supported);
        if (*runtime > *supported) {
            // Across major versions nothing built with the runtime starts; within one major version
            // CUDA's minor version compatibility keeps most programs working (PTX JIT and newer APIs
            // fail), so that is a warning.
            const bool same_major = *runtime / 1000 == *supported / 1000;
            out.add(same_major ? "libraries.runtime_newer_minor" : "libraries.runtime_newer_than_driver", subject,
                fmt::format("CUDA runtime {} ({}) is newer than this driver supports (CUDA {}){}", version,
                    lib.file.value_or("?"), driver_version,
                    same_major ? ": minor version compatibility runs most programs, but PTX JIT and newer APIs fail"
                               : ": programs built with it fail with 'CUDA driver version is insufficient'"),
                {{"cudart", written}, {"cuda_driver", facts::write(driver)}, {"driver_supports", driver_version}});
            return;
        }
        out.add("libraries.cudart", subject,
            fmt::format("{}; the driver supports CUDA {}", found_text(spec, lib), driver_version), written);
        return;
    }
    if (key == "cudnn" && compare_versions(version, policy.min_cudnn) < 0) {
        out.add("libraries.cudnn_too_old", subject,
            fmt::format("{} is older than {} (policy libraries.min_cudnn)", found_text(spec, lib), policy.min_cudnn),
            {{"cudnn", written}, {"min", policy.min_cudnn}});
        return;
    }
    if (key == "nccl" && compare_versions(version, policy.min_nccl) < 0) {
        out.add("libraries.nccl_too_old", subject,
            fmt::format("{} is older than {} (policy libraries.min_nccl)", found_text(spec, lib), policy.min_nccl),
            {{"nccl", written}, {"min", policy.min_nccl}});
        return;
    }
    out.add("libraries." + key, subject, found_text(spec, lib), written);
}

/// The CUDA version the driver supports as text: "12.4".
std::string driver_version_text(const CudaDriverLibrary& driver)
{
    return driver.version ? *driver.version : driver.raw ? base::Cuda::version_text(*driver.raw) : "?";
}

/// Why the driver library cannot be judged (it did not load, or the facts say nothing of it), or
/// nullopt when they tell its version or an error.
std::optional<std::string> no_driver(const std::optional<CudaDriverLibrary>& driver)
{
    if (!driver) {
        return "no facts";
    }
    if (driver->missing) {
        return *driver->missing;
    }
    if (!driver->raw && !driver->version && !driver->version_error && !driver->init_error) {
        return "the facts give neither its version nor an error";
    }
    return std::nullopt;
}

} // namespace

// Which CUDA driver API version libcuda.so.1 offers, and which CUDA runtime, cuDNN, cuBLAS and
// NCCL the dynamic loader finds (env overrides first, then the usual sonames), with their versions.
Collector libraries_collector()
{
    return {"libraries", [](const CollectContext& ctx) {
                LibrariesFacts out;
                if (const char* path = ctx.getenv("LD_LIBRARY_PATH")) {
                    out.ld_library_path = path;
                }
                out.cuda_driver = cuda_driver_facts(ctx);
                for (const auto& spec : library_specs()) {
                    out.*spec.slot = find_library(spec, ctx);
                }
                return facts::write(out);
            }};
}

Probe libraries_probe()
{
    Probe p;
    p.name = "libraries";
    p.summary = "CUDA driver API, CUDA runtime, cuDNN, cuBLAS and NCCL versions; runtime not newer than the driver";
    p.collectors = {"libraries"};
    p.codes = {
        {"libraries.cuda_driver", Severity::pass, "the CUDA driver library answers",
            "libcuda.so.1 (or GPUKIT_CUDA_LIBRARY) loaded, cuInit succeeded and cuDriverGetVersion says which CUDA "
            "version the driver supports.",
            ""},
        {"libraries.no_cuda_driver", Severity::skip, "no CUDA driver library: the libraries were not checked",
            "libcuda.so.1 comes with the NVIDIA driver; without it no CUDA program can run and the runtime cannot be "
            "compared with a driver. The libraries probe is skipped (the driver probe says why there is no driver).",
            "install the NVIDIA driver, or start the container with the NVIDIA runtime so libcuda.so.1 is mounted"},
        {"libraries.cuda_init_failed", Severity::fail, "the CUDA driver library does not initialise",
            "cuInit(0) (or cuDriverGetVersion) failed, so CUDA programs cannot use the GPUs. CUDA_ERROR_NO_DEVICE "
            "with working NVML usually means CUDA_VISIBLE_DEVICES hides every GPU or /dev/nvidia* cannot be opened; "
            "CUDA_ERROR_STUB_LIBRARY means the toolkit's stub libcuda.so is found before the driver's; a version "
            "mismatch means the user-space driver does not match the kernel module.",
            "check CUDA_VISIBLE_DEVICES, permissions on /dev/nvidia*, that libcuda.so.1 is the driver's (not the "
            "toolkit's stubs directory), and reboot after a driver upgrade",
            Severity::skip},
        {"libraries.cudart", Severity::pass, "the CUDA runtime is found and the driver supports it",
            "libcudart was found on the library path and its version is not newer than the CUDA version the driver "
            "supports.",
            ""},
        {"libraries.runtime_newer_than_driver", Severity::fail,
            "the CUDA runtime is a newer major version than the driver supports",
            "cudaRuntimeGetVersion is a newer major version than cuDriverGetVersion: programs built with this "
            "runtime fail with 'CUDA driver version is insufficient for CUDA runtime version'.",
            "upgrade the NVIDIA driver, or use a CUDA runtime of {driver_supports} or older (or the cuda-compat "
            "package of the runtime's version, on data-centre GPUs)"},
        {"libraries.runtime_newer_minor", Severity::warn,
            "the CUDA runtime is a newer minor version than the driver supports",
            "cudaRuntimeGetVersion is greater than cuDriverGetVersion within one major version. CUDA's minor version "
            "compatibility runs most programs, but JIT compilation of newer PTX and APIs newer than the driver "
            "fail.",
            "upgrade the NVIDIA driver, or use a CUDA runtime of {driver_supports} or older (or the cuda-compat "
            "package of the runtime's version, on data-centre GPUs)"},
        {"libraries.runtime_not_compared", Severity::skip, "the CUDA runtime was not compared with the driver",
            "libcudart was found, but the CUDA version the driver supports is not known (cuDriverGetVersion failed, or "
            "the facts do not give it), so whether the driver runs programs built with this runtime was not checked.",
            ""},
        {"libraries.cudnn", Severity::pass, "cuDNN is found and recent enough",
            "libcudnn was found and cudnnGetVersion is at least the policy's libraries.min_cudnn.", ""},
        {"libraries.cudnn_too_old", Severity::warn, "cuDNN is older than the policy allows",
            "Older cuDNN releases lack kernels and fixes that current frameworks expect.",
            "install cuDNN {min} or newer, or lower libraries.min_cudnn in the policy"},
        {"libraries.cublas", Severity::pass, "cuBLAS is found",
            "libcublas was found and cublasGetProperty says its version.", ""},
        {"libraries.nccl", Severity::pass, "NCCL is found and recent enough",
            "libnccl.so.2 (or GPUKIT_NCCL_LIBRARY) was found and ncclGetVersion is at least the policy's "
            "libraries.min_nccl.",
            ""},
        {"libraries.nccl_too_old", Severity::warn, "NCCL is older than the policy allows",
            "Older NCCL releases lack transports (NVLS, CUMEM) and fixes for hangs and performance.",
            "install NCCL {min} or newer (libnccl2), or lower libraries.min_nccl in the policy"},
        {"libraries.not_found", Severity::skip, "a CUDA library was not found: not checked",
            "The dynamic loader found no file of this library (its env override, the library path, ld.so.cache). "
            "That is not a fault in itself: frameworks such as PyTorch and TensorFlow often bundle their own copies. "
            "It matters for programs that use the system's.",
            "install the library or add its directory to LD_LIBRARY_PATH, if your programs use the system's copy"},
        {"libraries.unusable", Severity::warn, "a CUDA library loaded but could not say its version",
            "A file with the library's name loaded but lacks the version function or its call failed: a stub, a "
            "broken install or another library under that name.",
            "check that {file} is a real {library} library (not a stub or a broken link), or point {override} at the "
            "right file"},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const LibrariesFacts& f = *facts.libraries().get();
        if (const auto why = no_driver(f.cuda_driver)) {
            out.add("libraries.no_cuda_driver", "libcuda",
                fmt::format("no CUDA driver library ({}): libraries not checked{}", *why, summary_of_found(f)),
                facts::write(f));
            return;
        }
        const CudaDriverLibrary& driver = *f.cuda_driver;
        if (driver.version_error || driver.init_error) {
            const std::string why = driver.version_error ? *driver.version_error : *driver.init_error;
            // On a node that is meant to have no GPU, cuInit's CUDA_ERROR_NO_DEVICE is the expected answer.
            const bool cpu_node = policy.expect_gpus && *policy.expect_gpus == 0;
            out.add(cpu_node ? Severity::skip : Severity::fail, "libraries.cuda_init_failed", "libcuda",
                fmt::format("{}{}", why,
                    driver.version || driver.raw
                        ? fmt::format(" (the driver supports CUDA {})", driver_version_text(driver))
                        : ""),
                facts::write(driver));
        } else {
            const std::string devices = driver.device_count
                ? fmt::format("{} device{}", *driver.device_count, *driver.device_count == 1 ? "" : "s")
                : std::string("device count not recorded");
            out.add("libraries.cuda_driver", "libcuda",
                fmt::format(
                    "CUDA driver API {} ({}), {}", driver_version_text(driver), driver.file.value_or("?"), devices),
                facts::write(driver));
        }
        for (const auto& spec : library_specs()) {
            judge_library(spec, f.*spec.slot, driver, policy, out);
        }
    };
    return p;
}

} // namespace doctor::probes
