#pragma once

#include "doctor/probes/checks.hpp"

#include <optional>
#include <string>

/// Shared reading of the "nvml" facts for the probes that depend on GPUs.
namespace doctor::probes {

/// Why the GPUs cannot be looked at ("no NVIDIA driver: ..."), or nullopt when NVML answered.
std::optional<std::string> gpus_unavailable(const Facts& facts);

/// "gpu 3 (0000:47:00.0)" for a GPU object of the nvml facts.
std::string gpu_subject(const nlohmann::json& gpu);

/// A skip finding for a probe that needs GPUs when there are none to look at.
Finding skip_without_gpus(const std::string& probe, const std::string& why);

} // namespace doctor::probes
