#include "base/gpu_bandwidth.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <memory>

namespace base {

namespace {

using namespace cuda_abi;

// Owned driver objects. Each frees itself in the context that was current when it was made, so
// the caller keeps that context current for the object's lifetime (every scope below does).
class PrimaryContext {
public:
    PrimaryContext(const Cuda& cuda, Device device) : m_cuda(&cuda), m_device(device)
    {
        cuda.check(cuda.api().primary_ctx_retain(&m_context, device),
            fmt::format("cuDevicePrimaryCtxRetain (device {})", device));
    }
    ~PrimaryContext()
    {
        if (m_context != nullptr) {
            m_cuda->api().primary_ctx_release(m_device);
        }
    }
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;

    void make_current() const { m_cuda->check(m_cuda->api().ctx_set_current(m_context), "cuCtxSetCurrent"); }
    Context get() const { return m_context; }

private:
    const Cuda* m_cuda;
    Device m_device;
    Context m_context = nullptr;
};

class DeviceBuffer {
public:
    DeviceBuffer(const Cuda& cuda, std::size_t bytes, int device) : m_cuda(&cuda)
    {
        cuda.check(cuda.api().mem_alloc(&m_ptr, bytes),
            fmt::format("cuMemAlloc of {} MiB on GPU {}", bytes >> 20 > 0 ? bytes >> 20 : 1, device));
    }
    ~DeviceBuffer()
    {
        if (m_ptr != 0) {
            m_cuda->api().mem_free(m_ptr);
        }
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DevicePtr get() const { return m_ptr; }

private:
    const Cuda* m_cuda;
    DevicePtr m_ptr = 0;
};

class HostBuffer {
public:
    HostBuffer(const Cuda& cuda, std::size_t bytes) : m_cuda(&cuda)
    {
        cuda.check(cuda.api().mem_host_alloc(&m_ptr, bytes, host_alloc_portable),
            fmt::format("cuMemHostAlloc of {} MiB of pinned host memory", bytes >> 20 > 0 ? bytes >> 20 : 1));
    }
    ~HostBuffer()
    {
        if (m_ptr != nullptr) {
            m_cuda->api().mem_free_host(m_ptr);
        }
    }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    void* get() const { return m_ptr; }

private:
    const Cuda* m_cuda;
    void* m_ptr = nullptr;
};

/// A stream with the two events that time a sample on it.
class TimedStream {
public:
    explicit TimedStream(const Cuda& cuda) : m_cuda(&cuda)
    {
        cuda.check(cuda.api().stream_create(&m_stream, stream_non_blocking), "cuStreamCreate");
        cuda.check(cuda.api().event_create(&m_start, event_default), "cuEventCreate");
        cuda.check(cuda.api().event_create(&m_stop, event_default), "cuEventCreate");
    }
    ~TimedStream()
    {
        const CudaApi& api = m_cuda->api();
        if (m_stop != nullptr) {
            api.event_destroy(m_stop);
        }
        if (m_start != nullptr) {
            api.event_destroy(m_start);
        }
        if (m_stream != nullptr) {
            api.stream_synchronize(m_stream);
            api.stream_destroy(m_stream);
        }
    }
    TimedStream(const TimedStream&) = delete;
    TimedStream& operator=(const TimedStream&) = delete;

    Stream stream() const { return m_stream; }

    /// Milliseconds between events around `copies` calls of `enqueue`.
    template <typename Enqueue> double time(unsigned copies, const char* what, const Enqueue& enqueue) const
    {
        const CudaApi& api = m_cuda->api();
        m_cuda->check(api.event_record(m_start, m_stream), "cuEventRecord");
        for (unsigned i = 0; i < copies; ++i) {
            m_cuda->check(enqueue(m_stream), what);
        }
        m_cuda->check(api.event_record(m_stop, m_stream), "cuEventRecord");
        m_cuda->check(api.event_synchronize(m_stop), fmt::format("cuEventSynchronize after {}", what));
        float ms = 0;
        m_cuda->check(api.event_elapsed_time(&ms, m_start, m_stop), "cuEventElapsedTime");
        return ms;
    }

    /// One warm-up sample, then `samples` timed ones, as a rate.
    template <typename Enqueue>
    Rate rate(const CopySettings& settings, std::size_t bytes, const char* what, const Enqueue& enqueue) const
    {
        time(settings.copies, what, enqueue);
        std::vector<double> elapsed;
        for (unsigned s = 0; s < settings.samples; ++s) {
            elapsed.push_back(time(settings.copies, what, enqueue));
        }
        return rate_of(elapsed, bytes * settings.copies);
    }

private:
    const Cuda* m_cuda;
    Stream m_stream = nullptr;
    Event m_start = nullptr;
    Event m_stop = nullptr;
};

std::string device_text(
    const Cuda& cuda, Device device, int length, Result (*call)(char*, int, Device), const char* what)
{
    std::string text(static_cast<std::size_t>(length), '\0');
    cuda.check(call(text.data(), length, device), fmt::format("{} (device {})", what, device));
    text.resize(std::strlen(text.c_str()));
    return text;
}

/// Runs one measurement and keeps its error beside the others'.
template <typename Measure> void attempt(std::string& errors, const Measure& measure)
{
    try {
        measure();
    } catch (const Error& e) {
        errors += errors.empty() ? e.what() : fmt::format("; {}", e.what());
    }
}

void measure_gpu(
    const Cuda& cuda, const CopySettings& settings, GpuCopies& gpu, const Progress& progress, const std::string& step)
{
    PrimaryContext context(cuda, gpu.index);
    context.make_current();
    const CudaApi& api = cuda.api();
    const std::size_t bytes = settings.bytes;
    attempt(gpu.error, [&] {
        TimedStream timed(cuda);
        DeviceBuffer a(cuda, bytes, gpu.index);
        attempt(gpu.error, [&] {
            HostBuffer host(cuda, bytes);
            if (progress) {
                progress(fmt::format("{}: host→device", step));
            }
            attempt(gpu.error, [&] {
                gpu.h2d = timed.rate(settings, bytes, "cuMemcpyHtoDAsync",
                    [&](Stream s) { return api.memcpy_htod_async(a.get(), host.get(), bytes, s); });
            });
            if (progress) {
                progress(fmt::format("{}: device→host", step));
            }
            attempt(gpu.error, [&] {
                gpu.d2h = timed.rate(settings, bytes, "cuMemcpyDtoHAsync",
                    [&](Stream s) { return api.memcpy_dtoh_async(host.get(), a.get(), bytes, s); });
            });
        });
        if (progress) {
            progress(fmt::format("{}: device→device", step));
        }
        DeviceBuffer b(cuda, bytes, gpu.index);
        gpu.d2d = timed.rate(settings, bytes, "cuMemcpyDtoDAsync",
            [&](Stream s) { return api.memcpy_dtod_async(b.get(), a.get(), bytes, s); });
    });
    api.ctx_set_current(nullptr);
}

void enable_peer(const Cuda& cuda, const PrimaryContext& from, const PrimaryContext& to)
{
    from.make_current();
    const Result rc = cuda.api().ctx_enable_peer_access(to.get(), 0);
    if (rc != peer_access_already_enabled) {
        cuda.check(rc, "cuCtxEnablePeerAccess");
    }
}

void measure_peers(const Cuda& cuda, const CopySettings& settings, BandwidthReport& report, const Progress& progress)
{
    const CudaApi& api = cuda.api();
    const int n = static_cast<int>(report.gpus.size());
    for (int src = 0; src < n; ++src) {
        for (int dst = 0; dst < n; ++dst) {
            if (src == dst) {
                continue;
            }
            PeerCopies pair;
            pair.src = report.gpus[static_cast<std::size_t>(src)].index;
            pair.dst = report.gpus[static_cast<std::size_t>(dst)].index;
            int forward = 0;
            int backward = 0;
            attempt(pair.error, [&] {
                cuda.check(api.device_can_access_peer(&forward, pair.src, pair.dst), "cuDeviceCanAccessPeer");
                cuda.check(api.device_can_access_peer(&backward, pair.dst, pair.src), "cuDeviceCanAccessPeer");
            });
            pair.access = forward != 0 && backward != 0;
            report.peers.push_back(pair);
        }
    }
    if (std::none_of(report.peers.begin(), report.peers.end(), [](const PeerCopies& p) { return p.access; })) {
        return;
    }
    // Every context and one buffer per GPU stay for the whole matrix: a pair reads the source's
    // buffer and writes the destination's.
    std::vector<std::unique_ptr<PrimaryContext>> contexts;
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    std::vector<std::unique_ptr<TimedStream>> streams;
    std::string setup_error;
    attempt(setup_error, [&] {
        for (const auto& gpu : report.gpus) {
            contexts.push_back(std::make_unique<PrimaryContext>(cuda, gpu.index));
            contexts.back()->make_current();
            buffers.push_back(std::make_unique<DeviceBuffer>(cuda, settings.bytes, gpu.index));
            streams.push_back(std::make_unique<TimedStream>(cuda));
        }
    });
    auto slot = [&](int device) {
        for (std::size_t i = 0; i < report.gpus.size(); ++i) {
            if (report.gpus[i].index == device) {
                return i;
            }
        }
        return report.gpus.size();
    };
    std::size_t done = 0;
    const auto pairs =
        std::count_if(report.peers.begin(), report.peers.end(), [](const PeerCopies& p) { return p.access; });
    for (auto& pair : report.peers) {
        if (!pair.access) {
            continue;
        }
        if (!setup_error.empty()) {
            pair.error = setup_error;
            continue;
        }
        ++done;
        if (progress) {
            progress(fmt::format("peer copies {}/{}: GPU {}→GPU {}", done, pairs, pair.src, pair.dst));
        }
        const std::size_t s = slot(pair.src);
        const std::size_t d = slot(pair.dst);
        attempt(pair.error, [&] {
            enable_peer(cuda, *contexts[s], *contexts[d]);
            enable_peer(cuda, *contexts[d], *contexts[s]);
            contexts[s]->make_current();
            const Context src_ctx = contexts[s]->get();
            const Context dst_ctx = contexts[d]->get();
            const DevicePtr from = buffers[s]->get();
            const DevicePtr to = buffers[d]->get();
            pair.bandwidth = streams[s]->rate(settings, settings.bytes, "cuMemcpyPeerAsync",
                [&](Stream st) { return api.memcpy_peer_async(to, dst_ctx, from, src_ctx, settings.bytes, st); });
            std::vector<double> latencies;
            const unsigned small = std::max(1U, settings.latency_copies);
            for (unsigned k = 0; k <= settings.samples; ++k) {
                const double ms = streams[s]->time(small, "cuMemcpyPeerAsync",
                    [&](Stream st) { return api.memcpy_peer_async(to, dst_ctx, from, src_ctx, 4, st); });
                if (k > 0) { // the first is the warm-up
                    latencies.push_back(ms * 1000.0 / small);
                }
            }
            pair.latency_us = median(latencies);
        });
    }
    // Free in each GPU's own context.
    for (std::size_t i = contexts.size(); i-- > 0;) {
        api.ctx_set_current(contexts[i]->get());
        if (i < streams.size()) {
            streams[i].reset();
        }
        if (i < buffers.size()) {
            buffers[i].reset();
        }
    }
    api.ctx_set_current(nullptr);
}

std::string lower(std::string text)
{
    for (char& c : text) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return text;
}

nlohmann::json rate_json(const std::optional<Rate>& rate)
{
    if (!rate) {
        return nullptr;
    }
    return {{"median_gbps", rate->median_gbps}, {"min_gbps", rate->min_gbps}, {"max_gbps", rate->max_gbps},
        {"samples_gbps", rate->samples_gbps}};
}

} // namespace

double median(std::vector<double> values)
{
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Rate rate_of(const std::vector<double>& elapsed_ms, std::size_t bytes_per_sample)
{
    Rate rate;
    for (double ms : elapsed_ms) {
        if (ms > 0 && std::isfinite(ms)) {
            rate.samples_gbps.push_back(static_cast<double>(bytes_per_sample) / (ms * 1e6));
        }
    }
    if (rate.samples_gbps.empty()) {
        throw Error("the copies took no measurable time (the events report 0 ms)");
    }
    rate.median_gbps = median(rate.samples_gbps);
    auto [lo, hi] = std::minmax_element(rate.samples_gbps.begin(), rate.samples_gbps.end());
    rate.min_gbps = *lo;
    rate.max_gbps = *hi;
    return rate;
}

std::optional<double> pcie_link_gbps(double gt_per_s, unsigned width)
{
    // Per lane, one direction: 8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s, 242B/256B FLITs at 64.
    struct Generation {
        double gt;
        double efficiency;
    };
    static constexpr Generation generations[] = {{2.5, 0.8}, {5.0, 0.8}, {8.0, 128.0 / 130.0}, {16.0, 128.0 / 130.0},
        {32.0, 128.0 / 130.0}, {64.0, 242.0 / 256.0}};
    if (width == 0) {
        return std::nullopt;
    }
    for (const auto& g : generations) {
        if (std::fabs(gt_per_s - g.gt) < 0.01) {
            return g.gt * g.efficiency / 8.0 * width;
        }
    }
    return std::nullopt;
}

std::vector<CudaDevice> cuda_devices(const Cuda& cuda)
{
    const CudaApi& api = cuda.api();
    std::vector<CudaDevice> out;
    const int count = cuda.device_count();
    for (int ordinal = 0; ordinal < count; ++ordinal) {
        CudaDevice d;
        Device device = 0;
        cuda.check(api.device_get(&device, ordinal), fmt::format("cuDeviceGet ({})", ordinal));
        d.index = device;
        d.name = device_text(cuda, device, 256, api.device_name, "cuDeviceGetName");
        d.bus_id = lower(device_text(cuda, device, 64, api.device_pci_bus_id, "cuDeviceGetPCIBusId"));
        out.push_back(std::move(d));
    }
    return out;
}

BandwidthReport measure_bandwidth(
    const Cuda& cuda, const CopySettings& settings, const Progress& progress, const PlaceNear& place_near)
{
    if (const char* missing = cuda.missing_copy_symbol()) {
        throw Error(fmt::format("{} lacks {}, which copies need; it is not a CUDA driver library this tool can "
                                "measure with (point GPUKIT_CUDA_LIBRARY at the driver's libcuda.so.1)",
            cuda.file(), missing));
    }
    if (settings.bytes < 4 || settings.copies == 0 || settings.samples == 0) {
        throw Error("copy settings need at least 4 bytes, one copy and one sample");
    }
    cuda.init();
    BandwidthReport report;
    report.settings = settings;
    report.cuda_driver_version = cuda.driver_version();
    const int count = cuda.device_count();
    if (count <= 0) {
        throw Error("CUDA sees no GPU (cuDeviceGetCount says 0): check CUDA_VISIBLE_DEVICES and nvidia-smi");
    }
    const auto devices = cuda_devices(cuda);
    for (const auto& device : devices) {
        GpuCopies gpu;
        gpu.index = device.index;
        gpu.name = device.name;
        gpu.bus_id = device.bus_id;
        const std::string step = fmt::format("GPU {}/{} ({})", report.gpus.size() + 1, count, gpu.name);
        if (place_near) {
            gpu.placement = place_near(gpu);
        }
        attempt(gpu.error, [&] { measure_gpu(cuda, settings, gpu, progress, step); });
        report.gpus.push_back(std::move(gpu));
    }
    if (count > 1) {
        measure_peers(cuda, settings, report, progress);
    }
    return report;
}

nlohmann::json to_json(const BandwidthReport& report)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : report.gpus) {
        gpus.push_back({{"index", g.index}, {"name", g.name}, {"bus_id", g.bus_id}, {"placement", g.placement},
            {"h2d", rate_json(g.h2d)}, {"d2h", rate_json(g.d2h)}, {"d2d", rate_json(g.d2d)}, {"error", g.error}});
    }
    nlohmann::json peers = nlohmann::json::array();
    for (const auto& p : report.peers) {
        peers.push_back({{"src", p.src}, {"dst", p.dst}, {"access", p.access}, {"bandwidth", rate_json(p.bandwidth)},
            {"latency_us", p.latency_us ? nlohmann::json(*p.latency_us) : nlohmann::json(nullptr)},
            {"error", p.error}});
    }
    return {{"settings",
                {{"bytes", report.settings.bytes}, {"copies", report.settings.copies},
                    {"samples", report.settings.samples}, {"latency_copies", report.settings.latency_copies}}},
        {"cuda_driver_version", report.cuda_driver_version}, {"gpus", gpus}, {"peers", peers}};
}

} // namespace base
