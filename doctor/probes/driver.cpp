#include "doctor/probes/checks.hpp"
#include "doctor/probes/gpu_facts.hpp"

#include <fmt/format.h>

namespace doctor::probes {

namespace {

std::string cuda_text(int v)
{
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

} // namespace

Probe driver_probe()
{
    Probe p;
    p.name = "driver";
    p.summary = "NVIDIA driver loaded, its version against the policy, kernel module and NVML agree";
    p.collectors = {"nvml"};
    p.codes = {
        {"driver.ok", "the NVIDIA driver is loaded and recent enough",
            "The kernel module and NVML answer and the "
            "driver is at least the policy's min_version.",
            ""},
        {"driver.missing", "no NVIDIA driver",
            "Neither /proc/driver/nvidia/version nor libnvidia-ml.so.1 is there: the NVIDIA kernel driver is not "
            "installed or not loaded, or this container was started without the GPU runtime.",
            "install the NVIDIA driver (or start the container with --gpus / the NVIDIA container toolkit); on a CPU "
            "node pass --expect-gpus 0"},
        {"driver.none_expected", "no NVIDIA driver, as expected", "The policy expects no GPUs on this node.", ""},
        {"driver.nvml_unavailable", "the driver is loaded but NVML is not usable",
            "The kernel module answers but libnvidia-ml.so.1 cannot be loaded or initialised; a user-space "
            "library that does not match the kernel module ('Driver/library version mismatch') is the usual cause.",
            "install the driver's user-space libraries of the same version as the kernel module, or reboot after a "
            "driver upgrade"},
        {"driver.mismatch", "kernel module and user-space driver versions differ",
            "The kernel module reports one version and NVML another: a driver upgrade without a reboot or a "
            "container with other driver libraries. CUDA programs may fail to start.",
            "reboot after the driver upgrade, or make the container use the host's driver libraries"},
        {"driver.too_old", "the NVIDIA driver is older than the policy allows",
            "Older drivers lack fixes and support only older CUDA runtimes.",
            "upgrade the NVIDIA driver, or lower driver.min_version in the policy"},
    };
    p.judge = [](const Facts& facts, const Policy& policy) {
        std::vector<Finding> out;
        const auto& nvml = *collector_facts(facts, "nvml");
        const bool have_file = !nvml["driver_file"].is_null();
        const bool loaded = nvml.value("nvml_loaded", false);
        if (!have_file && !loaded) {
            if (policy.expect_gpus && *policy.expect_gpus == 0) {
                out.push_back({"driver.none_expected", Severity::pass, "host",
                    "no NVIDIA driver, and the policy expects no GPUs", "", nullptr});
            } else {
                out.push_back({"driver.missing", Severity::fail, "host", *gpus_unavailable(facts),
                    "install the NVIDIA driver (or start the container with the NVIDIA runtime); on a "
                    "CPU node pass --expect-gpus 0",
                    {{"nvml_error", nvml.value("nvml_error", "")}}});
            }
            return out;
        }
        if (!loaded) {
            out.push_back({"driver.nvml_unavailable", Severity::fail, "host", *gpus_unavailable(facts),
                "install the user-space driver libraries that match the kernel module, or reboot after "
                "the driver upgrade",
                {{"driver_file", nvml["driver_file"]}}});
            return out;
        }
        const std::string version = nvml.value("driver_version", std::string());
        const std::string module = nvml.value("kernel_module_version", std::string());
        if (!module.empty() && !version.empty() && module != version) {
            out.push_back({"driver.mismatch", Severity::fail, "host",
                fmt::format("kernel module {} but NVML reports driver {}", module, version),
                "reboot after the driver upgrade, or use the host's driver libraries in the container",
                {{"kernel_module_version", module}, {"driver_version", version}}});
        }
        if (!version.empty() && compare_versions(version, policy.min_driver) < 0) {
            out.push_back({"driver.too_old", Severity::fail, "host",
                fmt::format("driver {} is older than {} (policy driver.min_version)", version, policy.min_driver),
                "upgrade the NVIDIA driver", {{"driver_version", version}, {"min", policy.min_driver}}});
        }
        if (out.empty()) {
            std::string cuda = nvml.contains("cuda_driver_version")
                ? fmt::format(", supports CUDA {}", cuda_text(nvml["cuda_driver_version"].get<int>()))
                : "";
            out.push_back({"driver.ok", Severity::pass, "host",
                fmt::format("NVIDIA driver {}{}", version.empty() ? "(version unknown)" : version, cuda), "",
                {{"driver_version", version}, {"cuda_driver_version", nvml.value("cuda_driver_version", 0)}}});
        }
        return out;
    };
    return p;
}

} // namespace doctor::probes
