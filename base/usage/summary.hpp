#pragma once

// What a GPU did while a job ran, from NVML samples: the numbers the source documents ask people
// to read off nvidia-smi (utilisation above 90% with rare dips, memory near full), and a verdict.
// Pure: samples in, summary out; gpurun --monitor and gpudoctor monitor both render it.

#include "base/finding.hpp"
#include "base/pci_address.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace base::usage {

/// The verdict's thresholds. NVML's "utilization" is kernel-active time: the share of each sample
/// period during which at least one kernel ran, not how busy the SMs were.
namespace limits {
/// Mean kernel-active time (%) of a healthy training GPU, as the source documents put it.
inline constexpr double healthy_mean = 90.0;
/// A sample at or above this (%) is busy; the summary gives the share of busy samples.
inline constexpr unsigned busy = 80;
/// A sample below this (%) is a dip (the source's "rare dips to 10-25%").
inline constexpr unsigned dip = 25;
/// Dips are rare when at most this share of the samples judged are below `dip`.
inline constexpr double rare_dips = 0.05;
/// A GPU whose mean over all samples is below this (%) was idle.
inline constexpr double idle_mean = 5.0;
/// Samples below this (%) before the first busier one are start-up, after the last one shutdown:
/// left out of the verdict (the source: "once training starts").
inline constexpr unsigned startup_below = 5;
/// Peak memory below this share of the card earns a note (the source: a batch that almost fills it).
inline constexpr double memory_note = 0.5;
/// Fewer samples than this in the window judged are too few for a verdict.
inline constexpr unsigned min_samples = 3;
/// Clock-event reason bits that mean the GPU was slowed by a fault, not by policy or idleness:
/// HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80.
inline constexpr std::uint64_t slowdown_events = 0x8 | 0x20 | 0x40 | 0x80;
} // namespace limits

/// A GPU being watched, named as people see it.
struct MonitoredGpu {
    unsigned index = 0; ///< NVML's index (what nvidia-smi shows)
    PciAddress bus_id;
    std::string name;
    std::string uuid;
};

/// One reading of one GPU. A field NVML could not give is nullopt.
struct GpuSample {
    double t = 0; ///< seconds since sampling began: the sample's place in the schedule
    unsigned gpu = 0; ///< MonitoredGpu::index
    std::optional<unsigned> kernel_active; ///< % of the sample period with a kernel running
    std::optional<std::uint64_t> memory_used; ///< bytes
    std::optional<std::uint64_t> memory_total; ///< bytes
    std::optional<double> power_w;
    std::optional<std::uint64_t> clock_events; ///< nvmlClocksEventReasons bits
    std::optional<unsigned> temperature_c; ///< the GPU die
    std::optional<unsigned> sm_clock_mhz;
    std::optional<unsigned> processes; ///< compute processes on the GPU
};

enum class MonitorVerdict {
    healthy, ///< mean >= healthy_mean and dips rare
    frequent_dips, ///< mean >= healthy_mean but dips are not rare
    low, ///< mean below healthy_mean
    idle, ///< mean over all samples below idle_mean
    too_short, ///< fewer than min_samples readings judged
    no_data, ///< no kernel-active reading at all (MIG, unsupported GPU)
};

const char* to_string(MonitorVerdict verdict);

/// One GPU over the whole run. Kernel-active numbers and power cover the active window: from the
/// first sample at or above `startup_below` to the last one, so that start-up (loading, NCCL init)
/// and shutdown do not count as dips. An idle GPU (mean over all samples below idle_mean) is judged on
/// all its samples. Peak memory covers every sample.
struct GpuSummary {
    unsigned gpu = 0;
    unsigned samples = 0; ///< samples with a kernel-active reading
    unsigned judged = 0; ///< of those, in the window judged
    double startup_s = 0; ///< below `startup_below` before the window
    double shutdown_s = 0; ///< below `startup_below` after it
    double mean = 0; ///< mean kernel-active %, over the judged samples
    unsigned p10 = 0; ///< 10th percentile (nearest rank: the ceil(0.1 n)-th smallest)
    double busy_share = 0; ///< share of judged samples >= busy
    unsigned dip_samples = 0; ///< judged samples below `dip`
    unsigned dips = 0; ///< runs of consecutive dip samples
    double longest_dip_s = 0; ///< the longest run, samples x interval
    std::optional<std::uint64_t> peak_memory;
    std::optional<std::uint64_t> memory_total;
    std::optional<double> mean_power_w; ///< over the judged samples that had a reading
    /// Share of all samples with each clock-event reason set (idle left out), by NVML name.
    std::vector<std::pair<std::string, double>> clock_events;
    MonitorVerdict verdict = MonitorVerdict::no_data;
    std::string verdict_text; ///< one sentence in the source's terms, with the advice
    std::vector<std::string> notes; ///< memory far from full, clocks slowed, start-up left out
    /// The verdict and each note in the one finding model (codes monitor.*, subject "gpu N"), the
    /// remedies from monitor_codes().
    std::vector<Finding> findings;
};

/// The finding codes of the monitor's verdicts and notes, for explain and list --codes.
const std::vector<FindingCode>& monitor_codes();

/// Collects samples as they come, in time order, keeping only what the summary needs (a byte and
/// a float per reading), so a monitor can run for days.
class GpuSummariser {
public:
    void add(const GpuSample& sample);
    /// One summary per GPU, in order of first appearance. `interval` (seconds between samples)
    /// turns runs of samples into durations.
    std::vector<GpuSummary> summaries(double interval) const;

    /// What is kept of one GPU's samples.
    struct Series {
        unsigned gpu = 0;
        unsigned samples = 0; ///< every sample, read or not
        std::vector<std::uint8_t> kernel_active; ///< the readings, in order
        std::vector<float> power_w; ///< beside each reading; NaN when there was none
        std::optional<std::uint64_t> peak_memory;
        std::optional<std::uint64_t> memory_total;
        std::vector<unsigned> events; ///< samples with each event_names bit set
    };

private:
    std::vector<Series> m_series;
};

/// Summaries of `samples` (in time order), as GpuSummariser gives them.
std::vector<GpuSummary> summarise(const std::vector<GpuSample>& samples, double interval);

/// The names of the clock-event reason bits set in `bits` ("sw_power_cap", "hw_thermal_slowdown",
/// ...), idle left out; unknown bits as hex.
/// With `short_names`, as the live table writes them ("pcap", "hwtherm").
std::vector<std::string> clock_event_names(std::uint64_t bits, bool short_names = false);

/// The summary table (at most 80 columns) and the verdicts and notes grouped by code: GPUs with the
/// same finding share one remedy, each with its own message when the messages differ.
std::string render_summary_text(const std::vector<MonitoredGpu>& gpus, const std::vector<GpuSummary>& summaries);

/// A live table's header and rows, one row a sample, like `nvidia-smi dmon`: narrow fixed columns
/// (time, GPU, kernel-active, memory used and its share, temperature, SM clock, power, processes,
/// clock events by short names), at most 79 characters, so that a terminal of 80 columns shows
/// one line per GPU per interval.
std::string render_sample_header();
std::string render_sample_row(const GpuSample& sample);

/// The running summary in one line of at most `width` characters (a terminal's width less one):
/// how many GPUs, their mean kernel-active time so far, the lowest GPU and the dips.
std::string render_running_line(const std::vector<GpuSummary>& summaries, std::size_t width);

nlohmann::json to_json(const MonitoredGpu& gpu);
nlohmann::json to_json(const GpuSample& sample);
nlohmann::json to_json(const GpuSummary& summary);

} // namespace base::usage
