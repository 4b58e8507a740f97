// Stand-ins for the CUDA libraries gpudoctor opens, with the same C symbols, answering from
// environment variables read at every call (so one loaded copy serves many tests).
// Built once per library with a -D switch:
//   FAKE_CUDA_DRIVER  libcuda.so.1: cuInit, cuDriverGetVersion, cuDeviceGetCount, cuGetErrorString,
//                     cuGetErrorName, and every call of the deep tier's copies (base::CudaApi).
//                     FAKE_CUDA_DRIVER_VERSION (default 12040), FAKE_CUDA_INIT_ERROR (default 0: what
//                     cuInit returns; while it is not 0 every call that needs cuInit returns 3),
//                     FAKE_CUDA_DEVICE_COUNT (default 1);
//                     FAKE_CUDA_HANG_IN / FAKE_CUDA_CRASH_IN = "<function name>" make that call
//                     hang (a wedged driver) or crash; FAKE_CUDA_FAIL_IN = "<function name>" makes it
//                     return FAKE_CUDA_FAIL_CODE (default 999, CUDA_ERROR_UNKNOWN; 700 makes an
//                     illegal address). Each takes a comma list of names too.
//                     Calls other than cuInit, cuDriverGetVersion and the error texts return 3
//                     (CUDA_ERROR_NOT_INITIALIZED) until cuInit succeeded.
//                     Devices: FAKE_CUDA_NAMES (comma list, one per device, the last repeats; default
//                     "NVIDIA H100 80GB HBM3"), FAKE_CUDA_BUS_IDS (comma list; default for device i
//                     "0000:%02X:00.0" with bus 0x07 + 8 i).
//                     The copies run on a virtual clock, one per stream (seconds from 0; the null
//                     stream is the current context's own); no memory is ever touched: allocations
//                     are fake addresses (device memory from 0x7f0000000000, pinned host memory from
//                     0x600000000000) that must never be dereferenced. Each copy advances its
//                     stream by FAKE_CUDA_COPY_LATENCY_US (default 2.0) microseconds plus bytes at a
//                     rate in GB/s (10^9 bytes/s):
//                       FAKE_CUDA_H2D_GBPS  host to device, comma list per device (the last value
//                                           repeats; default 25);
//                       FAKE_CUDA_D2H_GBPS  device to host, per device (default 26);
//                       FAKE_CUDA_D2D_GBPS  within one device's memory, per device (default 1500);
//                       FAKE_CUDA_P2P_GBPS  between two devices (default 250), unless FAKE_CUDA_P2P
//                                           names the ordered pair: "0>1=120,1>0=118" (src>dst).
//                     A copy between two devices neither of which enabled peer access to the other
//                     (cuCtxEnablePeerAccess) runs at a quarter of that rate (staged through host
//                     memory). A rate that is not a positive number counts as unset.
//                     FAKE_CUDA_SLOW_SAMPLE=<k>: every k-th copy on a stream (from 1) takes twice as
//                     long (default 0: never).
//                     FAKE_CUDA_NO_PEER = "0-1,2-3": unordered pairs without peer access
//                     (cuDeviceCanAccessPeer says 0, cuCtxEnablePeerAccess returns 217).
//                     FAKE_CUDA_ALLOC_FAIL = "<device ordinal>" or "host" (or a comma list of them):
//                     cuMemAlloc_v2 on that device, or cuMemHostAlloc, returns 2 (out of memory).
//                     Fake-only calls, for tests and the fake NCCL: fake_cuda_live_allocations()
//                     (device and host allocations not freed), fake_cuda_reset() (forgets every
//                     allocation, stream, event, peer access, context reference and cuInit), and
//                     fake_cuda_stream_advance(stream, seconds) (0, or 400 for an unknown stream).
//   FAKE_CUDA_NO_DEVICE_COUNT  with FAKE_CUDA_DRIVER: lacks cuDeviceGetCount, so the loader must
//                     refuse it.
//   FAKE_CUDA_NO_COPIES  with FAKE_CUDA_DRIVER: lacks cuMemcpyPeerAsync, so the loader names it as
//                     the missing copy symbol.
//   FAKE_CUDART       cudaRuntimeGetVersion: FAKE_CUDART_VERSION (default 12040).
//   FAKE_CUDNN        cudnnGetVersion: FAKE_CUDNN_VERSION (default 90100).
//   FAKE_CUBLAS       cublasGetProperty: FAKE_CUBLAS_VERSION "major.minor.patch" (default 12.4.5).
//   FAKE_NCCL         libnccl.so.2: ncclGetVersion, ncclCommInitAll, ncclCommDestroy, ncclAllReduce,
//                     ncclGroupStart, ncclGroupEnd, ncclGetErrorString; ncclGetUniqueId and
//                     ncclCommInitRank (a rank of a communicator across processes, made at once:
//                     no process waits for the others; an id it did not make is refused).
//                     FAKE_NCCL_VERSION (default 21803); FAKE_NCCL_INIT_ERROR=<code>: what
//                     ncclCommInitAll returns instead of making communicators; its devices must be
//                     distinct and below FAKE_CUDA_DEVICE_COUNT (default 1).
//                     With NCCL_DEBUG=INFO (or TRACE) ncclCommInitAll logs like NCCL, to
//                     NCCL_DEBUG_FILE (%h host, %p pid; appended) or standard output: the version
//                     banner, then per rank Init START, two Channel lines via FAKE_NCCL_TRANSPORT
//                     (default "P2P/CUMEM/read") when there are several ranks, and Init COMPLETE;
//                     bus ids come from FAKE_CUDA_BUS_IDS as in the driver fake; the host name is
//                     FAKE_NCCL_HOSTNAME when set (golden tests), else the machine's.
//                     ncclAllReduce advances its stream by bytes / FAKE_NCCL_ALGBW_GBPS (GB/s, comma
//                     list per rank, the last repeats; default 200) through fake_cuda_stream_advance,
//                     looked up in the library GPUKIT_CUDA_LIBRARY names (already loaded) or the
//                     process; with several ranks it must run between ncclGroupStart and
//                     ncclGroupEnd (else 5, ncclInvalidUsage: the real one would deadlock).
//                     FAKE_NCCL_HANG_IN / FAKE_NCCL_CRASH_IN = "<function name>" hang or crash there;
//                     FAKE_NCCL_FAIL_IN = "<function name>" makes it return FAKE_NCCL_FAIL_CODE
//                     (default 3, ncclInternalError).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

[[maybe_unused]] long env_number(const char* name, long fallback)
{
    const char* text = std::getenv(name);
    return text != nullptr && *text != '\0' ? std::strtol(text, nullptr, 10) : fallback;
}

[[maybe_unused]] double env_double(const char* name, double fallback)
{
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') {
        return fallback;
    }
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    return end != text ? value : fallback;
}

/// The items of a comma list in an environment variable (none when it is unset or empty).
[[maybe_unused]] std::vector<std::string> env_list(const char* name)
{
    std::vector<std::string> items;
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') {
        return items;
    }
    for (const char* p = text;;) {
        const char* comma = std::strchr(p, ',');
        items.emplace_back(p, comma != nullptr ? static_cast<std::size_t>(comma - p) : std::strlen(p));
        if (comma == nullptr) {
            return items;
        }
        p = comma + 1;
    }
}

/// Item `index` of a comma list, the last one standing for those past its end; "" when unset.
[[maybe_unused]] std::string env_list_item(const char* name, int index)
{
    const std::vector<std::string> items = env_list(name);
    if (items.empty() || index < 0) {
        return "";
    }
    return items[std::min(static_cast<std::size_t>(index), items.size() - 1)];
}

[[maybe_unused]] bool env_list_has(const char* name, const char* word)
{
    for (const std::string& item : env_list(name)) {
        if (item == word) {
            return true;
        }
    }
    return false;
}

/// A rate in GB/s from a per-device (or per-rank) comma list; `fallback` when unset or not positive.
[[maybe_unused]] double env_rate(const char* name, int index, double fallback)
{
    const std::string item = env_list_item(name, index);
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    return end != item.c_str() && value > 0 ? value : fallback;
}

[[maybe_unused]] void misbehave(const char* function, const char* hang_variable = "FAKE_CUDA_HANG_IN",
    const char* crash_variable = "FAKE_CUDA_CRASH_IN")
{
    if (env_list_has(hang_variable, function)) {
        while (true) {
            pause();
        }
    }
    if (env_list_has(crash_variable, function)) {
        std::raise(SIGSEGV);
    }
}

[[maybe_unused]] int fake_device_count()
{
    return static_cast<int>(env_number("FAKE_CUDA_DEVICE_COUNT", 1));
}

/// Device `ordinal`'s PCI address as cuDeviceGetPCIBusId prints it ("0000:07:00.0").
[[maybe_unused]] std::string fake_bus_id(int ordinal)
{
    std::string id = env_list_item("FAKE_CUDA_BUS_IDS", ordinal);
    if (id.empty()) {
        char text[32];
        std::snprintf(text, sizeof text, "0000:%02X:00.0", static_cast<unsigned>(0x07 + 8 * ordinal));
        id = text;
    }
    return id;
}

} // namespace

#ifdef FAKE_CUDA_DRIVER
// The driver API's opaque handles, as cuda.h declares them (never defined: the fake hands out
// addresses of its own state, or plain numbers, under these types).
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUdeviceptr = unsigned long long;

namespace {

// CUresult codes the fake returns.
constexpr CUresult cuda_success = 0;
constexpr CUresult invalid_value = 1;
constexpr CUresult out_of_memory = 2;
constexpr CUresult not_initialized = 3;
constexpr CUresult invalid_device = 101;
constexpr CUresult invalid_context = 201;
constexpr CUresult peer_access_unsupported = 217;
constexpr CUresult invalid_handle = 400;
constexpr CUresult not_ready = 600;
constexpr CUresult peer_access_already_enabled = 704;

constexpr int host_memory = -1; ///< Allocation::device of pinned host memory
constexpr unsigned event_disable_timing = 0x2; // CU_EVENT_DISABLE_TIMING
constexpr std::uintptr_t allocation_alignment = std::uintptr_t{2} << 20;

struct StreamState {
    int device = 0;
    double seconds = 0; ///< the virtual clock: when the work queued so far ends
    unsigned long copies = 0;
};

/// A device's primary context; CUcontext handles are addresses of these.
struct Context {
    int device = 0;
    int references = 0; ///< usable while > 0
    StreamState null_stream; ///< stream 0 while this context is current
};

struct EventState {
    int device = 0;
    unsigned flags = 0;
    bool recorded = false;
    double seconds = 0;
};

struct Allocation {
    int device = 0; ///< or host_memory
    std::size_t size = 0;
};

struct Driver {
    std::mutex mutex;
    bool initialized = false;
    std::map<int, Context> contexts; ///< by device; map nodes never move, so handles stay put
    std::map<std::uintptr_t, Allocation> allocations; ///< by base address
    std::uintptr_t next_device_address = 0x7f0000000000;
    std::uintptr_t next_host_address = 0x600000000000;
    std::map<std::uintptr_t, StreamState> streams; ///< by handle value
    std::map<std::uintptr_t, EventState> events;
    std::uintptr_t next_handle = 0x5a0000000000; ///< streams and events: numbers, never memory
    std::set<std::pair<int, int>> peer_access; ///< (device, peer): device's context may reach peer's memory
};

Driver& driver()
{
    static Driver* state = new Driver; // never destroyed: calls may come during exit
    return *state;
}

thread_local Context* current_context = nullptr;

/// The first steps of every driver call: hang, crash or fail where the environment says, and
/// refuse before cuInit. 0 to go on.
CUresult enter(const char* function, bool needs_init = true)
{
    misbehave(function);
    if (env_list_has("FAKE_CUDA_FAIL_IN", function)) {
        return static_cast<CUresult>(env_number("FAKE_CUDA_FAIL_CODE", 999));
    }
    if (needs_init) {
        Driver& d = driver();
        std::lock_guard lock(d.mutex);
        if (!d.initialized || env_number("FAKE_CUDA_INIT_ERROR", 0) != 0) {
            return not_initialized;
        }
    }
    return cuda_success;
}

bool valid_device(int ordinal)
{
    return ordinal >= 0 && ordinal < fake_device_count();
}

// The helpers below run with the driver's mutex held.

/// The context a handle names, or nullptr when it is no retained primary context.
Context* context_of(Driver& d, CUcontext handle)
{
    for (auto& [device, context] : d.contexts) {
        if (reinterpret_cast<CUcontext>(&context) == handle) {
            return context.references > 0 ? &context : nullptr;
        }
    }
    return nullptr;
}

Context* usable_current(Driver& d)
{
    return current_context != nullptr ? context_of(d, reinterpret_cast<CUcontext>(current_context)) : nullptr;
}

/// The state of a stream handle (0: the current context's null stream); nullptr with `rc` set
/// when there is none.
StreamState* stream_of(Driver& d, CUstream stream, CUresult& rc)
{
    if (stream == nullptr) {
        Context* context = usable_current(d);
        rc = context != nullptr ? cuda_success : invalid_context;
        return context != nullptr ? &context->null_stream : nullptr;
    }
    auto it = d.streams.find(reinterpret_cast<std::uintptr_t>(stream));
    rc = it != d.streams.end() ? cuda_success : invalid_handle;
    return it != d.streams.end() ? &it->second : nullptr;
}

/// The live allocation of the right kind that holds `bytes` bytes from `address`, or nullptr.
const Allocation* allocation_at(Driver& d, std::uintptr_t address, std::size_t bytes, bool host)
{
    auto it = d.allocations.upper_bound(address);
    if (it == d.allocations.begin()) {
        return nullptr;
    }
    --it;
    const std::uintptr_t offset = address - it->first;
    if (offset >= it->second.size || bytes > it->second.size - offset) {
        return nullptr;
    }
    return (it->second.device == host_memory) == host ? &it->second : nullptr;
}

std::uintptr_t allocate(Driver& d, std::uintptr_t& next, int device, std::size_t bytes)
{
    const std::uintptr_t base = next;
    next += (bytes + allocation_alignment - 1) / allocation_alignment * allocation_alignment;
    d.allocations[base] = {device, bytes};
    return base;
}

bool no_peer(int a, int b)
{
    for (const std::string& pair : env_list("FAKE_CUDA_NO_PEER")) {
        int x = -1;
        int y = -1;
        if (std::sscanf(pair.c_str(), "%d-%d", &x, &y) == 2 && ((x == a && y == b) || (x == b && y == a))) {
            return true;
        }
    }
    return false;
}

/// GB/s of a copy from `src` to `dst` (device ordinals or host_memory).
double copy_gbps(Driver& d, int src, int dst)
{
    if (src == host_memory) {
        return env_rate("FAKE_CUDA_H2D_GBPS", dst, 25);
    }
    if (dst == host_memory) {
        return env_rate("FAKE_CUDA_D2H_GBPS", src, 26);
    }
    if (src == dst) {
        return env_rate("FAKE_CUDA_D2D_GBPS", src, 1500);
    }
    double gbps = env_rate("FAKE_CUDA_P2P_GBPS", 0, 250);
    for (const std::string& pair : env_list("FAKE_CUDA_P2P")) {
        int from = -1;
        int to = -1;
        double rate = 0;
        if (std::sscanf(pair.c_str(), "%d>%d=%lf", &from, &to, &rate) == 3 && from == src && to == dst && rate > 0) {
            gbps = rate;
        }
    }
    const bool direct = d.peer_access.count({src, dst}) != 0 || d.peer_access.count({dst, src}) != 0;
    return direct ? gbps : gbps / 4;
}

/// Checks a copy's addresses and queues it on its stream's clock.
CUresult queue_copy(const char* function, std::uintptr_t dst, bool dst_host, std::uintptr_t src, bool src_host,
    std::size_t bytes, CUstream stream, CUcontext dst_context = nullptr, CUcontext src_context = nullptr)
{
    if (CUresult rc = enter(function); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    CUresult rc = cuda_success;
    StreamState* s = stream_of(d, stream, rc);
    if (s == nullptr) {
        return rc;
    }
    const Allocation* to = allocation_at(d, dst, bytes, dst_host);
    const Allocation* from = allocation_at(d, src, bytes, src_host);
    if (to == nullptr || from == nullptr) {
        return invalid_value;
    }
    if (dst_context != nullptr || src_context != nullptr) { // cuMemcpyPeerAsync
        const Context* dst_ctx = context_of(d, dst_context);
        const Context* src_ctx = context_of(d, src_context);
        if (dst_ctx == nullptr || src_ctx == nullptr) {
            return invalid_context;
        }
        if (dst_ctx->device != to->device || src_ctx->device != from->device) {
            return invalid_value;
        }
    }
    double seconds = std::max(0.0, env_double("FAKE_CUDA_COPY_LATENCY_US", 2.0)) * 1e-6 +
        static_cast<double>(bytes) / (copy_gbps(d, from->device, to->device) * 1e9);
    ++s->copies;
    const long slow = env_number("FAKE_CUDA_SLOW_SAMPLE", 0);
    if (slow > 0 && s->copies % static_cast<unsigned long>(slow) == 0) {
        seconds *= 2;
    }
    s->seconds += seconds;
    return cuda_success;
}

CUresult device_text(const char* function, char* out, int length, CUdevice device, const std::string& text)
{
    if (CUresult rc = enter(function); rc != cuda_success) {
        return rc;
    }
    if (out == nullptr || length <= 0) {
        return invalid_value;
    }
    if (!valid_device(device)) {
        return invalid_device;
    }
    const std::size_t n = std::min(text.size(), static_cast<std::size_t>(length) - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
    return cuda_success;
}

// One table for both error calls: code, CUresult name, text.
struct ErrorText {
    int code;
    const char* name;
    const char* text;
};
constexpr ErrorText error_texts[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

int error_lookup(int error, const char** out, bool want_name)
{
    for (const auto& e : error_texts) {
        if (e.code == error) {
            *out = want_name ? e.name : e.text;
            return 0;
        }
    }
    *out = nullptr;
    return invalid_value;
}

} // namespace

extern "C" {

CUresult cuInit(unsigned int flags)
{
    if (CUresult rc = enter("cuInit", false); rc != cuda_success) {
        return rc;
    }
    const CUresult rc = flags == 0 ? static_cast<CUresult>(env_number("FAKE_CUDA_INIT_ERROR", 0)) : invalid_value;
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    d.initialized = rc == cuda_success;
    return rc;
}

CUresult cuDriverGetVersion(int* version)
{
    if (CUresult rc = enter("cuDriverGetVersion", false); rc != cuda_success) {
        return rc;
    }
    if (version == nullptr) {
        return invalid_value;
    }
    *version = static_cast<int>(env_number("FAKE_CUDA_DRIVER_VERSION", 12040));
    return cuda_success;
}

#ifndef FAKE_CUDA_NO_DEVICE_COUNT
CUresult cuDeviceGetCount(int* count)
{
    if (CUresult rc = enter("cuDeviceGetCount"); rc != cuda_success) {
        return rc;
    }
    if (count == nullptr) {
        return invalid_value;
    }
    *count = fake_device_count();
    return cuda_success;
}
#endif

CUresult cuGetErrorName(CUresult error, const char** name)
{
    return error_lookup(error, name, true);
}

CUresult cuGetErrorString(CUresult error, const char** text)
{
    return error_lookup(error, text, false);
}

CUresult cuDeviceGet(CUdevice* device, int ordinal)
{
    if (CUresult rc = enter("cuDeviceGet"); rc != cuda_success) {
        return rc;
    }
    if (device == nullptr) {
        return invalid_value;
    }
    if (!valid_device(ordinal)) {
        return invalid_device;
    }
    *device = ordinal;
    return cuda_success;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device)
{
    std::string text = env_list_item("FAKE_CUDA_NAMES", device);
    return device_text("cuDeviceGetName", name, length, device, text.empty() ? "NVIDIA H100 80GB HBM3" : text);
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device)
{
    return device_text("cuDeviceGetPCIBusId", bus_id, length, device, fake_bus_id(device));
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device)
{
    if (CUresult rc = enter("cuDevicePrimaryCtxRetain"); rc != cuda_success) {
        return rc;
    }
    if (context == nullptr) {
        return invalid_value;
    }
    if (!valid_device(device)) {
        return invalid_device;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    Context& c = d.contexts[device];
    c.device = device;
    ++c.references;
    *context = reinterpret_cast<CUcontext>(&c);
    return cuda_success;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device)
{
    if (CUresult rc = enter("cuDevicePrimaryCtxRelease_v2"); rc != cuda_success) {
        return rc;
    }
    if (!valid_device(device)) {
        return invalid_device;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto it = d.contexts.find(device);
    if (it == d.contexts.end() || it->second.references <= 0) {
        return invalid_context;
    }
    --it->second.references;
    return cuda_success;
}

CUresult cuCtxSetCurrent(CUcontext context)
{
    if (CUresult rc = enter("cuCtxSetCurrent"); rc != cuda_success) {
        return rc;
    }
    if (context == nullptr) {
        current_context = nullptr;
        return cuda_success;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    Context* c = context_of(d, context);
    if (c == nullptr) {
        return invalid_context;
    }
    current_context = c;
    return cuda_success;
}

CUresult cuMemAlloc_v2(CUdeviceptr* address, std::size_t bytes)
{
    if (CUresult rc = enter("cuMemAlloc_v2"); rc != cuda_success) {
        return rc;
    }
    if (address == nullptr || bytes == 0) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    const Context* context = usable_current(d);
    if (context == nullptr) {
        return invalid_context;
    }
    if (env_list_has("FAKE_CUDA_ALLOC_FAIL", std::to_string(context->device).c_str())) {
        return out_of_memory;
    }
    *address = allocate(d, d.next_device_address, context->device, bytes);
    return cuda_success;
}

CUresult cuMemFree_v2(CUdeviceptr address)
{
    if (CUresult rc = enter("cuMemFree_v2"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto it = d.allocations.find(static_cast<std::uintptr_t>(address));
    if (it == d.allocations.end() || it->second.device == host_memory) {
        return invalid_value;
    }
    d.allocations.erase(it);
    return cuda_success;
}

CUresult cuMemHostAlloc(void** address, std::size_t bytes, unsigned int flags)
{
    static_cast<void>(flags); // portable, device-mapped, write-combined: all the same here
    if (CUresult rc = enter("cuMemHostAlloc"); rc != cuda_success) {
        return rc;
    }
    if (address == nullptr || bytes == 0) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    if (usable_current(d) == nullptr) {
        return invalid_context;
    }
    if (env_list_has("FAKE_CUDA_ALLOC_FAIL", "host")) {
        return out_of_memory;
    }
    *address = reinterpret_cast<void*>(allocate(d, d.next_host_address, host_memory, bytes));
    return cuda_success;
}

CUresult cuMemFreeHost(void* address)
{
    if (CUresult rc = enter("cuMemFreeHost"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto it = d.allocations.find(reinterpret_cast<std::uintptr_t>(address));
    if (it == d.allocations.end() || it->second.device != host_memory) {
        return invalid_value;
    }
    d.allocations.erase(it);
    return cuda_success;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream)
{
    return queue_copy("cuMemcpyHtoDAsync_v2", static_cast<std::uintptr_t>(dst), false,
        reinterpret_cast<std::uintptr_t>(src), true, bytes, stream);
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream)
{
    return queue_copy("cuMemcpyDtoHAsync_v2", reinterpret_cast<std::uintptr_t>(dst), true,
        static_cast<std::uintptr_t>(src), false, bytes, stream);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream)
{
    return queue_copy("cuMemcpyDtoDAsync_v2", static_cast<std::uintptr_t>(dst), false, static_cast<std::uintptr_t>(src),
        false, bytes, stream);
}

#ifndef FAKE_CUDA_NO_COPIES
CUresult cuMemcpyPeerAsync(
    CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context, std::size_t bytes, CUstream stream)
{
    if (dst_context == nullptr || src_context == nullptr) {
        if (CUresult rc = enter("cuMemcpyPeerAsync"); rc != cuda_success) {
            return rc;
        }
        return invalid_context;
    }
    return queue_copy("cuMemcpyPeerAsync", static_cast<std::uintptr_t>(dst), false, static_cast<std::uintptr_t>(src),
        false, bytes, stream, dst_context, src_context);
}
#endif

CUresult cuStreamCreate(CUstream* stream, unsigned int flags)
{
    static_cast<void>(flags); // CU_STREAM_NON_BLOCKING or not: no other stream to block on here
    if (CUresult rc = enter("cuStreamCreate"); rc != cuda_success) {
        return rc;
    }
    if (stream == nullptr) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    const Context* context = usable_current(d);
    if (context == nullptr) {
        return invalid_context;
    }
    const std::uintptr_t handle = d.next_handle;
    d.next_handle += 0x40;
    d.streams[handle] = {context->device, 0, 0};
    *stream = reinterpret_cast<CUstream>(handle);
    return cuda_success;
}

CUresult cuStreamDestroy_v2(CUstream stream)
{
    if (CUresult rc = enter("cuStreamDestroy_v2"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    return d.streams.erase(reinterpret_cast<std::uintptr_t>(stream)) != 0 ? cuda_success : invalid_handle;
}

CUresult cuStreamSynchronize(CUstream stream)
{
    if (CUresult rc = enter("cuStreamSynchronize"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    CUresult rc = cuda_success;
    stream_of(d, stream, rc);
    return rc;
}

CUresult cuEventCreate(CUevent* event, unsigned int flags)
{
    if (CUresult rc = enter("cuEventCreate"); rc != cuda_success) {
        return rc;
    }
    if (event == nullptr) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    const Context* context = usable_current(d);
    if (context == nullptr) {
        return invalid_context;
    }
    const std::uintptr_t handle = d.next_handle;
    d.next_handle += 0x40;
    d.events[handle] = {context->device, flags, false, 0};
    *event = reinterpret_cast<CUevent>(handle);
    return cuda_success;
}

CUresult cuEventRecord(CUevent event, CUstream stream)
{
    if (CUresult rc = enter("cuEventRecord"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto it = d.events.find(reinterpret_cast<std::uintptr_t>(event));
    if (it == d.events.end()) {
        return invalid_handle;
    }
    CUresult rc = cuda_success;
    const StreamState* s = stream_of(d, stream, rc);
    if (s == nullptr) {
        return rc;
    }
    if (s->device != it->second.device) {
        return invalid_handle; // event and stream of different contexts
    }
    it->second.recorded = true;
    it->second.seconds = s->seconds;
    return cuda_success;
}

CUresult cuEventSynchronize(CUevent event)
{
    if (CUresult rc = enter("cuEventSynchronize"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    return d.events.count(reinterpret_cast<std::uintptr_t>(event)) != 0 ? cuda_success : invalid_handle;
}

CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end)
{
    if (CUresult rc = enter("cuEventElapsedTime"); rc != cuda_success) {
        return rc;
    }
    if (milliseconds == nullptr) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto a = d.events.find(reinterpret_cast<std::uintptr_t>(start));
    auto b = d.events.find(reinterpret_cast<std::uintptr_t>(end));
    if (a == d.events.end() || b == d.events.end()) {
        return invalid_handle;
    }
    if (((a->second.flags | b->second.flags) & event_disable_timing) != 0) {
        return invalid_handle;
    }
    if (!a->second.recorded || !b->second.recorded) {
        return not_ready;
    }
    *milliseconds = static_cast<float>((b->second.seconds - a->second.seconds) * 1000.0);
    return cuda_success;
}

CUresult cuEventDestroy_v2(CUevent event)
{
    if (CUresult rc = enter("cuEventDestroy_v2"); rc != cuda_success) {
        return rc;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    return d.events.erase(reinterpret_cast<std::uintptr_t>(event)) != 0 ? cuda_success : invalid_handle;
}

CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice device, CUdevice peer)
{
    if (CUresult rc = enter("cuDeviceCanAccessPeer"); rc != cuda_success) {
        return rc;
    }
    if (can_access == nullptr) {
        return invalid_value;
    }
    if (!valid_device(device) || !valid_device(peer)) {
        return invalid_device;
    }
    *can_access = device != peer && !no_peer(device, peer) ? 1 : 0;
    return cuda_success;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer_context, unsigned int flags)
{
    if (CUresult rc = enter("cuCtxEnablePeerAccess"); rc != cuda_success) {
        return rc;
    }
    if (flags != 0) {
        return invalid_value;
    }
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    const Context* context = usable_current(d);
    const Context* peer = context_of(d, peer_context);
    if (context == nullptr || peer == nullptr) {
        return invalid_context;
    }
    if (context->device == peer->device) {
        return invalid_device;
    }
    if (no_peer(context->device, peer->device)) {
        return peer_access_unsupported;
    }
    if (!d.peer_access.insert({context->device, peer->device}).second) {
        return peer_access_already_enabled;
    }
    return cuda_success;
}

// Fake-only calls.

int fake_cuda_live_allocations(void)
{
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    return static_cast<int>(d.allocations.size());
}

void fake_cuda_reset(void)
{
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    d.initialized = false;
    for (auto& [device, context] : d.contexts) {
        context.references = 0;
        context.null_stream = {device, 0, 0};
    }
    d.allocations.clear();
    d.streams.clear();
    d.events.clear();
    d.peer_access.clear();
}

int fake_cuda_stream_advance(void* stream, double seconds)
{
    Driver& d = driver();
    std::lock_guard lock(d.mutex);
    auto it = d.streams.find(reinterpret_cast<std::uintptr_t>(stream));
    if (it == d.streams.end()) {
        return invalid_handle;
    }
    it->second.seconds += seconds;
    return cuda_success;
}

} // extern "C"
#endif // FAKE_CUDA_DRIVER

#ifdef FAKE_CUDART
extern "C" int cudaRuntimeGetVersion(int* version)
{
    *version = static_cast<int>(env_number("FAKE_CUDART_VERSION", 12040));
    return 0;
}
#endif

#ifdef FAKE_CUDNN
extern "C" std::size_t cudnnGetVersion()
{
    return static_cast<std::size_t>(env_number("FAKE_CUDNN_VERSION", 90100));
}
#endif

#ifdef FAKE_CUBLAS
extern "C" int cublasGetProperty(int type, int* value)
{
    const char* text = std::getenv("FAKE_CUBLAS_VERSION");
    int parts[3] = {12, 4, 5};
    if (text != nullptr && std::sscanf(text, "%d.%d.%d", &parts[0], &parts[1], &parts[2]) != 3) {
        return 7; // CUBLAS_STATUS_INVALID_VALUE
    }
    if (type < 0 || type > 2) {
        return 7;
    }
    *value = parts[type];
    return 0;
}
#endif

#ifdef FAKE_NCCL
using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;

namespace {

constexpr ncclResult_t nccl_success = 0;
constexpr ncclResult_t unhandled_cuda_error = 1;
constexpr ncclResult_t invalid_argument = 4;
constexpr ncclResult_t invalid_usage = 5;

/// What a ncclComm_t points at.
struct Communicator {
    int rank = 0;
    int nranks = 0;
    int device = 0;
    unsigned long long comm_id = 0;
};

struct NcclState {
    std::mutex mutex;
    std::set<const Communicator*> comms;
};

NcclState& nccl_state()
{
    static NcclState* state = new NcclState; // never destroyed: calls may come during exit
    return *state;
}

thread_local int group_depth = 0;

/// Hangs, crashes or fails where the environment says; 0 to go on.
ncclResult_t nccl_enter(const char* function)
{
    misbehave(function, "FAKE_NCCL_HANG_IN", "FAKE_NCCL_CRASH_IN");
    if (env_list_has("FAKE_NCCL_FAIL_IN", function)) {
        return static_cast<ncclResult_t>(env_number("FAKE_NCCL_FAIL_CODE", 3));
    }
    return nccl_success;
}

int nccl_version()
{
    return static_cast<int>(env_number("FAKE_NCCL_VERSION", 21803));
}

/// "2.21.5" from ncclGetVersion's number (major*10000+minor*100+patch from 2.9 on, major*1000 before).
std::string nccl_version_text(int v)
{
    char text[48];
    if (v >= 10000) {
        std::snprintf(text, sizeof text, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
    } else {
        std::snprintf(text, sizeof text, "%d.%d.%d", v / 1000, (v % 1000) / 100, v % 100);
    }
    return text;
}

std::string short_hostname()
{
    if (const char* fixed = std::getenv("FAKE_NCCL_HOSTNAME"); fixed != nullptr && *fixed != '\0') {
        return fixed;
    }
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    std::string host = name;
    return host.substr(0, host.find('.'));
}

/// NCCL_DEBUG_FILE with %h (host) and %p (pid) expanded.
std::string expand(const std::string& pattern, const std::string& host, long pid)
{
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
            out += host;
            ++i;
        } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
            out += std::to_string(pid);
            ++i;
        } else {
            out += pattern[i];
        }
    }
    return out;
}

/// The bus id as NCCL logs it: the hex digits of "0000:07:00.0" as one number, "7000".
std::string nccl_bus_id(const std::string& pci)
{
    std::string digits;
    for (char c : pci) {
        if (c == ':' || c == '.') {
            continue;
        }
        if (std::isxdigit(static_cast<unsigned char>(c)) == 0 || digits.size() == 16) {
            break;
        }
        digits += c;
    }
    char text[24];
    std::snprintf(text, sizeof text, "%llx", std::strtoull(digits.c_str(), nullptr, 16));
    return text;
}

unsigned long long new_comm_id()
{
    static std::atomic<unsigned long long> counter{0};
    unsigned long long x =
        static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<unsigned long long>(getpid()) << 32) ^ (++counter * 0x9e3779b97f4a7c15ULL);
    // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x != 0 ? x : 1;
}

/// What ncclCommInitAll logs with NCCL_DEBUG=INFO: each rank's lines from a thread of its own, as
/// NCCL's init threads do.
void log_init(const std::vector<Communicator*>& comms)
{
    const char* level = std::getenv("NCCL_DEBUG");
    if (level == nullptr || (strcasecmp(level, "INFO") != 0 && strcasecmp(level, "TRACE") != 0)) {
        return;
    }
    const std::string host = short_hostname();
    const long pid = static_cast<long>(getpid());
    const long tid = static_cast<long>(syscall(SYS_gettid));
    FILE* log = stdout;
    if (const char* file = std::getenv("NCCL_DEBUG_FILE"); file != nullptr && *file != '\0') {
        if (FILE* f = std::fopen(expand(file, host, pid).c_str(), "a"); f != nullptr) {
            log = f;
        }
    }
    const std::string transport = [] {
        const char* t = std::getenv("FAKE_NCCL_TRANSPORT");
        return std::string(t != nullptr && *t != '\0' ? t : "P2P/CUMEM/read");
    }();
    const int n = static_cast<int>(comms.size());
    for (const Communicator* c : comms) {
        auto line = [&](const std::string& text) {
            std::fprintf(
                log, "%s:%ld:%ld [%d] NCCL INFO %s\n", host.c_str(), pid, tid + c->rank, c->device, text.c_str());
        };
        char init[256];
        std::snprintf(init, sizeof init,
            "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId 0x%llx",
            static_cast<const void*>(c), c->rank, n, c->device, c->device, nccl_bus_id(fake_bus_id(c->device)).c_str(),
            c->comm_id);
        if (c->rank == 0) {
            line("NCCL version " + nccl_version_text(nccl_version()) + "+cuda12.4");
        }
        line(std::string(init) + " - Init START");
        if (n > 1) {
            const Communicator* next = comms[static_cast<std::size_t>((c->rank + 1) % n)];
            for (int channel = 0; channel < 2; ++channel) {
                char text[256];
                std::snprintf(text, sizeof text, "Channel %02d/0 : %d[%d] -> %d[%d] via %s", channel, c->rank,
                    c->device, next->rank, next->device, transport.c_str());
                line(text);
            }
        }
        line(std::string(init) + " - Init COMPLETE");
    }
    std::fflush(log);
    if (log != stdout) {
        std::fclose(log);
    }
}

/// Bytes of one element of an ncclDataType_t (int8, uint8, int32, uint32, int64, uint64, float16,
/// float32, float64, bfloat16), 0 for none.
std::size_t element_size(int datatype)
{
    static constexpr std::size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return datatype >= 0 && datatype < 10 ? sizes[datatype] : 0;
}

using StreamAdvance = int (*)(void*, double);

/// fake_cuda_stream_advance from the fake driver the process loaded, or nullptr.
StreamAdvance find_stream_advance()
{
    StreamAdvance advance = nullptr;
    if (const char* file = std::getenv("GPUKIT_CUDA_LIBRARY"); file != nullptr && *file != '\0') {
        if (void* library = dlopen(file, RTLD_NOW | RTLD_NOLOAD); library != nullptr) {
            advance = reinterpret_cast<StreamAdvance>(dlsym(library, "fake_cuda_stream_advance"));
            dlclose(library); // only drops the reference RTLD_NOLOAD added
        }
    }
    if (advance == nullptr) {
        advance = reinterpret_cast<StreamAdvance>(dlsym(RTLD_DEFAULT, "fake_cuda_stream_advance"));
    }
    return advance;
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version)
{
    if (ncclResult_t rc = nccl_enter("ncclGetVersion"); rc != nccl_success) {
        return rc;
    }
    if (version == nullptr) {
        return invalid_argument;
    }
    *version = nccl_version();
    return nccl_success;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist)
{
    if (ncclResult_t rc = nccl_enter("ncclCommInitAll"); rc != nccl_success) {
        return rc;
    }
    if (const long error = env_number("FAKE_NCCL_INIT_ERROR", 0); error != 0) {
        return static_cast<ncclResult_t>(error);
    }
    if (comms == nullptr || ndev < 1) {
        return invalid_argument;
    }
    const int devices = fake_device_count();
    std::set<int> seen;
    for (int r = 0; r < ndev; ++r) {
        const int device = devlist != nullptr ? devlist[r] : r; // no list: devices 0..ndev-1
        if (device < 0 || device >= devices || !seen.insert(device).second) {
            return invalid_argument;
        }
    }
    const unsigned long long id = new_comm_id();
    std::vector<Communicator*> made;
    {
        NcclState& state = nccl_state();
        std::lock_guard lock(state.mutex);
        for (int r = 0; r < ndev; ++r) {
            auto* c = new Communicator{r, ndev, devlist != nullptr ? devlist[r] : r, id};
            state.comms.insert(c);
            made.push_back(c);
            comms[r] = reinterpret_cast<ncclComm_t>(c);
        }
    }
    log_init(made);
    return nccl_success;
}

/// ncclUniqueId.
struct ncclUniqueId {
    char internal[128];
};

ncclResult_t ncclGetUniqueId(ncclUniqueId* id)
{
    if (ncclResult_t rc = nccl_enter("ncclGetUniqueId"); rc != nccl_success) {
        return rc;
    }
    if (id == nullptr) {
        return invalid_argument;
    }
    std::memset(id->internal, 0, sizeof id->internal);
    const unsigned long long comm = new_comm_id();
    std::memcpy(id->internal, &comm, sizeof comm);
    return nccl_success;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank)
{
    if (ncclResult_t rc = nccl_enter("ncclCommInitRank"); rc != nccl_success) {
        return rc;
    }
    if (const long error = env_number("FAKE_NCCL_INIT_ERROR", 0); error != 0) {
        return static_cast<ncclResult_t>(error);
    }
    unsigned long long comm_id = 0;
    std::memcpy(&comm_id, id.internal, sizeof comm_id);
    if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks || comm_id == 0) {
        return invalid_argument; // an id that ncclGetUniqueId did not make
    }
    NcclState& state = nccl_state();
    std::lock_guard lock(state.mutex);
    auto* c = new Communicator{rank, nranks, 0, comm_id};
    state.comms.insert(c);
    *comm = reinterpret_cast<ncclComm_t>(c);
    return nccl_success;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (ncclResult_t rc = nccl_enter("ncclCommDestroy"); rc != nccl_success) {
        return rc;
    }
    NcclState& state = nccl_state();
    std::lock_guard lock(state.mutex);
    auto it = state.comms.find(reinterpret_cast<const Communicator*>(comm));
    if (it == state.comms.end()) {
        return invalid_argument;
    }
    delete *it;
    state.comms.erase(it);
    return nccl_success;
}

ncclResult_t ncclGroupStart()
{
    if (ncclResult_t rc = nccl_enter("ncclGroupStart"); rc != nccl_success) {
        return rc;
    }
    ++group_depth;
    return nccl_success;
}

ncclResult_t ncclGroupEnd()
{
    if (ncclResult_t rc = nccl_enter("ncclGroupEnd"); rc != nccl_success) {
        return rc;
    }
    if (group_depth == 0) {
        return invalid_usage;
    }
    --group_depth;
    return nccl_success;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, std::size_t count, int datatype, int op,
    ncclComm_t comm, struct CUstream_st* stream)
{
    if (ncclResult_t rc = nccl_enter("ncclAllReduce"); rc != nccl_success) {
        return rc;
    }
    const std::size_t element = element_size(datatype);
    if (sendbuff == nullptr || recvbuff == nullptr || element == 0 || op < 0 || op > 4 || stream == nullptr) {
        return invalid_argument;
    }
    int rank = 0;
    {
        NcclState& state = nccl_state();
        std::lock_guard lock(state.mutex);
        auto it = state.comms.find(reinterpret_cast<const Communicator*>(comm));
        if (it == state.comms.end()) {
            return invalid_argument;
        }
        if ((*it)->nranks > 1 && group_depth == 0) {
            return invalid_usage; // one thread, several GPUs: only a group can launch them all
        }
        rank = (*it)->rank;
    }
    const StreamAdvance advance = find_stream_advance();
    if (advance == nullptr) {
        return unhandled_cuda_error;
    }
    const double bytes = static_cast<double>(count) * static_cast<double>(element);
    const double seconds = bytes / (env_rate("FAKE_NCCL_ALGBW_GBPS", rank, 200) * 1e9);
    return advance(stream, seconds) == 0 ? nccl_success : unhandled_cuda_error;
}

const char* ncclGetErrorString(ncclResult_t result)
{
    misbehave("ncclGetErrorString", "FAKE_NCCL_HANG_IN", "FAKE_NCCL_CRASH_IN");
    switch (result) {
    case 0:
        return "no error";
    case 1:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3:
        return "internal error - please report this issue to the NCCL developers";
    case 4:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case 6:
        return "remote process exited or there was a network error";
    case 7:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

} // extern "C"
#endif // FAKE_NCCL
