#include "base/usage/summary.hpp"

#include "base/byte_size.hpp"
#include "base/cpu_set.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace base::usage {

namespace {

// nvmlClocksEventReasons, by bit (nvml.h); idle (0x1) is left out of every list.
// Each with NVML's name and the live table's short one.
struct EventName {
    std::uint64_t bit;
    const char* name; ///< NVML's
    const char* short_name;
};
constexpr EventName event_names[] = {
    {0x2, "applications_clocks_setting", "app"},
    {0x4, "sw_power_cap", "pcap"},
    {0x8, "hw_slowdown", "hwslow"},
    {0x10, "sync_boost", "sync"},
    {0x20, "sw_thermal_slowdown", "swtherm"},
    {0x40, "hw_thermal_slowdown", "hwtherm"},
    {0x80, "hw_power_brake_slowdown", "brake"},
    {0x100, "display_clock_setting", "disp"},
};
constexpr std::uint64_t idle_event = 0x1;

std::string percent(double share)
{
    return fmt::format("{:.0f}%", share * 100);
}

std::string seconds(double s)
{
    return fmt::format("{:.1f}s", s);
}

// A finding of the monitor about `gpu`, its severity and remedy from the code table; returns the
// sentence the summary's text fields keep: the message, then `joint` and the remedy.
std::string judge(GpuSummary& s, const char* code, std::string message, const char* joint = "; ")
{
    s.findings.push_back(finding_from(monitor_codes(), code, fmt::format("gpu {}", s.gpu), std::move(message)));
    const Finding& f = s.findings.back();
    return f.remedy.empty() ? f.message : f.message + joint + f.remedy;
}

// Judges one GPU's series.
GpuSummary summarise_gpu(const GpuSummariser::Series& series, double interval)
{
    GpuSummary s;
    s.gpu = series.gpu;
    s.peak_memory = series.peak_memory;
    s.memory_total = series.memory_total;
    for (std::size_t e = 0; e < series.events.size(); ++e) {
        if (series.events[e] > 0) {
            s.clock_events.emplace_back(event_names[e].name, double(series.events[e]) / double(series.samples));
        }
    }
    const auto& readings = series.kernel_active;
    s.samples = static_cast<unsigned>(readings.size());
    if (readings.empty()) {
        s.verdict = MonitorVerdict::no_data;
        s.verdict_text = judge(s, "monitor.no_data",
            "NVML gave no kernel-active reading for this GPU (not supported here, e.g. with MIG)");
        return s;
    }

    double total = 0;
    for (auto r : readings) {
        total += r;
    }
    const bool idle = total / double(readings.size()) < limits::idle_mean;
    // The window judged: from the first sample at or above `startup_below` to the last one (an idle
    // GPU's whole run, since the window would be a blip).
    std::size_t first = 0;
    std::size_t last = readings.size() - 1;
    if (!idle) {
        while (readings[first] < limits::startup_below) {
            ++first;
        }
        while (readings[last] < limits::startup_below) {
            --last;
        }
    }
    s.startup_s = double(first) * interval;
    s.shutdown_s = double(readings.size() - 1 - last) * interval;
    std::array<unsigned, 101> histogram{};
    double sum = 0;
    double power = 0;
    unsigned power_readings = 0;
    unsigned busy = 0;
    unsigned run = 0;
    unsigned longest = 0;
    for (std::size_t i = first; i <= last; ++i) {
        const unsigned v = readings[i];
        ++histogram[v];
        sum += v;
        busy += v >= limits::busy ? 1 : 0;
        if (v < limits::dip) {
            ++s.dip_samples;
            s.dips += run == 0 ? 1 : 0;
            longest = std::max(longest, ++run);
        } else {
            run = 0;
        }
        if (!std::isnan(series.power_w[i])) {
            power += series.power_w[i];
            ++power_readings;
        }
    }
    s.judged = static_cast<unsigned>(last - first + 1);
    s.mean = sum / double(s.judged);
    // Nearest rank: the ceil(0.1 n)-th smallest reading.
    const auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(0.1 * double(s.judged))));
    std::size_t seen = 0;
    for (unsigned v = 0; v <= 100; ++v) {
        seen += histogram[v];
        if (seen >= rank) {
            s.p10 = v;
            break;
        }
    }
    s.busy_share = double(busy) / double(s.judged);
    s.longest_dip_s = double(longest) * interval;
    if (power_readings > 0) {
        s.mean_power_w = power / double(power_readings);
    }

    const std::string dips_told = fmt::format("{} of {} samples below {}%", s.dip_samples, s.judged, limits::dip);
    if (s.judged < limits::min_samples) {
        s.verdict = MonitorVerdict::too_short;
        s.verdict_text = fmt::format("only {} sample{} to judge{}: too few; sample longer or more often", s.judged,
            s.judged == 1 ? "" : "s",
            s.judged < s.samples ? fmt::format(" ({} more at start-up or shutdown)", s.samples - s.judged) : "");
        judge(s, "monitor.too_short",
            fmt::format("only {} sample{} to judge: too few", s.judged, s.judged == 1 ? "" : "s"));
    } else if (idle) {
        s.verdict = MonitorVerdict::idle;
        s.verdict_text = fmt::format("the GPU was idle (kernel-active {:.1f}%): did the program use it?", s.mean);
        judge(s, "monitor.idle", fmt::format("the GPU was idle (kernel-active {:.1f}%)", s.mean));
    } else if (s.mean >= limits::healthy_mean && s.dip_samples <= limits::rare_dips * s.judged) {
        s.verdict = MonitorVerdict::healthy;
        s.verdict_text = judge(
            s, "monitor.healthy", fmt::format("healthy: kernel-active {:.1f}% with rare dips ({})", s.mean, dips_told));
    } else if (s.mean >= limits::healthy_mean) {
        s.verdict = MonitorVerdict::frequent_dips;
        s.verdict_text = judge(s, "monitor.frequent_dips",
            fmt::format("kernel-active {:.1f}% on average, but the GPU often waits ({}, longest {})", s.mean, dips_told,
                seconds(s.longest_dip_s)),
            ": ");
    } else {
        s.verdict = MonitorVerdict::low;
        s.verdict_text = judge(s, "monitor.low",
            fmt::format(
                "kernel-active time is low ({:.1f}%, below {:.0f}%): the GPU waits", s.mean, limits::healthy_mean));
    }

    if (s.startup_s > 0 || s.shutdown_s > 0) {
        std::vector<std::string> parts;
        if (s.startup_s > 0) {
            parts.push_back(fmt::format("start-up {}", seconds(s.startup_s)));
        }
        if (s.shutdown_s > 0) {
            parts.push_back(fmt::format("shutdown {}", seconds(s.shutdown_s)));
        }
        s.notes.push_back(judge(s, "monitor.startup_left_out",
            fmt::format("left out, below {}%: {}", limits::startup_below, fmt::join(parts, " and "))));
    }
    if (s.peak_memory && s.memory_total && *s.memory_total > 0 && !idle) {
        const double share = double(*s.peak_memory) / double(*s.memory_total);
        if (share < limits::memory_note) {
            s.notes.push_back(judge(s, "monitor.memory_headroom",
                fmt::format("memory peaked at {} ({} of the card): a larger batch may fit",
                    format_bytes(*s.peak_memory), percent(share))));
        }
    }
    for (std::size_t e = 0; e < series.events.size(); ++e) {
        if (series.events[e] > 0 && (event_names[e].bit & limits::slowdown_events) != 0) {
            s.notes.push_back(judge(s, "monitor.clocks_slowed",
                fmt::format("clocks slowed by {} in {} of the samples", event_names[e].name,
                    percent(double(series.events[e]) / double(series.samples))),
                ": "));
        }
    }
    return s;
}

} // namespace

const std::vector<FindingCode>& monitor_codes()
{
    static const std::vector<FindingCode> codes = {
        {"monitor.healthy", Severity::pass, "the GPU ran kernels nearly all the time",
            "Mean kernel-active time (the share of each sample period with a kernel running) at or above 90% "
            "over the window judged, with rare dips below 25%.",
            ""},
        {"monitor.frequent_dips", Severity::warn, "busy on average, but the GPU often waits",
            "Mean kernel-active time is at or above 90%, but more samples than rare dip below 25%: the GPU waits "
            "between steps.",
            "look at data loading, checkpoints or communication between steps; run with gpurun --profile nsys and "
            "--nccl-check"},
        {"monitor.low", Severity::warn, "kernel-active time is low",
            "Mean kernel-active time below 90% over the window judged: the GPU waits for its input or for other "
            "ranks for much of each step.",
            "look at the input pipeline (DataLoader workers, pinned memory) or communication: run with gpurun "
            "--profile nsys and --nccl-check"},
        {"monitor.idle", Severity::warn, "the GPU was idle",
            "Kernel-active time stayed near 0 for the whole run: the program did not use this GPU.",
            "check which GPUs the program uses (CUDA_VISIBLE_DEVICES, LOCAL_RANK, the device it picks)"},
        {"monitor.too_short", Severity::skip, "too few samples to judge",
            "Fewer than 3 samples fell in the window judged (start-up and shutdown below 5% are left out).",
            "sample longer (--duration) or more often (--interval)"},
        {"monitor.no_data", Severity::skip, "NVML gave no kernel-active reading",
            "NVML answered no utilisation query for this GPU (not supported, e.g. on a MIG instance).", ""},
        {"monitor.startup_left_out", Severity::info, "start-up or shutdown left out of the verdict",
            "Samples below 5% before the first busy sample and after the last one are left out (loading, NCCL "
            "set-up, saving).",
            ""},
        {"monitor.memory_headroom", Severity::info, "memory far from full",
            "Peak memory stayed below half of the GPU's: a larger batch may fit and use the GPU better.",
            "see gpudoctor fit"},
        {"monitor.clocks_slowed", Severity::warn, "clocks slowed by a fault",
            "NVML's clock-event reasons show a hardware slowdown, thermal slowdown or power brake in some samples: "
            "the GPU ran below its clocks.",
            "check cooling and power (gpudoctor check)"},
    };
    return codes;
}

const char* to_string(MonitorVerdict verdict)
{
    switch (verdict) {
    case MonitorVerdict::healthy:
        return "healthy";
    case MonitorVerdict::frequent_dips:
        return "frequent_dips";
    case MonitorVerdict::low:
        return "low";
    case MonitorVerdict::idle:
        return "idle";
    case MonitorVerdict::too_short:
        return "too_short";
    case MonitorVerdict::no_data:
        return "no_data";
    }
    return "?";
}

std::vector<std::string> clock_event_names(std::uint64_t bits, bool short_names)
{
    std::vector<std::string> names;
    std::uint64_t known = idle_event;
    for (const auto& [bit, name, short_name] : event_names) {
        known |= bit;
        if ((bits & bit) != 0) {
            names.emplace_back(short_names ? short_name : name);
        }
    }
    if ((bits & ~known) != 0) {
        names.push_back(fmt::format("{:#x}", bits & ~known));
    }
    return names;
}

void GpuSummariser::add(const GpuSample& sample)
{
    auto it = std::find_if(m_series.begin(), m_series.end(), [&](const Series& s) { return s.gpu == sample.gpu; });
    if (it == m_series.end()) {
        m_series.push_back(Series{});
        it = m_series.end() - 1;
        it->gpu = sample.gpu;
        it->events.assign(std::size(event_names), 0);
    }
    Series& s = *it;
    ++s.samples;
    if (sample.kernel_active) {
        s.kernel_active.push_back(static_cast<std::uint8_t>(std::min(*sample.kernel_active, 100U)));
        s.power_w.push_back(sample.power_w ? static_cast<float>(*sample.power_w) : std::nanf(""));
    }
    if (sample.memory_used && (!s.peak_memory || *sample.memory_used > *s.peak_memory)) {
        s.peak_memory = sample.memory_used;
    }
    if (sample.memory_total) {
        s.memory_total = std::max(s.memory_total.value_or(0), *sample.memory_total);
    }
    for (std::size_t e = 0; e < std::size(event_names); ++e) {
        if ((sample.clock_events.value_or(0) & event_names[e].bit) != 0) {
            ++s.events[e];
        }
    }
}

std::vector<GpuSummary> GpuSummariser::summaries(double interval) const
{
    std::vector<GpuSummary> out;
    for (const auto& series : m_series) {
        out.push_back(summarise_gpu(series, interval));
    }
    return out;
}

std::vector<GpuSummary> summarise(const std::vector<GpuSample>& samples, double interval)
{
    GpuSummariser summariser;
    for (const auto& sample : samples) {
        summariser.add(sample);
    }
    return summariser.summaries(interval);
}

std::string render_summary_text(const std::vector<MonitoredGpu>& gpus, const std::vector<GpuSummary>& summaries)
{
    auto bus_of = [&](unsigned index) {
        for (const auto& g : gpus) {
            if (g.index == index) {
                return g.bus_id.to_string();
            }
        }
        return std::string("?");
    };
    std::vector<std::vector<std::string>> rows = {{"GPU", "SAMPLES", "ACTIVE", "P10",
        fmt::format(">={}%", limits::busy), fmt::format("DIPS<{}%", limits::dip), "LONGEST", "PEAK MEMORY", "POWER"}};
    for (const auto& s : summaries) {
        const bool read = s.samples > 0;
        std::string memory = "-";
        if (s.peak_memory) {
            memory = format_bytes(*s.peak_memory);
            if (s.memory_total && *s.memory_total > 0) {
                memory += fmt::format(" ({})", percent(double(*s.peak_memory) / double(*s.memory_total)));
            }
        }
        rows.push_back({std::to_string(s.gpu), std::to_string(s.samples), read ? fmt::format("{:.1f}%", s.mean) : "-",
            read ? fmt::format("{}%", s.p10) : "-", read ? percent(s.busy_share) : "-",
            read ? std::to_string(s.dips) : "-", s.dips > 0 ? seconds(s.longest_dip_s) : "-", memory,
            s.mean_power_w ? fmt::format("{:.0f} W", *s.mean_power_w) : "-"});
    }
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            width[c] = std::max(width[c], row[c].size());
        }
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += c + 1 == row.size() ? row[c] : fmt::format("{:<{}}  ", row[c], width[c]);
        }
        out += line + "\n";
    }
    std::vector<Finding> findings;
    for (const auto& s : summaries) {
        for (auto f : s.findings) {
            f.subject = fmt::format("gpu {} ({})", s.gpu, bus_of(s.gpu));
            findings.push_back(std::move(f));
        }
    }
    // One remedy for the GPUs that share a finding: their messages under it when they differ.
    std::vector<std::vector<const Finding*>> groups;
    for (const auto& f : findings) {
        auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
            return g.front()->code == f.code && g.front()->severity == f.severity && g.front()->remedy == f.remedy;
        });
        if (same == groups.end()) {
            groups.push_back({&f});
        } else {
            same->push_back(&f);
        }
    }
    for (const auto& group : groups) {
        FindingGroup named{group.front(), {}};
        for (const Finding* f : group) {
            named.subjects.push_back(f->subject);
        }
        Finding first = *group.front();
        first.subject = named.subject();
        const bool one_message = std::all_of(
            group.begin(), group.end(), [&](const Finding* f) { return f->message == group.front()->message; });
        if (one_message) {
            out += render_text(first, false, "");
            continue;
        }
        const auto code = std::find_if(
            monitor_codes().begin(), monitor_codes().end(), [&](const FindingCode& c) { return first.code == c.code; });
        first.message = code != monitor_codes().end() ? code->title : first.code;
        first.remedy.clear();
        out += render_text(first, false, "");
        for (const Finding* f : group) {
            out += fmt::format("      {}: {}\n", f->subject.substr(0, f->subject.find(" (")), f->message);
        }
        if (group.front()->severity != Severity::pass && !group.front()->remedy.empty()) {
            out += fmt::format("      fix: {}\n", group.front()->remedy);
        }
    }
    return out;
}

namespace {

constexpr const char* row_format = "{:>8} {:>3} {:>6} {:>7} {:>4} {:>4} {:>5} {:>5} {:>4} {}\n";
constexpr std::size_t events_width = 24;

// "71.2G", "300M": a byte count in at most 7 characters.
std::string compact_bytes(std::uint64_t bytes)
{
    constexpr double gib = 1024.0 * 1024 * 1024;
    return bytes >= (std::uint64_t{1} << 30) ? fmt::format("{:.1f}G", double(bytes) / gib)
                                             : fmt::format("{}M", bytes >> 20);
}

template <typename T> std::string or_dash(const std::optional<T>& value, const char* format)
{
    return value ? fmt::format(fmt::runtime(format), *value) : std::string("-");
}

} // namespace

std::string render_sample_header()
{
    return fmt::format(
        row_format, "TIME", "GPU", "ACTIVE", "MEMORY", "MEM%", "TEMP", "SMCLK", "POWER", "PROC", "EVENTS");
}

std::string render_sample_row(const GpuSample& s)
{
    std::string events = fmt::format("{}", fmt::join(clock_event_names(s.clock_events.value_or(0), true), ","));
    if (events.size() > events_width) {
        events = events.substr(0, events_width - 1) + "+";
    }
    const std::string share = s.memory_used && s.memory_total && *s.memory_total > 0
        ? percent(double(*s.memory_used) / double(*s.memory_total))
        : "-";
    return fmt::format(row_format, seconds(s.t), s.gpu, or_dash(s.kernel_active, "{}%"),
        s.memory_used ? compact_bytes(*s.memory_used) : "-", share, or_dash(s.temperature_c, "{}C"),
        or_dash(s.sm_clock_mhz, "{}"), or_dash(s.power_w, "{:.0f}W"), or_dash(s.processes, "{}"),
        events.empty() ? "-" : events);
}

std::string render_running_line(const std::vector<GpuSummary>& summaries, std::size_t width)
{
    double sum = 0;
    unsigned read = 0;
    unsigned dips = 0;
    const GpuSummary* lowest = nullptr;
    for (const auto& s : summaries) {
        if (s.samples == 0) {
            continue;
        }
        sum += s.mean;
        ++read;
        dips += s.dips;
        if (lowest == nullptr || s.mean < lowest->mean) {
            lowest = &s;
        }
    }
    std::string line = read == 0
        ? fmt::format("so far: {} GPU{}, no kernel-active reading", summaries.size(), summaries.size() == 1 ? "" : "s")
        : fmt::format("so far: {} GPU{} kernel-active {:.0f}% on average, lowest gpu {} {:.0f}%, {} dip{}",
              summaries.size(), summaries.size() == 1 ? "" : "s", sum / read, lowest->gpu, lowest->mean, dips,
              dips == 1 ? "" : "s");
    return line.size() > width ? line.substr(0, width) : line;
}

nlohmann::json to_json(const MonitoredGpu& gpu)
{
    return {{"index", gpu.index}, {"bus_id", gpu.bus_id.to_string()}, {"name", gpu.name}, {"uuid", gpu.uuid}};
}

nlohmann::json to_json(const GpuSample& s)
{
    auto optional = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    return {{"t", std::round(s.t * 1000) / 1000}, {"gpu", s.gpu}, {"kernel_active", optional(s.kernel_active)},
        {"memory_used", optional(s.memory_used)}, {"memory_total", optional(s.memory_total)},
        {"power_w", optional(s.power_w)}, {"clock_events", clock_event_names(s.clock_events.value_or(0))},
        {"temperature_c", optional(s.temperature_c)}, {"sm_clock_mhz", optional(s.sm_clock_mhz)},
        {"processes", optional(s.processes)}};
}

nlohmann::json to_json(const GpuSummary& s)
{
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : s.findings) {
        findings.push_back(to_json(f));
    }
    auto optional = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json events = nlohmann::json::object();
    for (const auto& [name, share] : s.clock_events) {
        events[name] = share;
    }
    return {{"gpu", s.gpu}, {"samples", s.samples}, {"judged", s.judged}, {"startup_s", s.startup_s},
        {"shutdown_s", s.shutdown_s}, {"kernel_active_mean", s.mean}, {"kernel_active_p10", s.p10},
        {"busy_share", s.busy_share}, {"dip_samples", s.dip_samples}, {"dips", s.dips},
        {"longest_dip_s", s.longest_dip_s}, {"peak_memory", optional(s.peak_memory)},
        {"memory_total", optional(s.memory_total)}, {"mean_power_w", optional(s.mean_power_w)},
        {"clock_events", events}, {"verdict", to_string(s.verdict)}, {"verdict_text", s.verdict_text},
        {"notes", s.notes}, {"findings", findings}};
}

} // namespace base::usage
