#include "doctor/engine/gpu_scope.hpp"

#include "base/error.hpp"
#include "base/spelling.hpp"
#include "base/usage/sampler.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string>

namespace doctor::engine {

namespace {

// The GPUs of the nvml facts as the monitor's selection reads them.
std::vector<base::NvmlGpu> facts_gpus(const Facts& facts)
{
    std::vector<base::NvmlGpu> out;
    const auto* nvml = facts.nvml().get();
    if (nvml == nullptr || !nvml->gpus) {
        return out;
    }
    for (const auto& g : *nvml->gpus) {
        base::NvmlGpu gpu;
        gpu.index = g.index;
        gpu.bus_id = base::PciAddress::parse(g.bus_id).value_or(base::PciAddress{});
        gpu.name = g.name.value_or("");
        gpu.uuid = g.uuid.value_or("");
        out.push_back(gpu);
    }
    return out;
}

std::vector<unsigned> indexes_of(const std::vector<base::usage::MonitoredGpu>& chosen)
{
    std::vector<unsigned> out;
    for (const auto& g : chosen) {
        out.push_back(g.index);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool same_models(const std::vector<base::NvmlGpu>& all)
{
    return std::all_of(all.begin(), all.end(), [&](const base::NvmlGpu& g) { return g.name == all.front().name; });
}

// The environment's choice, or nullopt to judge every GPU (with `note` set when a variable was
// there but could not be applied).
GpuScope from_environment(const std::vector<base::NvmlGpu>& all, const std::map<std::string, std::string>& env)
{
    GpuScope scope;
    for (const char* name : {"GPURUN_GPU_BUS_ID", "CUDA_VISIBLE_DEVICES"}) {
        const auto it = env.find(name);
        if (it == env.end()) {
            continue;
        }
        const std::string from = fmt::format("{}={}", name, it->second);
        if (all.empty()) {
            scope.note = fmt::format("{} not applied: NVML lists no GPU here", from);
            return scope;
        }
        try {
            scope.gpus = indexes_of(base::usage::select_gpus(all, base::split_commas(it->second), name));
        } catch (const base::Error&) {
            scope.note = fmt::format("{} names no GPU of this node as NVML lists them: every GPU judged", from);
            return scope;
        }
        scope.from = from;
        const auto order = env.find("CUDA_DEVICE_ORDER");
        const bool by_index = it->second.find_first_not_of("0123456789,") == std::string::npos;
        if (std::string(name) == "CUDA_VISIBLE_DEVICES" && by_index && !same_models(all) &&
            (order == env.end() || order->second != "PCI_BUS_ID")) {
            scope.note = "CUDA numbers the GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; these indexes "
                         "are taken in NVML's (PCI) order";
        }
        return scope;
    }
    return scope;
}

} // namespace

GpuScope gpu_scope(const Facts& facts, const std::string& option, const std::map<std::string, std::string>* env)
{
    const auto all = facts_gpus(facts);
    if (!option.empty()) {
        GpuScope scope;
        if (all.empty()) {
            scope.note = fmt::format("--gpus {} not applied: the facts list no GPU", option);
            return scope;
        }
        scope.gpus = indexes_of(base::usage::select_gpus(all, base::split_commas(option), "--gpus"));
        scope.from = "--gpus " + option;
        return scope;
    }
    return env == nullptr ? GpuScope{} : from_environment(all, *env);
}

std::vector<unsigned> subject_gpus(std::string_view subject)
{
    std::vector<unsigned> out;
    constexpr std::string_view word = "gpu ";
    for (std::size_t at = subject.find(word); at != std::string_view::npos; at = subject.find(word, at + 1)) {
        const bool starts_word = at == 0 || !std::isalnum(static_cast<unsigned char>(subject[at - 1]));
        std::size_t end = at + word.size();
        unsigned value = 0;
        while (end < subject.size() && std::isdigit(static_cast<unsigned char>(subject[end])) && value < 100000) {
            value = value * 10 + static_cast<unsigned>(subject[end] - '0');
            ++end;
        }
        const bool digits = end > at + word.size();
        const bool ends_word = end == subject.size() || !std::isalnum(static_cast<unsigned char>(subject[end]));
        if (starts_word && digits && ends_word && std::find(out.begin(), out.end(), value) == out.end()) {
            out.push_back(value);
        }
    }
    return out;
}

void keep_in_scope(std::vector<ProbeResult>& results, const GpuScope& scope)
{
    if (scope.all()) {
        return;
    }
    auto outside = [&](const Finding& f) {
        const auto named = subject_gpus(f.subject);
        return std::any_of(named.begin(), named.end(),
            [&](unsigned i) { return !std::binary_search(scope.gpus.begin(), scope.gpus.end(), i); });
    };
    for (auto& r : results) {
        if (r.findings.empty()) {
            continue;
        }
        std::erase_if(r.findings, outside);
        if (r.findings.empty()) {
            r.findings.push_back({r.probe->name + ".skip", Severity::skip, "host",
                fmt::format("not judged: its findings are about GPUs outside {}", scope_line(scope)), "", nullptr});
        }
    }
}

std::string scope_line(const GpuScope& scope)
{
    std::string line;
    if (!scope.all()) {
        line = fmt::format("gpu{} {} ({})", scope.gpus.size() == 1 ? "" : "s", fmt::join(scope.gpus, ", "), scope.from);
    }
    if (!scope.note.empty()) {
        line += (line.empty() ? "" : "; ") + scope.note;
    }
    return line;
}

nlohmann::json scope_json(const GpuScope& scope)
{
    return {{"gpus", scope.all() ? nlohmann::json(nullptr) : nlohmann::json(scope.gpus)},
        {"from", scope.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(scope.from)},
        {"note", scope.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(scope.note)}};
}

} // namespace doctor::engine
