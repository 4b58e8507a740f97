#include "doctor/probes/gpu_facts.hpp"

#include <fmt/format.h>

namespace doctor::probes {

std::optional<std::string> gpus_unavailable(const Facts& facts)
{
    const auto* nvml = facts.nvml().get();
    if (nvml == nullptr) {
        return "the nvml facts were not collected";
    }
    if (nvml->nvml_loaded) {
        return std::nullopt;
    }
    const std::string error = nvml->nvml_error.value_or("NVML did not load");
    if (!nvml->driver_file) {
        return fmt::format(
            "no NVIDIA driver: /proc/driver/nvidia/version is absent and NVML is unavailable ({})", error);
    }
    return fmt::format("the NVIDIA driver is loaded but NVML is unavailable ({})", error);
}

std::string gpu_subject(const nlohmann::json& gpu)
{
    return fmt::format("gpu {} ({})", gpu.value("index", 0U), gpu.value("bus_id", std::string("?")));
}

std::string gpu_subject(const facts::NvmlGpu& gpu)
{
    return fmt::format("gpu {} ({})", gpu.index, gpu.bus_id);
}

} // namespace doctor::probes
