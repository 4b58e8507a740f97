#include "doctor/fit/cuda_context.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/nvml.hpp"
#include "base/process.hpp"
#include "base/python.hpp"
#include "doctor/fit/gpu_memory.hpp"
#include "doctor/fit/search.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <string_view>

namespace doctor::fit {

namespace {

// share/gpukit/cuda_context.py, compiled in as `cuda_context_py`.
#include "share/cuda_context_py.inc"

// The last line the interpreter printed, quoted for a message.
std::string last_words(const std::string& output)
{
    const std::string line = last_lines(output, 1);
    return line.empty() ? "no output" : base::quote_input(line);
}

std::string instead()
{
    return "give the context as measured with --cuda-context SIZE (nvidia-smi's memory for the process after "
           "torch.cuda.init())";
}

ContextMeasurement measure_one(
    Framework framework, const base::NvmlGpu& gpu, const std::string& python, std::chrono::milliseconds timeout)
{
    const std::string what = fmt::format("--cuda-context measure on GPU {} ({})", gpu.index, gpu.name);
    auto env = base::environment();
    // NVML numbers the GPUs in PCI order; CUDA too with this (its default is fastest first).
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid.empty() ? std::to_string(gpu.index) : gpu.uuid;
    env.emplace("TF_CPP_MIN_LOG_LEVEL", "2"); // TensorFlow's start-up chatter; the user's value stays
    const std::vector<std::string> argv = {python, "-c", cuda_context_py, to_string(framework)};

    GpuMemorySampler sampler({gpu.index}, std::chrono::milliseconds(50));
    base::CommandResult ran;
    try {
        ran = base::run_command(argv, timeout, env);
    } catch (const base::Error& e) {
        throw base::Unavailable(fmt::format("{}: {}; {}", what, e.what(), instead()));
    }
    sampler.stop();
    if (ran.timed_out) {
        throw base::Unavailable(fmt::format("{}: {} did not finish in {} s (last: {}); {}", what, python,
            std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), last_words(ran.output), instead()));
    }
    std::optional<std::uint64_t> reserved;
    try {
        reserved = read_memory_report(ran.output).reserved_bytes;
    } catch (const base::Error& e) {
        throw base::Unavailable(fmt::format("{}: {}", what, e.what()));
    }
    if (ran.exit_code != 0 || !reserved) {
        throw base::Unavailable(fmt::format("{}: {} -c <script> {} stopped before holding a context: {}{} (last: "
                                            "{}); {}",
            what, python, to_string(framework), exit_text(ran.exit_code),
            ran.exit_code == 0 ? " without its GPUKIT_RESERVED_BYTES line" : "", last_words(ran.output), instead()));
    }
    if (!sampler.first_bytes() || !sampler.peak_bytes()) {
        throw base::Unavailable(fmt::format("{}: NVML gave no used memory for it; {}", what, instead()));
    }
    ContextMeasurement m;
    m.index = gpu.index;
    m.gpu = gpu.name;
    m.before = *sampler.first_bytes();
    m.peak = *sampler.peak_bytes();
    m.reserved = *reserved;
    if (m.peak <= m.before || m.peak - m.before <= m.reserved) {
        throw base::Unavailable(fmt::format("{}: NVML saw the GPU's used memory go from {} to at most {} while {} "
                                            "held {} of its own: no context on this GPU (is it the one "
                                            "CUDA_VISIBLE_DEVICES names?); {}",
            what, base::format_bytes(m.before), base::format_bytes(m.peak), to_string(framework),
            base::format_bytes(m.reserved), instead()));
    }
    m.bytes = m.peak - m.before - m.reserved;
    return m;
}

} // namespace

std::vector<ContextMeasurement> measure_cuda_contexts(Framework framework, const std::vector<unsigned>& indexes,
    const std::string& python, std::chrono::milliseconds timeout)
{
    std::vector<base::NvmlGpu> found;
    try {
        const base::CallDeadline deadline = nvml_deadline();
        found = base::Nvml::load().gpus();
    } catch (const base::Error& e) {
        throw base::Unavailable(fmt::format("--cuda-context measure: cannot read NVML ({}); {}", e.what(), instead()));
    }
    // One GPU of each model: the context follows the model (its SMs' local memory) and the
    // software, which is the same for all of them here. Not one split into MIG instances, whose
    // use NVML does not give as one GPU's.
    auto fitted = [&](const base::NvmlGpu& gpu) {
        return std::find(indexes.begin(), indexes.end(), gpu.index) != indexes.end();
    };
    std::vector<ContextMeasurement> out;
    std::vector<std::string> measured;
    for (const auto& gpu : found) {
        if (!fitted(gpu) || std::find(measured.begin(), measured.end(), gpu.name) != measured.end()) {
            continue;
        }
        measured.push_back(gpu.name);
        const auto whole = std::find_if(found.begin(), found.end(),
            [&](const base::NvmlGpu& g) { return fitted(g) && g.name == gpu.name && g.mig_uuids.empty(); });
        if (whole == found.end()) {
            throw base::Unavailable(fmt::format("--cuda-context measure: GPU {} ({}) is split into MIG instances, "
                                                "whose use NVML does not give as one GPU's, and no {} here is "
                                                "whole; {}",
                gpu.index, gpu.name, gpu.name, instead()));
        }
        out.push_back(measure_one(framework, *whole, python, timeout));
    }
    if (out.empty()) {
        throw base::Unavailable(
            fmt::format("--cuda-context measure: NVML lists none of the GPUs to fit; {}", instead()));
    }
    return out;
}

} // namespace doctor::fit
