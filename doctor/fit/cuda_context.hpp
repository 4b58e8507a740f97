#pragma once

// gpudoctor fit --cuda-context measure: the CUDA context a framework makes on this node's GPUs,
// measured instead of taken from the default. The framework's interpreter starts CUDA on one GPU
// of each model (share/gpukit/cuda_context.py) while NVML's used memory of that GPU is sampled;
// the context is what it rose by, less the framework allocator's own pool.

#include "doctor/fit/model.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doctor::fit {

/// One GPU's measurement.
struct ContextMeasurement {
    unsigned index = 0; ///< the GPU's NVML index
    std::string gpu; ///< its name, as NVML gives it
    std::uint64_t bytes = 0; ///< the context: peak − before − reserved
    std::uint64_t before = 0; ///< the GPU's used memory before the interpreter started
    std::uint64_t peak = 0; ///< the most it used while the interpreter ran
    std::uint64_t reserved = 0; ///< the framework allocator's pool, as the script said
};

/// Measures the context of `framework` on one GPU of each model among `indexes` (NVML indexes),
/// one GPU at a time, each run given `timeout`; `python` is the interpreter, and the script says
/// it holds its context by printing GPUKIT_RESERVED_BYTES=<its allocator's pool>. Throws
/// base::Unavailable, saying what to give instead, when NVML cannot be read, the interpreter
/// fails, times out or says nothing, or NVML saw no rise.
std::vector<ContextMeasurement> measure_cuda_contexts(Framework framework, const std::vector<unsigned>& indexes,
    const std::string& python, std::chrono::milliseconds timeout);

} // namespace doctor::fit
