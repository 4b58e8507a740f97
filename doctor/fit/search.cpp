#include "doctor/fit/search.hpp"

#include "doctor/fit/gpu_memory.hpp"

#include "base/error.hpp"
#include "base/nvml.hpp"
#include "base/process.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <thread>

namespace doctor::fit {

namespace {

// GPU out-of-memory messages, as frameworks print them (research notes §3). Plain substrings,
// case-sensitive. TensorFlow's bfc_allocator warning "Allocator (GPU_0_bfc) ran out of memory
// trying to allocate ... The caller indicates that this is not a failure" contains none of them.
constexpr std::array<std::string_view, 30> gpu_oom_messages = {
    // PyTorch: every CUDA caching-allocator message since 1.x, also cut short ("... GPU").
    "CUDA out of memory",
    "HIP out of memory", // ROCm
    "XPU out of memory", // Intel
    "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    "MPS backend out of memory", // Apple
    "NPU out of memory", // Ascend
    "torch.OutOfMemoryError", // >= 2.4 (and its alias below since 1.13)
    "torch.cuda.OutOfMemoryError",
    "CUDA error: out of memory", // raw CUDA API errors
    "CUDA driver error: out of memory",
    "cuda runtime error (2) : out of memory", // <= 0.4 (THC)
    "PT_DEVMEM Allocation failed", // Habana
    "CUBLAS_STATUS_ALLOC_FAILED", // cuBLAS handle or workspace
    "CUDNN_STATUS_NOT_SUPPORTED", // cuDNN: out of memory, or batch over its limit
    "CUDNN_STATUS_INTERNAL_ERROR", // "Could not create cudnn handle"
    "CUSOLVER_STATUS_INTERNAL_ERROR",
    // TensorFlow / Keras
    "ResourceExhaustedError", "OOM when allocating tensor", "Resource exhausted: OOM",
    "Failed to get convolution algorithm", // cuDNN could not initialise: usually memory
    "CUDA_ERROR_OUT_OF_MEMORY",
    // JAX / XLA
    "RESOURCE_EXHAUSTED: Out of memory",
    "Resource exhausted: Out of memory", // older XLA
    "Failed to allocate request for",
    // NCCL (with and without the CUDA error number)
    "Cuda failure 'out of memory'", "Cuda failure 2 'out of memory'", "Failed to CUDA calloc",
    // MXNet
    "cudaMalloc failed: out of memory", "cudaMalloc fail: out of memory",
    "cudaErrorMemoryAllocation", // the CUDA runtime's error name (Thrust, CuPy, custom kernels)
};

// Host memory exhausted: a smaller batch is not the remedy (workers, pinned memory, RAM are).
constexpr std::array<std::string_view, 11> host_oom_messages = {
    "DefaultCPUAllocator: can't allocate memory", // PyTorch on the host
    "DefaultCPUAllocator: not enough memory", // the same, on Windows and in some versions
    "killed by signal: Killed", // DataLoader worker (RAM or /dev/shm)
    "Signal 9 (SIGKILL) received by PID", // torchrun's report of a killed worker
    "exited on signal 9 (Killed)", // Open MPI's mpirun
    "oom-kill event", // Slurm: "Detected 1 oom-kill event(s)"
    "oom_kill event",
    "_ArrayMemoryError", // NumPy
    "[Errno 12] Cannot allocate memory", // ENOMEM from the kernel (fork, mmap)
    "std::bad_alloc", // C++ extensions
    "MemoryError: Unable to allocate", // NumPy, older
};

// Python's own MemoryError: a traceback's last line that starts with it.
constexpr std::string_view python_memory_error = "MemoryError";

constexpr std::size_t evidence_line_limit = 400;
constexpr std::size_t failure_lines = 5;

std::string clip(std::string_view line)
{
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
        line.remove_prefix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
        line.remove_suffix(1);
    }
    if (line.size() <= evidence_line_limit) {
        return std::string(line);
    }
    return std::string(line.substr(0, evidence_line_limit)) + "...";
}

bool is_line_break(char c)
{
    return c == '\n' || c == '\r';
}

// The line (between '\n' or '\r' characters) holding position `pos`.
std::string_view line_at(std::string_view text, std::size_t pos)
{
    std::size_t begin = pos;
    while (begin > 0 && !is_line_break(text[begin - 1])) {
        --begin;
    }
    std::size_t end = pos;
    while (end < text.size() && !is_line_break(text[end])) {
        ++end;
    }
    return text.substr(begin, end - begin);
}

// Every position of `needle` in `text` from `from` on, first to last, passed to `seen`. Forward
// find looks for the first character with memchr; string_view::rfind compares at every position,
// which made classifying a trial's 16 MiB of output take over a second.
template <typename Seen>
void each_occurrence(std::string_view text, std::string_view needle, Seen seen, std::size_t from = 0)
{
    for (std::size_t pos = text.find(needle, from); pos != std::string_view::npos; pos = text.find(needle, pos + 1)) {
        seen(pos);
    }
}

// The last occurrence of any of `messages` in `output`: the line holding it, or nullopt.
template <std::size_t N>
std::optional<std::string_view> last_match(std::string_view output, const std::array<std::string_view, N>& messages)
{
    std::optional<std::size_t> best;
    for (std::string_view message : messages) {
        // Only a later position can be the last one.
        each_occurrence(
            output, message, [&](std::size_t pos) { best = pos; }, best ? *best + 1 : 0);
    }
    if (!best) {
        return std::nullopt;
    }
    return line_at(output, *best);
}

// The last line that starts with `word`, or nullopt.
std::optional<std::string_view> last_line_starting(std::string_view output, std::string_view word)
{
    std::optional<std::size_t> last;
    each_occurrence(output, word, [&](std::size_t pos) {
        if (pos == 0 || is_line_break(output[pos - 1])) {
            last = pos;
        }
    });
    if (!last) {
        return std::nullopt;
    }
    return line_at(output, *last);
}

std::string first_line(const std::string& text)
{
    return text.substr(0, text.find('\n'));
}

std::string last_line(const std::string& text)
{
    auto pos = text.rfind('\n');
    return pos == std::string::npos ? text : text.substr(pos + 1);
}

// --- the search's stories ---------------------------------------------------------------------

std::string story(const Trial& trial, unsigned min)
{
    switch (trial.verdict) {
    case TrialVerdict::oom:
        return fmt::format("even --min {} does not fit in GPU memory ({}); lower --min, or use less memory per "
                           "sample (activation recompute, ZeRO, lower precision)",
            min, last_line(trial.evidence));
    case TrialVerdict::host_oom:
        return fmt::format("batch {} ran out of host memory, not GPU memory ({}); use less host memory (fewer "
                           "DataLoader workers, less pinned memory, a larger /dev/shm) and search again",
            trial.batch, last_line(trial.evidence));
    case TrialVerdict::timeout:
        return fmt::format("batch {} ran past the trial timeout ({:.0f} s); raise --trial-timeout or make one "
                           "trial shorter (fewer steps)",
            trial.batch, trial.seconds);
    case TrialVerdict::failed:
        return fmt::format("batch {} failed for a reason other than memory ({}); fix the command and search again",
            trial.batch,
            trial.evidence.find('\n') == std::string::npos
                ? trial.evidence
                : first_line(trial.evidence) + ": " + last_line(trial.evidence));
    case TrialVerdict::fits:
        break;
    }
    return "";
}

unsigned ceil_log2(std::uint64_t value)
{
    unsigned k = 0;
    while ((std::uint64_t{1} << k) < value) {
        ++k;
    }
    return k;
}

// --- what trials tell of their memory ---------------------------------------------------------

// A "GPUKIT_..._BYTES=<n>" line a child prints, with what the number must be and where a
// PyTorch script gets it.
struct MemoryKey {
    std::string_view key;
    bool above_zero;
    std::string_view example;
};
constexpr MemoryKey peak_key{"GPUKIT_PEAK_BYTES=", false, "from torch.cuda.max_memory_reserved()"};
constexpr MemoryKey total_key{"GPUKIT_TOTAL_BYTES=", true, "from torch.cuda.mem_get_info()[1]"};
constexpr MemoryKey reserved_key{"GPUKIT_RESERVED_BYTES=", false, "from torch.cuda.memory_reserved()"};

// Every value of `mk.key` in `output`, passed to `seen`. A key glued to a longer name
// (MY_GPUKIT_PEAK_BYTES=) is not it.
template <typename Seen> void each_value(std::string_view output, const MemoryKey& mk, Seen seen)
{
    const std::string_view key = mk.key;
    each_occurrence(output, key, [&](std::size_t pos) {
        if (pos > 0 && (std::isalnum(static_cast<unsigned char>(output[pos - 1])) != 0 || output[pos - 1] == '_')) {
            return;
        }
        const std::size_t begin = pos + key.size();
        std::size_t end = begin;
        while (end < output.size() && !is_line_break(output[end]) && output[end] != ' ' && output[end] != '\t') {
            ++end;
        }
        const std::string_view value = output.substr(begin, end - begin);
        std::uint64_t n = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        // "=4 GiB": a unit after a blank would make a number of bytes of it.
        std::size_t word = end;
        while (word < output.size() && (output[word] == ' ' || output[word] == '\t')) {
            ++word;
        }
        std::size_t word_end = word;
        while (word_end < output.size() && std::isalpha(static_cast<unsigned char>(output[word_end])) != 0) {
            ++word_end;
        }
        static constexpr std::array<std::string_view, 10> units = {
            "B", "bytes", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"};
        const std::string_view after = output.substr(word, word_end - word);
        const bool unit = std::find(units.begin(), units.end(), after) != units.end();
        if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || (mk.above_zero && n == 0) ||
            unit) {
            throw base::Error(fmt::format("'{}' is not a number of bytes; print {}<n> with n a whole number "
                                          "of bytes{} and no unit, e.g. {}",
                clip(line_at(output, pos)), key, mk.above_zero ? " above 0" : "", mk.example));
        }
        seen(n);
    });
}

} // namespace

const char* to_string(TrialVerdict verdict)
{
    switch (verdict) {
    case TrialVerdict::fits:
        return "fits";
    case TrialVerdict::oom:
        return "oom";
    case TrialVerdict::host_oom:
        return "host_oom";
    case TrialVerdict::failed:
        return "failed";
    case TrialVerdict::timeout:
        return "timeout";
    }
    return "failed";
}

TrialVerdict classify_trial(int exit_code, bool timed_out, std::string_view output, std::string* evidence)
{
    auto say = [&](std::string text) {
        if (evidence != nullptr) {
            *evidence = std::move(text);
        }
    };
    if (timed_out) {
        say(last_lines(output, 1));
        return TrialVerdict::timeout;
    }
    auto gpu = last_match(output, gpu_oom_messages);
    if (exit_code == 0) {
        say(gpu ? "exited 0 but printed: " + clip(*gpu) : std::string());
        return TrialVerdict::fits;
    }
    if (gpu) {
        say(clip(*gpu));
        return TrialVerdict::oom;
    }
    auto host = last_match(output, host_oom_messages);
    if (!host) {
        host = last_line_starting(output, python_memory_error);
    }
    if (host) {
        say(clip(*host));
        return TrialVerdict::host_oom;
    }
    if (exit_code == 128 + SIGKILL) {
        say("killed by SIGKILL: the host ran out of memory (OOM killer) or something killed it; not a GPU limit");
        return TrialVerdict::host_oom;
    }
    std::string tail = last_lines(output, failure_lines);
    say(exit_text(exit_code) + (tail.empty() ? ", no output" : "\n" + tail));
    return TrialVerdict::failed;
}

std::string last_lines(std::string_view output, std::size_t count)
{
    std::vector<std::string> lines;
    std::size_t end = output.size();
    while (end > 0 && lines.size() < count) {
        std::size_t begin = end;
        while (begin > 0 && !is_line_break(output[begin - 1])) {
            --begin;
        }
        std::string line = clip(output.substr(begin, end - begin));
        if (!line.empty()) {
            lines.push_back(std::move(line));
        }
        end = begin > 0 ? begin - 1 : 0;
    }
    std::reverse(lines.begin(), lines.end());
    std::string out;
    for (const auto& line : lines) {
        out += (out.empty() ? "" : "\n") + line;
    }
    return out;
}

std::string exit_text(int exit_code)
{
    static constexpr std::array<std::pair<int, const char*>, 10> signals = {{{SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"},
        {SIGILL, "SIGILL"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGKILL, "SIGKILL"},
        {SIGSEGV, "SIGSEGV"}, {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"}}};
    for (const auto& [number, name] : signals) {
        if (exit_code == 128 + number) {
            return fmt::format("killed by {} (exit status {})", name, exit_code);
        }
    }
    if (exit_code == 127) {
        return "exit status 127: the command was not found or could not be run";
    }
    return fmt::format("exit status {}", exit_code);
}

MemoryReport read_memory_report(std::string_view output)
{
    MemoryReport report;
    each_value(
        output, peak_key, [&](std::uint64_t n) { report.peak_bytes = std::max(report.peak_bytes.value_or(0), n); });
    each_value(output, total_key,
        [&](std::uint64_t n) { report.total_bytes = report.total_bytes ? std::min(*report.total_bytes, n) : n; });
    each_value(output, reserved_key, [&](std::uint64_t n) { report.reserved_bytes = n; });
    return report;
}

std::optional<MemoryLine> fit_memory_line(const std::vector<Trial>& trials)
{
    std::map<unsigned, double> peaks; // batch -> the largest peak it showed
    std::optional<std::uint64_t> capacity;
    for (const Trial& t : trials) {
        if (t.total_bytes && *t.total_bytes > 0) {
            capacity = std::min(capacity.value_or(*t.total_bytes), *t.total_bytes);
        }
        if (t.verdict == TrialVerdict::fits && t.peak_bytes) {
            double& peak = peaks[t.batch];
            peak = std::max(peak, static_cast<double>(*t.peak_bytes));
        }
    }
    if (!capacity || peaks.size() < 2) {
        return std::nullopt;
    }
    const auto n = static_cast<double>(peaks.size());
    double sx = 0;
    double sy = 0;
    double sxx = 0;
    double sxy = 0;
    for (const auto& [batch, peak] : peaks) {
        const auto x = static_cast<double>(batch);
        sx += x;
        sy += peak;
        sxx += x * x;
        sxy += x * peak;
    }
    MemoryLine line;
    line.capacity = *capacity;
    line.points = static_cast<unsigned>(peaks.size());
    line.lowest = peaks.begin()->first;
    line.highest = peaks.rbegin()->first;
    line.bytes_per_sample = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    line.intercept = (sy - line.bytes_per_sample * sx) / n;
    for (const auto& [batch, peak] : peaks) {
        const double residual = std::abs(peak - (line.intercept + line.bytes_per_sample * static_cast<double>(batch)));
        line.worst_residual = std::max(line.worst_residual, residual / std::max(peak, 1.0));
    }
    if (line.bytes_per_sample > 0) {
        const double limit = std::floor((static_cast<double>(*capacity) - line.intercept) / line.bytes_per_sample);
        line.limit = static_cast<unsigned>(std::clamp(limit, 0.0, static_cast<double>(UINT_MAX)));
    }
    return line;
}

unsigned search_trial_bound(unsigned min, unsigned max)
{
    if (min == 0 || max <= min) {
        return 1;
    }
    // k doubling steps reach max: min·2^(k-1) < max <= min·2^k.
    unsigned k = 0;
    while ((std::uint64_t{min} << k) < max) {
        ++k;
    }
    unsigned worst = k + 1; // everything fits
    for (unsigned j = 1; j <= k; ++j) {
        // First oom at step j (batch min·2^j, or max at step k), after j fits; then bisect the gap.
        std::uint64_t last_fit = std::uint64_t{min} << (j - 1);
        std::uint64_t first_oom = j == k ? max : std::uint64_t{min} << j;
        worst = std::max(worst, j + 1 + ceil_log2(first_oom - last_fit));
    }
    return worst;
}

unsigned search_trial_budget(unsigned min, unsigned max)
{
    if (min == 0 || max <= min) {
        return 1;
    }
    unsigned k = 0;
    while ((std::uint64_t{min} << k) < max) {
        ++k;
    }
    return k + 2;
}

SearchResult search_batch(unsigned min, unsigned max, double margin, const std::function<Trial(unsigned)>& run)
{
    return search_batch(min, max, margin, run, {});
}

SearchResult search_batch(unsigned min, unsigned max, double margin, const std::function<Trial(unsigned)>& run,
    const std::function<void(const Trial&)>& on_trial, bool exact)
{
    if (min == 0) {
        throw base::Error("gpudoctor fit --search: --min 0: a batch holds at least one sample; pass --min 1 or more");
    }
    if (max < min) {
        throw base::Error(
            fmt::format("gpudoctor fit --search: --max {} is below --min {}; pass --max {} or more", max, min, min));
    }
    if (!(margin >= 0 && margin < 1)) {
        throw base::Error(fmt::format(
            "gpudoctor fit --search: --margin {}: the share taken off must be in [0, 1); pass e.g. 0.05", margin));
    }
    SearchResult result;
    result.min = min;
    result.max = max;
    result.margin = margin;
    result.exact = exact;
    result.trial_bound = exact ? search_trial_bound(min, max) : search_trial_budget(min, max);
    result.trials.reserve(search_trial_bound(min, max));
    result.tolerance = exact ? 0.0 : 0.03;
    const double tolerance = result.tolerance;
    std::optional<unsigned> low; // the largest batch that fitted
    std::optional<unsigned> high; // the smallest batch that ran out of GPU memory
    unsigned batch = min;
    bool predicted = false; // this trial's batch came from the memory line
    unsigned misses = 0; // predicted trials that ran out of memory
    bool line_dropped = false;
    while (true) {
        const Trial& trial = result.trials.emplace_back(run(batch));
        result.trials.back().batch = batch;
        if (on_trial) {
            on_trial(trial);
        }
        if (trial.verdict == TrialVerdict::fits) {
            low = batch;
        } else if (trial.verdict == TrialVerdict::oom && low) {
            high = batch;
            misses += predicted ? 1 : 0;
        } else {
            result.stopped = story(trial, min);
            break;
        }
        if (!high && *low == max) {
            result.stopped = "max reached";
            break;
        }
        if (high && *high - *low <= 1) {
            result.stopped = "bisected";
            break;
        }
        result.line = fit_memory_line(result.trials);
        if (result.line && result.line->points >= 3 && result.line->worst_residual > 0.05) {
            line_dropped = true; // the points disagree with any line
        }
        const bool use_line = !line_dropped && result.line && result.line->usable();
        if (use_line && high && static_cast<double>(*low) >= static_cast<double>(*high - 1) * (1 - tolerance)) {
            result.stopped = "within tolerance";
            break;
        }
        if (!exact && result.trials.size() >= result.trial_bound) {
            result.budget_spent = true;
            result.first_oom = high;
            result.stopped = high
                ? fmt::format("trial budget spent ({} trials): the limit lies between {} and {}", result.trial_bound,
                      *low, *high - 1)
                : fmt::format("trial budget spent ({} trials): {} fits, larger batches were not tried",
                      result.trial_bound, *low);
            break;
        }
        // The next batch: the line's, else doubling or bisection.
        std::uint64_t next = 0;
        predicted = false;
        if (use_line) {
            const MemoryLine& line = *result.line;
            const std::uint64_t limit = std::min<std::uint64_t>(*line.limit, max);
            // Two small batches measure the slope poorly: a prediction far beyond the points is
            // approached halfway first, and an out-of-memory there says little about the line.
            auto reliable = [&](std::uint64_t at) {
                return at <= line.highest || at - line.highest <= 3 * std::uint64_t{line.highest - line.lowest};
            };
            std::uint64_t candidate = 0;
            bool counts = true; // an out-of-memory at the candidate is the line's miss
            if (high && limit >= *high) {
                // The line predicts past a batch that ran out of memory: a tolerance below it, once
                // more; bisection when the line is far from its points or missed twice.
                if (reliable(*high)) {
                    line_dropped = misses >= 2;
                    candidate = static_cast<std::uint64_t>(std::ceil(static_cast<double>(*high - 1) * (1 - tolerance)));
                }
            } else if (static_cast<double>(limit) > static_cast<double>(*low) / (1 - tolerance)) {
                counts = reliable(limit);
                candidate = counts ? limit : line.highest + (limit - line.highest) / 2;
            } else {
                // The line puts the limit within the tolerance of what fits: the batch whose
                // out-of-memory brackets it.
                candidate = static_cast<std::uint64_t>(std::floor(static_cast<double>(*low) / (1 - tolerance))) + 1;
            }
            candidate = std::min<std::uint64_t>(candidate, high ? *high - 1 : max);
            if (!line_dropped && candidate > *low) {
                next = candidate;
                predicted = counts;
                ++result.predicted_trials;
            }
        }
        if (next == 0) {
            next = high ? *low + (*high - *low) / 2 : std::min<std::uint64_t>(std::uint64_t{*low} * 2, max);
        }
        batch = static_cast<unsigned>(next);
    }
    result.largest_fit = low;
    result.smallest_oom = high;
    const bool complete = result.stopped == "bisected" || result.stopped == "max reached" ||
        result.stopped == "within tolerance" || result.budget_spent;
    if (low && complete) {
        auto kept = static_cast<unsigned>(std::floor(static_cast<double>(*low) * (1.0 - margin) + 1e-9));
        result.best = std::max(min, kept);
    }
    return result;
}

std::vector<std::string> expand_batch(const std::vector<std::string>& argv, unsigned batch)
{
    static constexpr std::string_view placeholder = "{batch}";
    const std::string value = std::to_string(batch);
    std::vector<std::string> args;
    bool placed = false;
    for (std::string arg : argv) {
        for (auto pos = arg.find(placeholder); pos != std::string::npos; pos = arg.find(placeholder, pos)) {
            arg.replace(pos, placeholder.size(), value);
            pos += value.size();
            placed = true;
        }
        args.push_back(std::move(arg));
    }
    if (!placed) {
        throw base::Error("gpudoctor fit --search: no argument of the command holds {batch}; put it where the "
                          "command takes its batch size, e.g. -- python train.py --batch-size {batch}");
    }
    return args;
}

Trial run_trial(const std::vector<std::string>& argv, unsigned batch, std::chrono::milliseconds timeout)
{
    const std::vector<std::string> args = expand_batch(argv, batch);
    Trial trial;
    trial.batch = batch;
    GpuMemorySampler peak;
    auto start = std::chrono::steady_clock::now();
    base::CommandResult ran = base::run_command(args, timeout);
    trial.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    trial.peak_gpu_mib = peak.stop();
    trial.verdict = classify_trial(ran.exit_code, ran.timed_out, ran.output, &trial.evidence);
    MemoryReport told;
    try {
        told = read_memory_report(ran.output);
    } catch (const base::Error& e) {
        throw base::Error(fmt::format("batch {}: {}", batch, e.what()));
    }
    if (told.peak_bytes) {
        trial.peak_bytes = told.peak_bytes;
        trial.total_bytes = told.total_bytes;
        trial.memory_from = "trial";
    } else if (peak.peak_bytes()) {
        trial.peak_bytes = peak.peak_bytes();
        trial.total_bytes = told.total_bytes ? told.total_bytes : std::optional<std::uint64_t>(peak.total_bytes());
        trial.memory_from = "nvml";
    }
    return trial;
}

nlohmann::json render_search_json(const SearchResult& result)
{
    nlohmann::json trials = nlohmann::json::array();
    for (const auto& t : result.trials) {
        nlohmann::json j{{"batch", t.batch}, {"verdict", to_string(t.verdict)}, {"seconds", t.seconds}};
        if (t.peak_gpu_mib) {
            j["peak_gpu_mib"] = *t.peak_gpu_mib;
        }
        j["evidence"] = t.evidence;
        if (t.peak_bytes) {
            j["peak_bytes"] = *t.peak_bytes;
        }
        if (t.total_bytes) {
            j["total_bytes"] = *t.total_bytes;
        }
        if (!t.memory_from.empty()) {
            j["memory_from"] = t.memory_from;
        }
        trials.push_back(std::move(j));
    }
    nlohmann::json line = nullptr;
    if (result.line) {
        const MemoryLine& l = *result.line;
        line = {{"intercept_bytes", l.intercept}, {"bytes_per_sample", l.bytes_per_sample},
            {"capacity_bytes", l.capacity}, {"points", l.points}, {"worst_residual", l.worst_residual},
            {"predicted_limit", l.limit ? nlohmann::json(*l.limit) : nlohmann::json(nullptr)}, {"usable", l.usable()}};
    }
    return {
        {"best_batch", result.best ? nlohmann::json(*result.best) : nlohmann::json(nullptr)},
        {"largest_fit", result.largest_fit ? nlohmann::json(*result.largest_fit) : nlohmann::json(nullptr)},
        {"min", result.min},
        {"max", result.max},
        {"margin", result.margin},
        {"trials", std::move(trials)},
        {"first_oom", result.first_oom ? nlohmann::json(*result.first_oom) : nlohmann::json(nullptr)},
        {"exact", result.exact},
        {"budget_spent", result.budget_spent},
        {"stopped", result.stopped},
        {"trial_bound", result.trial_bound},
        {"smallest_oom", result.smallest_oom ? nlohmann::json(*result.smallest_oom) : nlohmann::json(nullptr)},
        {"tolerance", result.tolerance},
        {"predicted_trials", result.predicted_trials},
        {"line", std::move(line)},
    };
}

std::string render_trial_text(const Trial& trial)
{
    std::string line =
        fmt::format("batch {:>6}  {:<8}  {:>7.1f} s", trial.batch, to_string(trial.verdict), trial.seconds);
    if (trial.memory_from == "trial" && trial.peak_bytes) {
        line += fmt::format("  peak {:>7.0f} MiB", static_cast<double>(*trial.peak_bytes) / (1024.0 * 1024.0));
    } else if (trial.peak_gpu_mib) {
        line += fmt::format("  peak {:>7.0f} MiB", *trial.peak_gpu_mib);
    }
    if (!trial.evidence.empty()) {
        line += "  " + last_line(trial.evidence);
    }
    return line;
}

std::string render_search_text(const SearchResult& result)
{
    constexpr double gib = 1024.0 * 1024.0 * 1024.0;
    constexpr double mib = 1024.0 * 1024.0;
    std::string out;
    for (const auto& t : result.trials) {
        out += render_trial_text(t) + "\n";
    }
    std::size_t count = result.trials.size();
    std::string trials = fmt::format(
        "{} trial{} (at most {} for {}..{})", count, count == 1 ? "" : "s", result.trial_bound, result.min, result.max);
    if (result.best) {
        if (*result.best != *result.largest_fit) {
            out += fmt::format("best batch: {} ({} fits, less a {:g} % margin)\n", *result.best, *result.largest_fit,
                result.margin * 100);
        } else {
            out += fmt::format("best batch: {}\n", *result.best);
        }
        if (result.stopped == "max reached") {
            out += fmt::format("stopped: --max {} fits; the limit may lie above it; {}\n", result.max, trials);
        } else if (result.budget_spent) {
            out += fmt::format("stopped: {} fits, {} runs out of GPU memory, the batches between were not tried "
                               "(the budget of ceil(log2(max/min)) + 2 trials is spent); {}; --exact bisects to "
                               "the end, or run again with --min {} --max {}\n",
                *result.largest_fit, *result.first_oom, trials, *result.largest_fit, *result.first_oom - 1);
        } else if (result.stopped == "within tolerance") {
            out += fmt::format("stopped: {} fits, {} runs out of GPU memory: the limit lies in {}..{}, within {:g} % "
                               "of {} (--exact bisects to the end); {}\n",
                *result.largest_fit, *result.smallest_oom, *result.largest_fit, *result.smallest_oom - 1,
                result.tolerance * 100, *result.largest_fit, trials);
        } else {
            out += fmt::format("stopped: {} fits, {} runs out of GPU memory; {}\n", *result.largest_fit,
                *result.largest_fit + 1, trials);
        }
        if (result.line && result.line->usable()) {
            const MemoryLine& l = *result.line;
            out += fmt::format("memory line: {:.2f} GiB + {:.1f} MiB x batch over {} trials, GPU {:.2f} GiB: predicts "
                               "{} ({} of the trials were its predictions)\n",
                l.intercept / gib, l.bytes_per_sample / mib, l.points, static_cast<double>(l.capacity) / gib, *l.limit,
                result.predicted_trials);
        }
        return out;
    }
    out += "best batch: none\n";
    if (result.largest_fit) {
        out += fmt::format("largest batch that fitted before the search stopped: {}\n", *result.largest_fit);
    }
    out += fmt::format("stopped: {}; {}\n", result.stopped, trials);
    if (!result.trials.empty()) {
        const Trial& last = result.trials.back();
        if (last.verdict == TrialVerdict::failed && last.evidence.find('\n') != std::string::npos) {
            out += fmt::format("last output of batch {}:\n", last.batch);
            std::string_view rest = last.evidence;
            rest.remove_prefix(rest.find('\n') + 1);
            while (!rest.empty()) {
                auto end = rest.find('\n');
                out += "  " + std::string(rest.substr(0, end)) + "\n";
                rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
            }
        }
    }
    return out;
}

} // namespace doctor::fit
