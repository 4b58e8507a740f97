#pragma once

// The GPU memory in use while a child runs, sampled from NVML on a thread of its own: the peak
// of a fit --search trial, the rise a framework's CUDA context makes (fit --cuda-context measure).

#include "base/nvml.hpp"
#include "base/process.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace doctor::fit {

/// The deadline fit puts on a call into NVML (base::CallDeadline): past `seconds`, gpudoctor
/// says NVML is stuck and ends with exit status 3.
base::CallDeadline nvml_deadline(unsigned seconds = 30);

/// Samples nvmlDeviceGetMemoryInfo's used memory of the GPUs given by NVML index (all of them
/// when none is given) every `interval`, from construction to stop(), and keeps the largest value
/// of the busiest GPU. The first sample is taken in the constructor: the use before the child
/// starts. Does nothing when NVML cannot be loaded. NVML runs in this process (its handles are
/// this process's), so each call into it has `deadline_s` (nvml_deadline): a driver call that
/// never returns ends gpudoctor with exit status 3 and a message, instead of hanging it.
class GpuMemorySampler {
public:
    explicit GpuMemorySampler(const std::vector<unsigned>& indexes = {},
        std::chrono::milliseconds interval = std::chrono::milliseconds(100), unsigned deadline_s = 30);
    ~GpuMemorySampler();
    GpuMemorySampler(const GpuMemorySampler&) = delete;
    GpuMemorySampler& operator=(const GpuMemorySampler&) = delete;

    /// Stops sampling (after one last sample) and returns the peak in MiB, if any sample worked.
    std::optional<double> stop();
    /// After stop(): the peak in bytes and the total memory of that GPU.
    std::optional<std::uint64_t> peak_bytes() const { return m_peak; }
    std::uint64_t total_bytes() const { return m_total; }
    /// The busiest GPU's use at the first sample, if it worked.
    std::optional<std::uint64_t> first_bytes() const { return m_first; }

private:
    void loop();
    void sample();

    std::optional<base::Nvml> m_nvml;
    std::vector<base::nvml_abi::Device> m_devices;
    std::chrono::milliseconds m_interval;
    unsigned m_deadline_s;
    std::thread m_thread;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::mutex m_peak_mutex;
    std::optional<std::uint64_t> m_peak;
    std::optional<std::uint64_t> m_first;
    std::uint64_t m_total = 0; ///< of the GPU at the peak
};

} // namespace doctor::fit
