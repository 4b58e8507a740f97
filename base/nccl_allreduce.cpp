#include "base/nccl_allreduce.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fmt/format.h>

namespace base {

std::string nccl_version_text(int version)
{
    if (version >= 10000) {
        return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
    }
    return fmt::format("{}.{}.{}", version / 1000, (version % 1000) / 100, version % 100);
}

std::string Nccl::default_file()
{
    const char* override_file = std::getenv("GPUKIT_NCCL_LIBRARY");
    return override_file != nullptr && *override_file != '\0' ? override_file : "libnccl.so.2";
}

Nccl Nccl::load()
{
    return load(default_file());
}

Nccl Nccl::load(const std::string& file)
{
    DynamicLibrary library(file);
    NcclApi api;
    const char* missing = nullptr;
    auto require = [&](auto& fn, const char* symbol) {
        if (!library.bind(fn, symbol) && missing == nullptr) {
            missing = symbol;
        }
    };
    require(api.get_version, "ncclGetVersion");
    require(api.comm_init_all, "ncclCommInitAll");
    require(api.comm_destroy, "ncclCommDestroy");
    require(api.all_reduce, "ncclAllReduce");
    require(api.group_start, "ncclGroupStart");
    require(api.group_end, "ncclGroupEnd");
    if (missing != nullptr) {
        throw Error(fmt::format(
            "{} is not a usable NCCL library: it lacks {}; point GPUKIT_NCCL_LIBRARY at libnccl.so.2", file, missing));
    }
    library.bind(api.error_string, "ncclGetErrorString");
    library.bind(api.get_unique_id, "ncclGetUniqueId");
    library.bind(api.comm_init_rank, "ncclCommInitRank");
    return Nccl(std::move(library), api);
}

Nccl::Nccl(DynamicLibrary library, NcclApi api) : m_library(std::move(library)), m_api(api)
{
}

std::string Nccl::version() const
{
    int version = 0;
    check(m_api.get_version(&version), "ncclGetVersion");
    return nccl_version_text(version);
}

std::string Nccl::describe(nccl_abi::Result rc) const
{
    const char* text = m_api.error_string != nullptr ? m_api.error_string(rc) : nullptr;
    return text != nullptr ? fmt::format("{} (ncclResult {})", text, rc) : fmt::format("ncclResult {}", rc);
}

void Nccl::check(nccl_abi::Result rc, const std::string& what) const
{
    if (rc != nccl_abi::success) {
        throw Error(fmt::format("{} failed: {}", what, describe(rc)));
    }
}

double allreduce_bus_factor(int ranks)
{
    return ranks < 1 ? 0.0 : 2.0 * (ranks - 1) / ranks;
}

void allreduce_rates(std::size_t bytes, double time_us, int ranks, double& algbw_gbps, double& busbw_gbps)
{
    algbw_gbps = time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
    busbw_gbps = algbw_gbps * allreduce_bus_factor(ranks);
}

namespace {

using namespace cuda_abi;

/// One rank's GPU: its primary context, stream, events and buffers. Freed in its own context.
struct Rank {
    const Cuda* cuda = nullptr;
    Device device = 0;
    Context context = nullptr;
    Stream stream = nullptr;
    Event start = nullptr;
    Event stop = nullptr;
    DevicePtr send = 0;
    DevicePtr recv = 0;

    Rank(const Cuda& c, Device d, std::size_t bytes) : cuda(&c), device(d)
    {
        const CudaApi& api = c.api();
        c.check(api.primary_ctx_retain(&context, d), fmt::format("cuDevicePrimaryCtxRetain (device {})", d));
        c.check(api.ctx_set_current(context), "cuCtxSetCurrent");
        c.check(api.stream_create(&stream, stream_non_blocking), "cuStreamCreate");
        c.check(api.event_create(&start, event_default), "cuEventCreate");
        c.check(api.event_create(&stop, event_default), "cuEventCreate");
        const std::string what =
            fmt::format("cuMemAlloc of {} MiB on GPU {}", std::max<std::size_t>(bytes >> 20, 1), d);
        c.check(api.mem_alloc(&send, bytes), what);
        c.check(api.mem_alloc(&recv, bytes), what);
    }
    ~Rank()
    {
        const CudaApi& api = cuda->api();
        if (context == nullptr) {
            return;
        }
        api.ctx_set_current(context);
        if (stream != nullptr) {
            api.stream_synchronize(stream);
        }
        if (recv != 0) {
            api.mem_free(recv);
        }
        if (send != 0) {
            api.mem_free(send);
        }
        if (stop != nullptr) {
            api.event_destroy(stop);
        }
        if (start != nullptr) {
            api.event_destroy(start);
        }
        if (stream != nullptr) {
            api.stream_destroy(stream);
        }
        api.ctx_set_current(nullptr);
        api.primary_ctx_release(device);
    }
    Rank(const Rank&) = delete;
    Rank& operator=(const Rank&) = delete;
};

/// Communicators, destroyed before the ranks' contexts go.
struct Comms {
    const Nccl* nccl = nullptr;
    std::vector<nccl_abi::Comm> comms;
    ~Comms()
    {
        for (nccl_abi::Comm c : comms) {
            if (c != nullptr) {
                nccl->api().comm_destroy(c);
            }
        }
    }
};

const void* as_pointer(DevicePtr p)
{
    return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(p));
}

} // namespace

AllReduceResult measure_allreduce(const Cuda& cuda, const Nccl& nccl, const std::vector<int>& devices,
    const AllReduceSettings& settings, const JoinedComm* joined)
{
    if (devices.empty()) {
        throw Error("the all-reduce needs at least one GPU");
    }
    if (settings.bytes < 4 || settings.iterations == 0) {
        throw Error("the all-reduce needs at least 4 bytes and one iteration");
    }
    if (const char* missing = cuda.missing_copy_symbol()) {
        throw Error(fmt::format("{} lacks {}; it is not a CUDA driver library this tool can measure with (point "
                                "GPUKIT_CUDA_LIBRARY at the driver's libcuda.so.1)",
            cuda.file(), missing));
    }
    cuda.init();
    AllReduceResult result;
    result.settings = settings;
    result.devices = devices;
    result.ranks = joined != nullptr ? joined->ranks : static_cast<int>(devices.size());
    result.nccl_version = nccl.version();
    if (joined != nullptr &&
        (nccl.api().comm_init_rank == nullptr || joined->first_rank < 0 ||
            joined->first_rank + static_cast<int>(devices.size()) > joined->ranks)) {
        throw Error(nccl.api().comm_init_rank == nullptr
                ? fmt::format("{} lacks ncclCommInitRank", nccl.file())
                : fmt::format("ranks {} to {} do not fit a communicator of {}", joined->first_rank,
                      joined->first_rank + static_cast<int>(devices.size()) - 1, joined->ranks));
    }
    const std::size_t count = settings.bytes / 4;
    const std::size_t bytes = count * 4;
    result.settings.bytes = bytes;

    std::vector<std::unique_ptr<Rank>> ranks;
    for (int d : devices) {
        ranks.push_back(std::make_unique<Rank>(cuda, d, bytes));
    }
    Comms comms;
    comms.nccl = &nccl;
    comms.comms.assign(devices.size(), nullptr);
    if (joined == nullptr) {
        nccl.check(nccl.api().comm_init_all(comms.comms.data(), static_cast<int>(devices.size()), devices.data()),
            fmt::format("ncclCommInitAll over GPUs {}", fmt::join(devices, ",")));
    } else {
        // Each device's rank made in its own context, all in one group: NCCL joins them together.
        nccl.check(nccl.api().group_start(), "ncclGroupStart");
        nccl_abi::Result first_error = nccl_abi::success;
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            cuda.check(cuda.api().ctx_set_current(ranks[i]->context), "cuCtxSetCurrent");
            const nccl_abi::Result rc = nccl.api().comm_init_rank(
                &comms.comms[i], joined->ranks, joined->id, joined->first_rank + static_cast<int>(i));
            first_error = first_error == nccl_abi::success ? rc : first_error;
        }
        const nccl_abi::Result end = nccl.api().group_end();
        nccl.check(first_error, fmt::format("ncclCommInitRank (ranks {} of {})", joined->first_rank, joined->ranks));
        nccl.check(end, "ncclGroupEnd (ncclCommInitRank)");
    }

    const NcclApi& api = nccl.api();
    auto launch = [&] {
        nccl.check(api.group_start(), "ncclGroupStart");
        nccl_abi::Result first_error = nccl_abi::success;
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            const Rank& r = *ranks[i];
            nccl_abi::Result rc = api.all_reduce(as_pointer(r.send), const_cast<void*>(as_pointer(r.recv)), count,
                nccl_abi::float32, nccl_abi::sum, comms.comms[i], r.stream);
            if (rc != nccl_abi::success && first_error == nccl_abi::success) {
                first_error = rc;
            }
        }
        // The group is always closed, so NCCL is left in a usable state for the clean-up.
        const nccl_abi::Result end = api.group_end();
        nccl.check(first_error, "ncclAllReduce");
        nccl.check(end, "ncclGroupEnd");
    };
    auto synchronize = [&] {
        for (const auto& r : ranks) {
            cuda.check(
                cuda.api().stream_synchronize(r->stream), fmt::format("cuStreamSynchronize (GPU {})", r->device));
        }
    };
    for (unsigned w = 0; w < settings.warmup; ++w) {
        launch();
    }
    synchronize();
    for (const auto& r : ranks) {
        cuda.check(cuda.api().event_record(r->start, r->stream), "cuEventRecord");
    }
    for (unsigned i = 0; i < settings.iterations; ++i) {
        launch();
    }
    for (const auto& r : ranks) {
        cuda.check(cuda.api().event_record(r->stop, r->stream), "cuEventRecord");
    }
    synchronize();
    double slowest_ms = 0;
    for (const auto& r : ranks) {
        float ms = 0;
        cuda.check(cuda.api().event_elapsed_time(&ms, r->start, r->stop), "cuEventElapsedTime");
        slowest_ms = std::max(slowest_ms, static_cast<double>(ms));
    }
    if (!(slowest_ms > 0)) {
        throw Error("the all-reduces took no measurable time (the events report 0 ms)");
    }
    result.time_us = slowest_ms * 1000.0 / settings.iterations;
    allreduce_rates(bytes, result.time_us, result.ranks, result.algbw_gbps, result.busbw_gbps);
    return result;
}

nlohmann::json to_json(const AllReduceResult& result)
{
    return {{"nccl_version", result.nccl_version}, {"devices", result.devices}, {"ranks", result.ranks},
        {"bytes", result.settings.bytes}, {"warmup", result.settings.warmup},
        {"iterations", result.settings.iterations}, {"time_us", result.time_us}, {"algbw_gbps", result.algbw_gbps},
        {"bus_factor", allreduce_bus_factor(result.ranks)}, {"busbw_gbps", result.busbw_gbps}};
}

} // namespace base
