#pragma once

// gpudoctor fit --search: the largest batch that trains, found by running the user's command, one
// fresh process per trial, doubling from --min until the first out-of-memory, then bisecting.
// When trials tell their peak memory (a GPUKIT_PEAK_BYTES=<n> line, or NVML) and the GPU's, the
// search fits memory = a + b·batch to the trials that fitted and tries the batch the line
// predicts instead, then confirms it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::fit {

/// How one trial ended. Only `oom` means "this batch is too big"; host_oom, failed and timeout stop
/// the search with their own message.
enum class TrialVerdict { fits, oom, host_oom, failed, timeout };
const char* to_string(TrialVerdict verdict);

/// The verdict from a finished process: exit status (128+N for signal N, as base::run_command
/// reports it), whether it timed out, and its output (stdout and stderr together). `evidence` gets
/// the line that decided (the OOM message, "killed by SIGKILL", the last lines of a failure).
///
/// In order: a timeout is `timeout`. Exit status 0 is `fits`, even when the output holds an OOM
/// message (frameworks log recovered allocation failures; the exit status is the command's own
/// word), and then `evidence` quotes that message: a command that catches its OOM and goes on with
/// a smaller batch (accelerate's find_executable_batch_size, Trainer's auto_find_batch_size) must
/// have that turned off. A nonzero exit with a GPU out-of-memory message of PyTorch (CUDA, ROCm,
/// XPU, MPS, raw CUDA errors), TensorFlow, JAX/XLA, cuBLAS/cuDNN/cuSOLVER, NCCL or MXNet is `oom`
/// (TensorFlow's "ran out of memory ... not a failure" warning is not one of them); else SIGKILL
/// (137) or a host-memory message (DefaultCPUAllocator, a DataLoader worker or an MPI/torchrun rank
/// killed by signal 9, Slurm's oom-kill, Python's MemoryError) is `host_oom`; anything else is
/// `failed`. Messages are matched as plain case-sensitive substrings anywhere in the output.
TrialVerdict classify_trial(int exit_code, bool timed_out, std::string_view output, std::string* evidence = nullptr);

struct Trial {
    unsigned batch = 0;
    TrialVerdict verdict = TrialVerdict::failed;
    double seconds = 0;
    std::optional<double> peak_gpu_mib; ///< from NVML, when it answers
    std::string evidence;
    /// The trial's peak GPU memory: what it printed (GPUKIT_PEAK_BYTES), else NVML's peak.
    std::optional<std::uint64_t> peak_bytes;
    /// The GPU's memory: what the trial printed (GPUKIT_TOTAL_BYTES), else NVML's total.
    std::optional<std::uint64_t> total_bytes;
    std::string memory_from; ///< "trial", "nvml", or empty
};

/// What a child printed about its memory: the largest GPUKIT_PEAK_BYTES=<n> (of every rank that
/// printed one) and the smallest GPUKIT_TOTAL_BYTES=<n> (a trial's), the last
/// GPUKIT_RESERVED_BYTES=<n> (the CUDA context script's: its allocator's pool). A line may carry a
/// prefix ("[rank0]: ", a logger's); the value is decimal digits up to the end of the line or a
/// blank. Throws base::Error, naming the line, for a value that is not such a number.
struct MemoryReport {
    std::optional<std::uint64_t> peak_bytes;
    std::optional<std::uint64_t> total_bytes;
    std::optional<std::uint64_t> reserved_bytes;
};
MemoryReport read_memory_report(std::string_view output);

/// The last `count` non-empty lines of a child's output, oldest first, joined with '\n', each
/// clipped for a message.
std::string last_lines(std::string_view output, std::size_t count);

/// How a child ended, for a message: "exit status 1", "killed by SIGSEGV (exit status 139)",
/// "exit status 127: the command was not found or could not be run".
std::string exit_text(int exit_code);

/// memory = intercept + bytes_per_sample × batch, least squares over the trials that fitted and
/// told their peak, against the smallest GPU memory any trial told.
struct MemoryLine {
    double intercept = 0;
    double bytes_per_sample = 0;
    std::uint64_t capacity = 0;
    unsigned points = 0; ///< trials (distinct batches) it was fitted to
    unsigned lowest = 0; ///< the smallest batch among them
    unsigned highest = 0; ///< the largest
    double worst_residual = 0; ///< the largest |residual| / peak over the points
    /// The largest batch whose line stays within capacity; nullopt when memory does not grow.
    std::optional<unsigned> limit;
    /// Two or more points, memory growing, every point within 5 % of the line.
    bool usable() const { return points >= 2 && bytes_per_sample > 0 && worst_residual <= 0.05 && limit.has_value(); }
};
std::optional<MemoryLine> fit_memory_line(const std::vector<Trial>& trials);

struct SearchResult {
    /// The largest batch that fitted, after --margin; nullopt: none, or the search was cut short
    /// by a trial that was neither fits nor oom (then `largest_fit` still says what fitted).
    std::optional<unsigned> best;
    std::optional<unsigned> largest_fit; ///< before the margin
    std::optional<unsigned> smallest_oom; ///< the smallest batch that ran out of GPU memory
    std::vector<Trial> trials;
    std::string stopped; ///< why the search ended: "bisected", "max reached", or the failing trial's story
    unsigned min = 0;
    unsigned max = 0;
    double margin = 0;
    unsigned trial_bound = 0; ///< the most trials this search could take (budget or exact bound)
    bool exact = false; ///< bisected to the end (Lightning's binsearch) rather than within the budget
    /// Set when the trial budget ran out before the bisection closed: the limit lies in
    /// [largest_fit, first_oom - 1].
    std::optional<unsigned> first_oom;
    bool budget_spent = false;
    /// The search may stop when the limit is known to lie in [largest_fit, largest_fit /
    /// (1 - tolerance)]: 0.03 by default, 0 with `exact`.
    double tolerance = 0;
    std::optional<MemoryLine> line; ///< the last line fitted, when trials told their memory
    unsigned predicted_trials = 0; ///< trials whose batch came from the line
};

/// The search itself, pure: `run` performs one trial. Tries `min`, doubles (capped at `max`,
/// never above it) while trials fit; at the first oom bisects between the last fit and the first
/// oom. `max` fitting ends it ("max reached"); `min` not fitting ends it with best = nullopt; any
/// verdict other than fits and oom ends it with that trial's story.
///
/// By default the search keeps to a budget of search_trial_budget(min, max) =
/// ceil(log2(max/min)) + 2 trials: the doubling takes at most ceil(log2(max/min)) + 1 of them and
/// the bisection the rest. When the limit lies high in the range the budget can run out before
/// the bisection closes: then best is the largest batch that fitted, `budget_spent` is set and
/// `first_oom` bounds the unresolved range. With `exact` the bisection goes on until the two are 1
/// apart, as Lightning's scale_batch_size(mode="binsearch") with init_val = min, max_val = max
/// does, in at most search_trial_bound(min, max) trials.
///
/// Extrapolation: once two fitted trials told their peak memory and a trial told the GPU's, the
/// next batch is the one the line predicts as the limit (within the bracket of what fitted and
/// what did not), or halfway to it when the prediction lies more than three times the points'
/// spread beyond them (two small batches measure the slope poorly); when the limit fits, the next tries the smallest
/// batch whose out-of-memory would bracket the limit within the tolerance (3 %; 1 batch with `exact`); when it does
/// not, the next tries that much below it. The search ends "within tolerance" once the limit lies in [largest fit,
/// largest fit / 0.97]. A line that disagrees with its points (a residual over 5 %), or predicts past two trials that
/// ran out of memory, is dropped: doubling and bisection go on. Every batch reported was run.
///
/// `margin` in [0, 1) takes that share off the result (rounded down, at least `min`). Throws
/// base::Error for min == 0, max < min, or a margin out of range.
SearchResult search_batch(unsigned min, unsigned max, double margin, const std::function<Trial(unsigned)>& run);

/// The same, calling `on_trial` with each trial as soon as it ends (and before the next starts):
/// the CLI prints render_trial_text(trial) there for progress on a TTY. To show a trial while it
/// runs ("batch 256 ..."), wrap `run`.
SearchResult search_batch(unsigned min, unsigned max, double margin, const std::function<Trial(unsigned)>& run,
    const std::function<void(const Trial&)>& on_trial, bool exact = false);

/// ceil(log2(max/min)) + 2 (1 for min == max): the trials the default search may take.
unsigned search_trial_budget(unsigned min, unsigned max);

/// The most trials the exact search takes for [min, max], over every possible threshold (it is
/// reached by some threshold): with k = ceil(log2(max/min)), k + 1 when everything fits, and for a
/// first oom at step j the j + 1 doubling trials plus ceil(log2(width)) to bisect the gap below it.
/// At most 2k + ceil(log2(min)) for k >= 1, 1 for min == max. The same count as Lightning's
/// binsearch with init_val = min, max_val = max. (No exact search can promise ceil(log2(max/min))
/// + 2: [8, 16] has 9 possible answers, which 3 yes/no trials cannot tell apart.)
unsigned search_trial_bound(unsigned min, unsigned max);

/// `argv` with every "{batch}" in every argument replaced by the batch, left to right (a
/// replacement is not scanned again). Throws base::Error when no argument holds "{batch}".
std::vector<std::string> expand_batch(const std::vector<std::string>& argv, unsigned batch);

/// Runs `argv` with every "{batch}" replaced by the batch (argv, never a shell), with a deadline;
/// times it and classifies it. While it runs, the memory used on the busiest GPU (all processes,
/// as NVML reports it; NVML from GPUKIT_NVML_LIBRARY or libnvidia-ml.so.1) is sampled every 100 ms
/// and its peak goes to `peak_gpu_mib`; without NVML that stays empty. `peak_bytes` and
/// `total_bytes` are what the trial printed (read_memory_report), else NVML's peak and that GPU's
/// total. Throws base::Error when no argument holds "{batch}", or for a memory line that is not
/// a number.
Trial run_trial(const std::vector<std::string>& argv, unsigned batch, std::chrono::milliseconds timeout);

/// `best_batch` (null when none), `largest_fit` (null when none), `smallest_oom` (null when
/// none), `first_oom` (null unless the
/// budget ran out first), `exact`, `budget_spent`, `min`, `max`, `margin`, `trials` [{batch,
/// verdict, seconds, peak_gpu_mib (only when known), evidence, peak_bytes, total_bytes and
/// memory_from (when known)}], `stopped`, `trial_bound`, `tolerance`, `predicted_trials`, `line`
/// ({intercept_bytes, bytes_per_sample, capacity_bytes, points, worst_residual, predicted_limit}
/// or null).
nlohmann::json render_search_json(const SearchResult& result);
/// One line per trial (render_trial_text), then the result and why the search stopped.
std::string render_search_text(const SearchResult& result);
/// One trial on one line, no newline: batch, verdict, seconds, peak GPU memory when known, and the
/// evidence's last line when there is evidence (a fit has none, unless it printed an OOM message).
std::string render_trial_text(const Trial& trial);

} // namespace doctor::fit
