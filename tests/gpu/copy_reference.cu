// An independent reference for gpudoctor's deep tier (probes/gpu_bandwidth.hpp): the same copies
// measured through the CUDA runtime API instead of the driver API, by the same method. Per sample:
// an event, `copies` async copies of `bytes` on one stream, an event; GB/s = 1e9 bytes/s of the
// bytes moved over the events' elapsed time; one warm-up sample thrown away; the median of
// `samples`. Measured for each visible GPU: host→device and device→host through pinned host memory
// (cudaMallocHost), and a copy within the device's own memory (counted as bytes / time, as
// nvbandwidth counts it); with two GPUs or more, every ordered pair that can access each other
// (both ways) copies with cudaMemcpyPeerAsync on the source GPU's stream.
//
// Before a GPU's host copies the thread moves onto the CPUs next to the GPU (sysfs local_cpulist
// of its PCI device), and the pinned buffer is allocated and touched from there, so that it sits
// in the GPU's NUMA node, as gpudoctor places its own (and as nvbandwidth under numactl would).
// --no-place leaves the thread where it is.
//
//   nvcc -O2 -o copy_reference tests/gpu/copy_reference.cu
//   ./copy_reference [--bytes N] [--copies N] [--samples N] [--no-place]
//
// Prints one JSON object on stdout; every CUDA error goes to stderr and exits 1; usage errors
// exit 2. tests/gpu/run.sh compiles and runs it, and tests/gpu/compare.py reads its output.
#include <cuda_runtime.h>

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void fail(const char* call, cudaError_t rc, const char* file, int line)
{
    std::fprintf(stderr, "copy_reference: %s failed at %s:%d: %s: %s\n", call, file, line, cudaGetErrorName(rc),
        cudaGetErrorString(rc));
    std::exit(1);
}

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        const cudaError_t check_rc_ = (call);                                                                          \
        if (check_rc_ != cudaSuccess) {                                                                                \
            fail(#call, check_rc_, __FILE__, __LINE__);                                                                \
        }                                                                                                              \
    } while (0)

struct Settings {
    std::size_t bytes = std::size_t{256} << 20;
    unsigned copies = 8;
    unsigned samples = 5;
    bool place = true;
};

void usage(std::FILE* to)
{
    std::fprintf(to,
        "usage: copy_reference [--bytes N] [--copies N] [--samples N] [--no-place]\n"
        "  --bytes N    bytes per copy (default 268435456 = 256 MiB)\n"
        "  --copies N   copies per timed sample (default 8)\n"
        "  --samples N  timed samples, after one warm-up sample; the median is reported (default 5)\n"
        "  --no-place   do not move onto the CPUs next to each GPU for its host copies\n");
}

unsigned long long parse_number(const char* option, const char* text)
{
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0 || value == 0) {
        std::fprintf(stderr, "copy_reference: %s %s: expected a whole number, 1 or more\n", option, text);
        std::exit(2);
    }
    return value;
}

Settings parse_args(int argc, char** argv)
{
    Settings s;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            std::exit(0);
        }
        if (arg == "--no-place") {
            s.place = false;
            continue;
        }
        if ((arg == "--bytes" || arg == "--copies" || arg == "--samples") && i + 1 < argc) {
            const unsigned long long value = parse_number(argv[i], argv[i + 1]);
            ++i;
            if (arg == "--bytes") {
                s.bytes = static_cast<std::size_t>(value);
            } else if (value > 1000000) {
                std::fprintf(stderr, "copy_reference: %s %llu: at most 1000000\n", arg.c_str(), value);
                std::exit(2);
            } else if (arg == "--copies") {
                s.copies = static_cast<unsigned>(value);
            } else {
                s.samples = static_cast<unsigned>(value);
            }
            continue;
        }
        std::fprintf(stderr, "copy_reference: unknown or incomplete option '%s'\n", arg.c_str());
        usage(stderr);
        std::exit(2);
    }
    return s;
}

double median(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// One GPU's buffers, stream and events; the stream and events belong to the GPU's context.
struct Gpu {
    int index = 0;
    std::string name;
    std::string bus_id;
    std::string placement;
    void* host = nullptr; // pinned, allocated for the GPU's host copies only
    void* a = nullptr;
    void* b = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
};

/// Times `copy` (which queues one copy on gpu.stream) by the method in the file comment and
/// returns the median GB/s.
template <typename Copy> double measure(const Gpu& gpu, const Settings& s, Copy copy)
{
    CHECK(cudaSetDevice(gpu.index));
    std::vector<double> gbps;
    for (unsigned sample = 0; sample <= s.samples; ++sample) { // sample 0 is the warm-up
        CHECK(cudaEventRecord(gpu.start, gpu.stream));
        for (unsigned c = 0; c < s.copies; ++c) {
            copy();
        }
        CHECK(cudaEventRecord(gpu.stop, gpu.stream));
        CHECK(cudaEventSynchronize(gpu.stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, gpu.start, gpu.stop));
        if (sample > 0 && ms > 0) {
            gbps.push_back(static_cast<double>(s.bytes) * s.copies / (ms / 1e3) / 1e9);
        }
    }
    if (gbps.empty()) {
        std::fprintf(stderr, "copy_reference: GPU %d: no sample took measurable time\n", gpu.index);
        std::exit(1);
    }
    return median(gbps);
}

/// Lets `from`'s context reach `to`'s memory; enabling it twice is no error.
void enable_peer_access(int from, int to)
{
    CHECK(cudaSetDevice(from));
    const cudaError_t rc = cudaDeviceEnablePeerAccess(to, 0);
    if (rc == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError(); // clear the error so the next call does not see it
    } else {
        CHECK(rc);
    }
}

/// Moves this thread onto the CPUs sysfs lists next to the PCI device `bus_id`; returns what it
/// did, for the output ("CPUs 0-31", or "not placed: why").
std::string place_near(const std::string& bus_id, const cpu_set_t& original)
{
    if (sched_setaffinity(0, sizeof original, &original) != 0) {
        return std::string("not placed: sched_setaffinity: ") + std::strerror(errno);
    }
    std::ifstream file("/sys/bus/pci/devices/" + bus_id + "/local_cpulist");
    std::string list;
    if (!std::getline(file, list) || list.empty()) {
        return "not placed: no /sys/bus/pci/devices/" + bus_id + "/local_cpulist";
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    std::stringstream ranges(list);
    std::string range;
    while (std::getline(ranges, range, ',')) {
        unsigned first = 0;
        unsigned last = 0;
        const int n = std::sscanf(range.c_str(), "%u-%u", &first, &last);
        if (n < 1) {
            return "not placed: cannot read local_cpulist '" + list + "'";
        }
        for (unsigned cpu = first; cpu <= (n == 2 ? last : first) && cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &original)) { // only CPUs this process may use (cgroups, taskset)
                CPU_SET(cpu, &set);
            }
        }
    }
    if (CPU_COUNT(&set) == 0) {
        return "not placed: none of the CPUs " + list + " is allowed to this process";
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        return std::string("not placed: sched_setaffinity: ") + std::strerror(errno);
    }
    return "CPUs " + list;
}

std::string lower(std::string text)
{
    for (char& c : text) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return text;
}

std::string json_string(const std::string& text)
{
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace

int main(int argc, char** argv)
{
    const Settings s = parse_args(argc, argv);

    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    int runtime_version = 0;
    int driver_version = 0;
    CHECK(cudaRuntimeGetVersion(&runtime_version));
    CHECK(cudaDriverGetVersion(&driver_version));

    std::vector<Gpu> gpus(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        Gpu& g = gpus[static_cast<std::size_t>(i)];
        g.index = i;
        CHECK(cudaSetDevice(i));
        cudaDeviceProp prop{};
        CHECK(cudaGetDeviceProperties(&prop, i));
        g.name = prop.name;
        char bus_id[64] = {};
        CHECK(cudaDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof bus_id), i));
        g.bus_id = lower(bus_id);
        CHECK(cudaMalloc(&g.a, s.bytes));
        CHECK(cudaMalloc(&g.b, s.bytes));
        CHECK(cudaMemset(g.a, 2, s.bytes));
        CHECK(cudaMemset(g.b, 3, s.bytes));
        CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
        CHECK(cudaEventCreate(&g.start));
        CHECK(cudaEventCreate(&g.stop));
        CHECK(cudaDeviceSynchronize());
    }

    std::string out = "{\"tool\":\"copy_reference (nvcc)\"";
    char number[160];
    std::snprintf(number, sizeof number,
        ",\"settings\":{\"bytes\":%zu,\"copies\":%u,\"samples\":%u},\"cuda_runtime_version\":%d,"
        "\"cuda_driver_version\":%d",
        s.bytes, s.copies, s.samples, runtime_version, driver_version);
    out += number;
    out += ",\"gpus\":[";
    cpu_set_t original;
    CPU_ZERO(&original);
    if (sched_getaffinity(0, sizeof original, &original) != 0) {
        std::fprintf(stderr, "copy_reference: sched_getaffinity: %s\n", std::strerror(errno));
        return 1;
    }
    for (Gpu& g : gpus) {
        g.placement = s.place ? place_near(g.bus_id, original) : "not placed: --no-place";
        CHECK(cudaSetDevice(g.index));
        CHECK(cudaMallocHost(&g.host, s.bytes));
        std::memset(g.host, 1, s.bytes); // first touch, from the CPUs next to the GPU
        const double h2d =
            measure(g, s, [&] { CHECK(cudaMemcpyAsync(g.a, g.host, s.bytes, cudaMemcpyHostToDevice, g.stream)); });
        const double d2h =
            measure(g, s, [&] { CHECK(cudaMemcpyAsync(g.host, g.a, s.bytes, cudaMemcpyDeviceToHost, g.stream)); });
        const double d2d =
            measure(g, s, [&] { CHECK(cudaMemcpyAsync(g.b, g.a, s.bytes, cudaMemcpyDeviceToDevice, g.stream)); });
        CHECK(cudaFreeHost(g.host));
        g.host = nullptr;
        std::fprintf(stderr, "copy_reference: GPU %d (%s, %s): H2D %.1f, D2H %.1f, D2D %.1f GB/s\n", g.index,
            g.bus_id.c_str(), g.placement.c_str(), h2d, d2h, d2d);
        if (g.index > 0) {
            out += ",";
        }
        out += "{\"index\":" + std::to_string(g.index) + ",\"bus_id\":" + json_string(g.bus_id) +
            ",\"name\":" + json_string(g.name) + ",\"placement\":" + json_string(g.placement);
        std::snprintf(number, sizeof number, ",\"h2d_gbps\":%.3f,\"d2h_gbps\":%.3f,\"d2d_gbps\":%.3f}", h2d, d2h, d2d);
        out += number;
    }
    out += "],\"peers\":[";
    sched_setaffinity(0, sizeof original, &original);

    bool first_peer = true;
    for (const Gpu& src : gpus) {
        for (const Gpu& dst : gpus) {
            if (src.index == dst.index) {
                continue;
            }
            int forward = 0;
            int backward = 0;
            CHECK(cudaDeviceCanAccessPeer(&forward, src.index, dst.index));
            CHECK(cudaDeviceCanAccessPeer(&backward, dst.index, src.index));
            if (forward == 0 || backward == 0) {
                continue;
            }
            enable_peer_access(src.index, dst.index);
            enable_peer_access(dst.index, src.index);
            const double gbps = measure(
                src, s, [&] { CHECK(cudaMemcpyPeerAsync(dst.b, dst.index, src.a, src.index, s.bytes, src.stream)); });
            std::fprintf(stderr, "copy_reference: GPU %d → GPU %d: %.1f GB/s\n", src.index, dst.index, gbps);
            std::snprintf(number, sizeof number, "%s{\"src\":%d,\"dst\":%d,\"gbps\":%.3f}", first_peer ? "" : ",",
                src.index, dst.index, gbps);
            out += number;
            first_peer = false;
        }
    }
    out += "]}";

    for (Gpu& g : gpus) {
        CHECK(cudaSetDevice(g.index));
        CHECK(cudaEventDestroy(g.start));
        CHECK(cudaEventDestroy(g.stop));
        CHECK(cudaStreamDestroy(g.stream));
        CHECK(cudaFree(g.a));
        CHECK(cudaFree(g.b));
    }
    std::printf("%s\n", out.c_str());
    return 0;
}
