#pragma once

// Reads the monitor's samples from NVML: kernel-active time, memory, power and clock-event reasons
// of chosen GPUs, and the compute processes on them.

#include "base/nvml.hpp"
#include "base/usage/summary.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace base::usage {

/// How a GPU is named on a monitor's command line: NVML's index, a PCI bus id in any spelling, or
/// a UUID. Returns the GPUs of `all` named by `selectors`, in the order given; all of them when
/// `selectors` is empty. Throws base::Error for a name that matches no GPU, or one named twice;
/// the message starts with `where` (the option or variable the names came from).
std::vector<MonitoredGpu> select_gpus(
    const std::vector<NvmlGpu>& all, const std::vector<std::string>& selectors, std::string_view where = "--gpus");

/// The GPUs of `all` at these bus ids, in that order. Throws base::Error naming a bus id NVML
/// does not list.
std::vector<MonitoredGpu> gpus_at(const std::vector<NvmlGpu>& all, const std::vector<PciAddress>& bus_ids);

/// Samples GPUs through a loaded NVML. Handles are looked up once, by NVML index as `gpus` give it
/// (found by bus id or UUID beforehand, never assumed).
class GpuSampler {
public:
    GpuSampler(const Nvml& nvml, std::vector<MonitoredGpu> gpus);

    const std::vector<MonitoredGpu>& gpus() const { return m_gpus; }

    /// One sample of each GPU, stamped `t`. A reading NVML refuses is left empty; never throws.
    std::vector<GpuSample> sample(double t) const;

    /// The compute processes on each GPU (same order as gpus()). Throws base::Error naming the
    /// call and NVML's error when a list cannot be read (e.g. NO_PERMISSION).
    std::vector<std::vector<NvmlProcess>> processes() const;

private:
    const Nvml& m_nvml;
    std::vector<MonitoredGpu> m_gpus;
    std::vector<nvml_abi::Device> m_handles;
};

/// When to take samples: every `interval` seconds from the first, on a fixed grid. A sample taken
/// late does not shift the grid; slots more than half a second (and an interval) past are skipped.
class SampleSchedule {
public:
    using Clock = std::chrono::steady_clock;
    explicit SampleSchedule(double interval, Clock::time_point start = Clock::now());

    /// The next sample's time on the grid, in seconds from the start.
    double next_t() const { return double(m_next) * m_interval; }
    Clock::time_point next_at() const;
    /// Marks the next sample taken: moves to the next slot, or past the slots long missed at `now`.
    void taken(Clock::time_point now = Clock::now());
    double interval() const { return m_interval; }

private:
    double m_interval;
    Clock::time_point m_start;
    unsigned long long m_next = 0;
};

/// How long one round of NVML sampling may take before the process gives up on NVML (see
/// base::CallDeadline): a driver call that never returns must not hang the monitor.
struct NvmlDeadline {
    unsigned seconds = 30;
    const char* message = nullptr; ///< a string literal, written to standard error
    int exit_code = 1;
    void (*cleanup)() = nullptr; ///< async-signal-safe, or null
};

/// The one sampling loop, of gpudoctor monitor and gpurun --monitor's node monitor. For each slot
/// of `schedule`: `wait(until)` waits for the slot's time and returns true to stop instead (the
/// command ended, a signal, the ranks are gone); then every GPU of `sampler` is sampled under
/// `deadline` and the samples go to `taken`. Stops before a slot at or past `duration` seconds
/// when `duration` > 0. Without a sampler (NVML could not be loaded) only `wait` runs, with no
/// time limit, until it says stop. Returns the number of rounds sampled.
unsigned sample_on_schedule(const GpuSampler* sampler, SampleSchedule& schedule, double duration,
    const NvmlDeadline& deadline, const std::function<bool(SampleSchedule::Clock::time_point until)>& wait,
    const std::function<void(const std::vector<GpuSample>& samples)>& taken);

} // namespace base::usage
