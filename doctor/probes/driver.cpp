#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"

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
        {"driver.ok", Severity::pass, "the NVIDIA driver is loaded and recent enough",
            "The kernel module and NVML answer and the "
            "driver is at least the policy's min_version.",
            ""},
        {"driver.missing", Severity::fail, "no NVIDIA driver",
            "Neither /proc/driver/nvidia/version nor libnvidia-ml.so.1 is there: the NVIDIA kernel driver is not "
            "installed or not loaded, or this container was started without the GPU runtime.",
            "install the NVIDIA driver (or start the container with --gpus / the NVIDIA container toolkit); on a CPU "
            "node pass --expect-gpus 0"},
        {"driver.none_expected", Severity::pass, "no NVIDIA driver, as expected",
            "The policy expects no GPUs on this node.", ""},
        {"driver.nvml_unavailable", Severity::fail, "the driver is loaded but NVML is not usable",
            "The kernel module answers but libnvidia-ml.so.1 cannot be loaded or initialised; a user-space "
            "library that does not match the kernel module ('Driver/library version mismatch') is the usual cause.",
            "install the driver's user-space libraries of the same version as the kernel module, or reboot after a "
            "driver upgrade"},
        {"driver.mismatch", Severity::fail, "kernel module and user-space driver versions differ",
            "The kernel module reports one version and NVML another: a driver upgrade without a reboot or a "
            "container with other driver libraries. CUDA programs may fail to start.",
            "reboot after the driver upgrade, or make the container use the host's driver libraries"},
        {"driver.too_old", Severity::fail, "the NVIDIA driver is older than the policy allows",
            "Older drivers lack fixes and support only older CUDA runtimes.",
            "upgrade the NVIDIA driver, or lower driver.min_version in the policy"},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const facts::NvmlFacts& nvml = *facts.nvml().get();
        if (!nvml.driver_file && !nvml.nvml_loaded) {
            if (policy.expect_gpus && *policy.expect_gpus == 0) {
                out.add("driver.none_expected", "host", "no NVIDIA driver, and the policy expects no GPUs");
            } else {
                out.add(
                    "driver.missing", "host", *gpus_unavailable(facts), {{"nvml_error", nvml.nvml_error.value_or("")}});
            }
            return;
        }
        if (!nvml.nvml_loaded) {
            out.add("driver.nvml_unavailable", "host", *gpus_unavailable(facts), {{"driver_file", *nvml.driver_file}});
            return;
        }
        const std::string version = nvml.driver_version.value_or("");
        const std::string module = nvml.kernel_module_version.value_or("");
        if (!module.empty() && !version.empty() && module != version) {
            out.add("driver.mismatch", "host",
                fmt::format("kernel module {} but NVML reports driver {}", module, version),
                {{"kernel_module_version", module}, {"driver_version", version}});
        }
        if (!version.empty() && compare_versions(version, policy.min_driver) < 0) {
            out.add("driver.too_old", "host",
                fmt::format("driver {} is older than {} (policy driver.min_version)", version, policy.min_driver),
                {{"driver_version", version}, {"min", policy.min_driver}});
        }
        if (out.empty()) {
            const std::string cuda =
                nvml.cuda_driver_version ? fmt::format(", supports CUDA {}", cuda_text(*nvml.cuda_driver_version)) : "";
            out.add("driver.ok", "host",
                fmt::format("NVIDIA driver {}{}", version.empty() ? "(version unknown)" : version, cuda),
                {{"driver_version", version}, {"cuda_driver_version", nvml.cuda_driver_version.value_or(0)}});
        }
    };
    return p;
}

} // namespace doctor::probes
