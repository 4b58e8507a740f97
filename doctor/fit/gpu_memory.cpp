#include "doctor/fit/gpu_memory.hpp"

#include "base/error.hpp"

#include <algorithm>

namespace doctor::fit {

base::CallDeadline nvml_deadline(unsigned seconds)
{
    return base::CallDeadline(seconds,
        "gpudoctor: fit: an NVML call did not return in time; gpudoctor stops (see nvidia-smi and the kernel log "
        "for a stuck driver)\n",
        3);
}

GpuMemorySampler::GpuMemorySampler(
    const std::vector<unsigned>& indexes, std::chrono::milliseconds interval, unsigned deadline_s)
    : m_interval(interval), m_deadline_s(deadline_s)
{
    {
        const base::CallDeadline deadline = nvml_deadline(m_deadline_s);
        try {
            m_nvml.emplace(base::Nvml::load());
        } catch (const base::Error&) {
            return; // no NVML: no peak
        }
        unsigned count = 0;
        if (m_nvml->api().memory == nullptr || m_nvml->api().device_count(&count) != base::nvml_abi::success) {
            return;
        }
        for (unsigned i = 0; i < count; ++i) {
            base::nvml_abi::Device device = nullptr;
            if ((indexes.empty() || std::find(indexes.begin(), indexes.end(), i) != indexes.end()) &&
                m_nvml->api().handle_by_index(i, &device) == base::nvml_abi::success) {
                m_devices.push_back(device);
            }
        }
    }
    if (!m_devices.empty()) {
        sample();
        m_first = m_peak;
        m_thread = std::thread([this] { loop(); });
    }
}

GpuMemorySampler::~GpuMemorySampler()
{
    stop();
}

std::optional<double> GpuMemorySampler::stop()
{
    if (m_thread.joinable()) {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        m_thread.join();
        sample();
    }
    if (!m_peak) {
        return std::nullopt;
    }
    return static_cast<double>(*m_peak) / (1024.0 * 1024.0);
}

void GpuMemorySampler::loop()
{
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_interval, [this] { return m_stop; })) {
        lock.unlock();
        sample();
        lock.lock();
    }
}

void GpuMemorySampler::sample()
{
    const base::CallDeadline deadline = nvml_deadline(m_deadline_s);
    for (auto device : m_devices) {
        base::nvml_abi::Memory memory{};
        if (m_nvml->api().memory(device, &memory) == base::nvml_abi::success) {
            std::lock_guard lock(m_peak_mutex);
            if (!m_peak || memory.used > *m_peak) {
                m_peak = memory.used;
                m_total = memory.total;
            }
        }
    }
}

} // namespace doctor::fit
