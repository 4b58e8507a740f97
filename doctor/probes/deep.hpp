#pragma once

// What the deep tier's collectors and rules share: starting CUDA and writing rates.

#include "base/cuda.hpp"
#include "doctor/engine/probe.hpp"
#include "doctor/probes/gpu_facts.hpp"

#include <optional>
#include <string>

namespace doctor::probes {

/// CUDA loaded and initialised for a deep collector, or the reason there is nothing to measure:
/// no driver library (a CPU node), or no GPU (CUDA_ERROR_NO_DEVICE). Other failures of cuInit
/// are thrown: a GPU node whose driver will not start is an error, not a skip.
struct CudaStart {
    std::optional<base::Cuda> cuda;
    std::string skipped;
};
CudaStart start_cuda(const CollectContext& ctx);

/// The library file to load: the override variable in the collect context (GPUKIT_CUDA_LIBRARY,
/// GPUKIT_NCCL_LIBRARY), else the soname.
std::string library_file(const CollectContext& ctx, const char* variable, const char* soname);

/// "12.3" with one decimal, or three significant digits below 10 ("2.41").
std::string gbps_text(double gbps);

} // namespace doctor::probes
