#include "base/usage/sampler.hpp"

#include "base/error.hpp"
#include "base/process.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace base::usage {

namespace {

MonitoredGpu monitored(const NvmlGpu& g)
{
    return MonitoredGpu{g.index, g.bus_id, g.name, g.uuid};
}

std::string listed(const std::vector<NvmlGpu>& all)
{
    std::vector<std::string> names;
    for (const auto& g : all) {
        names.push_back(fmt::format("{} ({})", g.index, g.bus_id.to_string()));
    }
    return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

} // namespace

std::vector<MonitoredGpu> select_gpus(
    const std::vector<NvmlGpu>& all, const std::vector<std::string>& selectors, std::string_view where)
{
    std::vector<MonitoredGpu> out;
    if (selectors.empty()) {
        for (const auto& g : all) {
            out.push_back(monitored(g));
        }
        return out;
    }
    for (const auto& text : selectors) {
        const bool is_index = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        const auto bus = is_index ? std::nullopt : PciAddress::parse(text);
        auto it = std::find_if(all.begin(), all.end(), [&](const NvmlGpu& g) {
            return (is_index && text.size() < 6 && std::to_string(g.index) == std::to_string(std::stoul(text))) ||
                (bus && g.bus_id == *bus) || (!g.uuid.empty() && g.uuid == text);
        });
        if (it == all.end()) {
            throw Error(fmt::format(
                "{} {}: no such GPU; NVML lists {} (an index, a bus id or a UUID)", where, text, listed(all)));
        }
        if (std::any_of(out.begin(), out.end(), [&](const MonitoredGpu& g) { return g.index == it->index; })) {
            throw Error(fmt::format("{} {}: GPU {} is named twice", where, text, it->index));
        }
        out.push_back(monitored(*it));
    }
    return out;
}

std::vector<MonitoredGpu> gpus_at(const std::vector<NvmlGpu>& all, const std::vector<PciAddress>& bus_ids)
{
    std::vector<MonitoredGpu> out;
    for (const auto& bus : bus_ids) {
        auto it = std::find_if(all.begin(), all.end(), [&](const NvmlGpu& g) { return g.bus_id == bus; });
        if (it == all.end()) {
            throw Error(fmt::format("NVML does not list the GPU at {}; it lists {}", bus.to_string(), listed(all)));
        }
        out.push_back(monitored(*it));
    }
    return out;
}

GpuSampler::GpuSampler(const Nvml& nvml, std::vector<MonitoredGpu> gpus) : m_nvml(nvml), m_gpus(std::move(gpus))
{
    for (const auto& g : m_gpus) {
        m_handles.push_back(m_nvml.handle(g.index));
    }
}

std::vector<GpuSample> GpuSampler::sample(double t) const
{
    using namespace nvml_abi;
    const NvmlApi& api = m_nvml.api();
    std::vector<GpuSample> out;
    for (std::size_t i = 0; i < m_gpus.size(); ++i) {
        const Device d = m_handles[i];
        GpuSample s;
        s.t = t;
        s.gpu = m_gpus[i].index;
        Utilization u{};
        if (api.utilization != nullptr && api.utilization(d, &u) == success) {
            s.kernel_active = u.gpu;
        }
        Memory memory{};
        if (api.memory != nullptr && api.memory(d, &memory) == success) {
            s.memory_used = memory.used;
            s.memory_total = memory.total;
        }
        unsigned int milliwatts = 0;
        if (api.power_usage != nullptr && api.power_usage(d, &milliwatts) == success) {
            s.power_w = milliwatts / 1000.0;
        }
        unsigned long long reasons = 0;
        if (api.clock_event_reasons != nullptr && api.clock_event_reasons(d, &reasons) == success) {
            s.clock_events = reasons;
        }
        constexpr int temperature_gpu = 0; // NVML_TEMPERATURE_GPU
        constexpr int clock_sm = 1; // NVML_CLOCK_SM
        unsigned int value = 0;
        if (api.temperature != nullptr && api.temperature(d, temperature_gpu, &value) == success) {
            s.temperature_c = value;
        }
        if (api.clock_info != nullptr && api.clock_info(d, clock_sm, &value) == success) {
            s.sm_clock_mhz = value;
        }
        unsigned int count = 0;
        if (api.running_processes != nullptr) {
            const Return rc = api.running_processes(d, &count, nullptr);
            if (rc == success || rc == error_insufficient_size) {
                s.processes = count;
            }
        }
        out.push_back(s);
    }
    return out;
}

std::vector<std::vector<NvmlProcess>> GpuSampler::processes() const
{
    std::vector<std::vector<NvmlProcess>> out;
    for (const auto d : m_handles) {
        out.push_back(m_nvml.compute_processes(d));
    }
    return out;
}

namespace {
constexpr double max_catch_up_s = 0.5;
} // namespace

SampleSchedule::SampleSchedule(double interval, Clock::time_point start) : m_interval(interval), m_start(start)
{
}

SampleSchedule::Clock::time_point SampleSchedule::next_at() const
{
    return m_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(next_t()));
}

void SampleSchedule::taken(Clock::time_point now)
{
    ++m_next;
    // A short stall is caught up (samples come back to back), so a loaded machine still gives the
    // same samples; a long one (a slow NVML call) skips the slots it missed.
    const double behind = std::chrono::duration<double>(now - m_start).count() - next_t();
    if (behind > std::max(m_interval, max_catch_up_s)) {
        m_next += static_cast<unsigned long long>(std::floor(behind / m_interval)) + 1;
    }
}

unsigned sample_on_schedule(const GpuSampler* sampler, SampleSchedule& schedule, double duration,
    const NvmlDeadline& deadline, const std::function<bool(SampleSchedule::Clock::time_point until)>& wait,
    const std::function<void(const std::vector<GpuSample>& samples)>& taken)
{
    if (sampler == nullptr) {
        while (!wait(SampleSchedule::Clock::time_point::max())) { }
        return 0;
    }
    unsigned rounds = 0;
    while (!(duration > 0 && schedule.next_t() >= duration - 1e-9) && !wait(schedule.next_at())) {
        std::vector<GpuSample> samples;
        {
            const CallDeadline guard(deadline.seconds, deadline.message, deadline.exit_code, deadline.cleanup);
            samples = sampler->sample(schedule.next_t());
        }
        taken(samples);
        ++rounds;
        schedule.taken();
    }
    return rounds;
}

} // namespace base::usage
