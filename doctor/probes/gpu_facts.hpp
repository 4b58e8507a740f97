#pragma once

#include "doctor/probes/table.hpp"

#include <optional>
#include <string>

/// Shared reading of the "nvml" facts for the probes that depend on GPUs.
namespace doctor::probes {

/// Why the GPUs cannot be looked at ("no NVIDIA driver: ..."), or nullopt when NVML answered.
std::optional<std::string> gpus_unavailable(const Facts& facts);

/// "gpu 3 (0000:47:00.0)" for a GPU of the nvml facts (or one a deep collector wrote as JSON).
std::string gpu_subject(const facts::NvmlGpu& gpu);
std::string gpu_subject(const nlohmann::json& gpu);

} // namespace doctor::probes
