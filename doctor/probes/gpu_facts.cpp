#include "doctor/probes/gpu_facts.hpp"

#include <fmt/format.h>

namespace doctor::probes {

std::optional<std::string> gpus_unavailable(const Facts& facts)
{
    const auto* nvml = collector_facts(facts, "nvml");
    if (nvml == nullptr) {
        return "the nvml facts were not collected";
    }
    if (nvml->value("nvml_loaded", false)) {
        return std::nullopt;
    }
    const std::string error = nvml->value("nvml_error", std::string("NVML did not load"));
    if ((*nvml)["driver_file"].is_null()) {
        return fmt::format(
            "no NVIDIA driver: /proc/driver/nvidia/version is absent and NVML is unavailable ({})", error);
    }
    return fmt::format("the NVIDIA driver is loaded but NVML is unavailable ({})", error);
}

std::string gpu_subject(const nlohmann::json& gpu)
{
    return fmt::format("gpu {} ({})", gpu.value("index", 0U), gpu.value("bus_id", std::string("?")));
}

Finding skip_without_gpus(const std::string& probe, const std::string& why)
{
    return {probe + ".skip", Severity::skip, "host", fmt::format("not checked: {}", why), "", nullptr};
}

} // namespace doctor::probes
