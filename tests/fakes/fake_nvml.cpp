// A stand-in for libnvidia-ml.so.1 with the same C symbols, answering from a JSON fixture named
// by FAKE_NVML_FIXTURE:
//   {"init_error": 0, "driver": "550.54.15",
//    "gpus": [{"bus_id": "00000000:07:00.0", "name": "...", "uuid": "GPU-...",
//              "memory_total": 85899345920, "mig": ["MIG-..."]}]}
// Memory in use per GPU (optional): memory_used (bytes), or memory_used_file, a file holding the
//   bytes, read again at every nvmlDeviceGetMemoryInfo call.
// Health fields per GPU (all optional): compute_mode, persistence, processes,
//   ecc {enabled, corrected, uncorrected (lifetime counts), corrected_volatile,
//   uncorrected_volatile (since the last reset)}, retired_pages {single, double, pending},
//   remapped_rows {corrected, uncorrected, pending, failure}, clock_event_reasons,
//   pcie {gen, max_gen, width, max_width}, utilization, nvlinks ["<remote bus id>", ...],
//   compute_capability "9.0" (nvmlDeviceGetCudaComputeCapability; NOT_SUPPORTED without it),
//   nvlink_error: the code nvmlDeviceGetNvLinkState gives for every link (without nvlinks, 3).
// Top level: cuda_driver_version, p2p {"0-1": {"read": status, "write": status}},
//   ancestor {"0-1": level}, default_ancestor, hang_in / crash_in "<function name>".
// Monitor readings per GPU (optional): temperature_c (nvmlDeviceGetTemperature, the die),
//   sm_clock_mhz (nvmlDeviceGetClockInfo, NVML_CLOCK_SM).
// Sampling sequences (for monitors): utilization, memory_used, power_mw (nvmlDeviceGetPowerUsage)
//   and clock_event_reasons may each be a list instead of one value. The n-th
//   nvmlDeviceGetUtilizationRates call on a GPU returns the n-th entry (the last one repeats) and
//   makes n the GPU's current sample; the other lists answer with the current sample's entry (the
//   first before any utilisation call), so one sample reads one column of the lists.
// Process lists (nvmlDeviceGetComputeRunningProcesses*): per GPU "processes" is a count (pids
//   4200000 + 100 * gpu + i, above Linux's largest pid_max: no process has them), or a list of
//   pids or of {"pid", "used_memory"}; "processes_error": an NVML return code the call gives
//   instead. On top, the file named by FAKE_NVML_PROCESS_FILE (read at every call) holds
//   "<pid> <gpu index or bus id>" lines: a test's program appends its own pid to "open" a GPU.
//   Each entry is written with the struct size of the symbol called: _v3 24 bytes (32 with
//   FAKE_NVML_V3_STRIDE=32), _v2 24, unversioned 16.
// Built in variants: FAKE_NVML_MINIMAL exports only the symbols gpukit requires;
// FAKE_NVML_NO_PCI also lacks nvmlDeviceGetPciInfo_v3/_v2, so the loader must refuse it.
// Process-list variants, as drivers differ: FAKE_NVML_NO_V3, FAKE_NVML_NO_V2 (the symbols are
// missing), FAKE_NVML_NO_DETAIL_LIST (no nvmlDeviceGetRunningProcessDetailList: with the
// ConfCompute symbol, a 535.43-535.86 driver), FAKE_NVML_V3_STRIDE=32.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef FAKE_NVML_V3_STRIDE
#define FAKE_NVML_V3_STRIDE 24
#endif

namespace {

struct PciInfo {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
};

struct Memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

// Read again at every nvmlInit_v2: the library may stay loaded between tests that use different
// fixtures.
nlohmann::json& fixture()
{
    static nlohmann::json data{{"gpus", nlohmann::json::array()}};
    return data;
}

std::map<std::size_t, long>& samples_taken();

void load_fixture()
{
    const char* path = std::getenv("FAKE_NVML_FIXTURE");
    samples_taken().clear();
    fixture() = nlohmann::json{{"gpus", nlohmann::json::array()}};
    if (path != nullptr) {
        std::ifstream in(path);
        fixture() = nlohmann::json::parse(in);
    }
}

// A device handle is 1 + index for GPUs and 1000 * (gpu + 1) + mig for MIG instances.
std::size_t gpu_of(void* handle)
{
    auto value = reinterpret_cast<std::uintptr_t>(handle);
    return value >= 1000 ? value / 1000 - 1 : value - 1;
}

bool is_mig(void* handle)
{
    return reinterpret_cast<std::uintptr_t>(handle) >= 1000;
}

// The fixture can make any function hang (a wedged driver) or crash.
void misbehave(const char* function)
{
    if (fixture().value("hang_in", "") == function) {
        while (true) {
            pause();
        }
    }
    if (fixture().value("crash_in", "") == function) {
        std::raise(SIGSEGV);
    }
}

const nlohmann::json& gpu(void* device)
{
    return fixture()["gpus"][gpu_of(device)];
}

// Per GPU, the sample the last utilisation call read (-1: none yet), and how many calls there were.
std::map<std::size_t, long>& samples_taken()
{
    static std::map<std::size_t, long> taken;
    return taken;
}

std::size_t current_sample(void* device)
{
    auto it = samples_taken().find(gpu_of(device));
    return it == samples_taken().end() || it->second <= 0 ? 0 : static_cast<std::size_t>(it->second - 1);
}

// A fixture value, or the n-th entry of a list of them (the last one repeats).
const nlohmann::json& sampled(const nlohmann::json& value, std::size_t n)
{
    if (!value.is_array() || value.empty()) {
        return value;
    }
    return value[std::min(n, value.size() - 1)];
}

// A field of a GPU's fixture object, or NOT_SUPPORTED (3) when the fixture leaves it out.
template <typename T> int field(void* device, const char* group, const char* key, T* out)
{
    const auto& g = gpu(device);
    const nlohmann::json* node = &g;
    if (group != nullptr) {
        if (!g.contains(group)) {
            return 3;
        }
        node = &g[group];
    }
    if (!node->contains(key)) {
        return 3;
    }
    *out = sampled((*node)[key], current_sample(device)).get<T>();
    return 0;
}

std::string pair_key(void* a, void* b)
{
    return std::to_string(gpu_of(a)) + "-" + std::to_string(gpu_of(b));
}

// "00000000:0F:00.0", "0000:0f:00.0" and "0f:00.0" all name the same GPU: compare bus:device.function.
std::string short_bus(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    auto first = text.find(':');
    return text.find(':', first + 1) == std::string::npos ? text : text.substr(first + 1);
}

struct FakeProcess {
    unsigned pid;
    unsigned long long used_memory;
};

// The processes on a GPU: the fixture's, then the process file's lines for it.
std::vector<FakeProcess> processes_on(void* device)
{
    std::vector<FakeProcess> out;
    const std::size_t index = gpu_of(device);
    const auto& g = gpu(device);
    if (g.contains("processes")) {
        const auto& p = g["processes"];
        if (p.is_number()) {
            for (unsigned i = 0; i < p.get<unsigned>(); ++i) {
                out.push_back({static_cast<unsigned>(4200000 + 100 * index + i), 256ULL << 20});
            }
        } else {
            for (const auto& e : p) {
                if (e.is_number()) {
                    out.push_back({e.get<unsigned>(), 256ULL << 20});
                } else {
                    out.push_back({e.value("pid", 0U), e.value("used_memory", 256ULL << 20)});
                }
            }
        }
    }
    if (const char* file = std::getenv("FAKE_NVML_PROCESS_FILE"); file != nullptr) {
        std::ifstream in(file);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream words(line);
            unsigned pid = 0;
            std::string which;
            if (!(words >> pid >> which)) {
                continue;
            }
            const bool is_index = which.find_first_not_of("0123456789") == std::string::npos;
            if ((is_index && std::stoul(which) == index) ||
                (!is_index && short_bus(which) == short_bus(g.value("bus_id", "")))) {
                out.push_back({pid, 512ULL << 20});
            }
        }
    }
    return out;
}

// nvmlDeviceGetComputeRunningProcesses in every version: entries of `stride` bytes (pid at 0,
// usedGpuMemory at 8, then gpuInstanceId and computeInstanceId 0xFFFFFFFF, then 8 bytes of
// usedGpuCcProtectedMemory in the 32-byte layout).
int list_processes(void* device, unsigned int* count, void* infos, std::size_t stride)
{
    misbehave("nvmlDeviceGetComputeRunningProcesses");
    if (gpu(device).contains("processes_error")) {
        return gpu(device)["processes_error"].get<int>();
    }
    const auto processes = processes_on(device);
    const auto n = static_cast<unsigned int>(processes.size());
    if (infos == nullptr || *count < n) {
        *count = n;
        return n == 0 ? 0 : 7; // NVML_ERROR_INSUFFICIENT_SIZE
    }
    auto* out = static_cast<unsigned char*>(infos);
    for (unsigned i = 0; i < n; ++i) {
        unsigned char* entry = out + i * stride;
        std::memset(entry, 0, stride);
        std::memcpy(entry, &processes[i].pid, sizeof(unsigned));
        std::memcpy(entry + 8, &processes[i].used_memory, sizeof(unsigned long long));
        if (stride >= 24) {
            const unsigned none = 0xFFFFFFFFU;
            std::memcpy(entry + 16, &none, sizeof none);
            std::memcpy(entry + 20, &none, sizeof none);
        }
    }
    *count = n;
    return 0;
}

int copy(const std::string& text, char* out, unsigned int length)
{
    if (text.size() + 1 > length) {
        return 7; // NVML_ERROR_INSUFFICIENT_SIZE
    }
    std::memcpy(out, text.c_str(), text.size() + 1);
    return 0;
}

} // namespace

extern "C" {

int nvmlInit_v2()
{
    load_fixture();
    misbehave("nvmlInit_v2");
    return fixture().value("init_error", 0);
}

int nvmlShutdown()
{
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int* count)
{
    misbehave("nvmlDeviceGetCount_v2");
    *count = static_cast<unsigned int>(fixture()["gpus"].size());
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device)
{
    if (index >= fixture()["gpus"].size()) {
        return 2; // NVML_ERROR_INVALID_ARGUMENT
    }
    *device = reinterpret_cast<void*>(static_cast<std::uintptr_t>(index + 1));
    return 0;
}

#ifndef FAKE_NVML_NO_PCI
int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci)
{
    const auto& gpu = fixture()["gpus"][gpu_of(device)];
    std::string bus = gpu.value("bus_id", "00000000:00:00.0");
    std::memset(pci, 0, sizeof *pci);
    std::snprintf(pci->bus_id, sizeof pci->bus_id, "%s", bus.c_str());
    std::snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "%s", bus.size() > 4 ? bus.c_str() + 4 : "");
    unsigned d = 0, b = 0, s = 0;
    std::sscanf(bus.c_str(), "%x:%x:%x", &d, &b, &s);
    pci->domain = d;
    pci->bus = b;
    pci->device = s;
    pci->pci_device_id = 0x20b010de;
    return 0;
}
#endif

#ifndef FAKE_NVML_MINIMAL
const char* nvmlErrorString(int result)
{
    switch (result) {
    case 0:
        return "Success";
    case 9:
        return "Driver Not Loaded";
    case 12:
        return "NVML Shared Library Not Found";
    default:
        return "Unknown Error";
    }
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length)
{
    return copy(fixture()["gpus"][gpu_of(device)].value("name", "NVIDIA Fake GPU"), name, length);
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length)
{
    const auto& gpu = fixture()["gpus"][gpu_of(device)];
    if (is_mig(device)) {
        auto index = reinterpret_cast<std::uintptr_t>(device) % 1000;
        return copy(gpu["mig"][index].get<std::string>(), uuid, length);
    }
    return copy(gpu.value("uuid", ""), uuid, length);
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory)
{
    misbehave("nvmlDeviceGetMemoryInfo");
    const auto& gpu = fixture()["gpus"][gpu_of(device)];
    memory->total = gpu.value("memory_total", 0ULL);
    memory->used = gpu.contains("memory_used")
        ? sampled(gpu["memory_used"], current_sample(device)).get<unsigned long long>()
        : 0ULL;
    // A file holding the bytes used, read at every call: a test's child process changes it as it runs.
    if (gpu.contains("memory_used_file")) {
        std::ifstream in(gpu["memory_used_file"].get<std::string>());
        unsigned long long used = 0;
        if (in >> used) {
            memory->used = used;
        }
    }
    memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
    return 0;
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length)
{
    return copy(fixture().value("driver", "550.54.15"), version, length);
}

int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned int* count)
{
    const auto& gpu = fixture()["gpus"][gpu_of(device)];
    if (!gpu.contains("mig")) {
        return 3; // NVML_ERROR_NOT_SUPPORTED
    }
    *count = static_cast<unsigned int>(gpu["mig"].size());
    return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned int index, void** mig)
{
    *mig = reinterpret_cast<void*>((gpu_of(device) + 1) * 1000 + index);
    return 0;
}

int nvmlSystemGetCudaDriverVersion_v2(int* version)
{
    *version = fixture().value("cuda_driver_version", 12040);
    return 0;
}

int nvmlDeviceGetComputeMode(void* device, int* mode)
{
    return field(device, nullptr, "compute_mode", mode);
}

int nvmlDeviceGetPersistenceMode(void* device, int* mode)
{
    return field(device, nullptr, "persistence", mode);
}

#ifndef FAKE_NVML_NO_V3
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, void* infos)
{
    return list_processes(device, count, infos, FAKE_NVML_V3_STRIDE);
}
#endif

#ifndef FAKE_NVML_NO_V2
int nvmlDeviceGetComputeRunningProcesses_v2(void* device, unsigned int* count, void* infos)
{
    return list_processes(device, count, infos, 24);
}
#endif

int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned int* count, void* infos)
{
    return list_processes(device, count, infos, 16);
}

// Present in 535-era and later drivers; only their presence matters to the loader.
int nvmlDeviceGetConfComputeMemSizeInfo(void*, void*)
{
    return 3;
}

#ifndef FAKE_NVML_NO_DETAIL_LIST
int nvmlDeviceGetRunningProcessDetailList(void*, void*)
{
    return 3;
}
#endif

int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts)
{
    return field(device, nullptr, "power_mw", milliwatts);
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius)
{
    return sensor == 0 ? field(device, nullptr, "temperature_c", celsius) : 2;
}

int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* mhz)
{
    return type == 1 ? field(device, nullptr, "sm_clock_mhz", mhz) : 2;
}

int nvmlDeviceGetEccMode(void* device, int* current, int* pending)
{
    int rc = field(device, "ecc", "enabled", current);
    *pending = *current;
    return rc;
}

int nvmlDeviceGetTotalEccErrors(void* device, int type, int counter, unsigned long long* count)
{
    const char* lifetime = type == 1 ? "uncorrected" : "corrected";
    const char* since_reset = type == 1 ? "uncorrected_volatile" : "corrected_volatile";
    return field(device, "ecc", counter == 0 ? since_reset : lifetime, count);
}

int nvmlDeviceGetRetiredPages(void* device, int cause, unsigned int* count, unsigned long long* addresses)
{
    unsigned int n = 0;
    int rc = field(device, "retired_pages", cause == 1 ? "double" : "single", &n);
    if (rc != 0) {
        return rc;
    }
    if (addresses == nullptr || *count < n) {
        *count = n;
        return n == 0 ? 0 : 7;
    }
    *count = n;
    return 0;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending)
{
    return field(device, "retired_pages", "pending", pending);
}

int nvmlDeviceGetRemappedRows(
    void* device, unsigned int* corrected, unsigned int* uncorrected, unsigned int* pending, unsigned int* failure)
{
    if (!gpu(device).contains("remapped_rows")) {
        return 3;
    }
    const auto& r = gpu(device)["remapped_rows"];
    *corrected = r.value("corrected", 0U);
    *uncorrected = r.value("uncorrected", 0U);
    *pending = r.value("pending", 0U);
    *failure = r.value("failure", 0U);
    return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons)
{
    return field(device, nullptr, "clock_event_reasons", reasons);
}

int nvmlDeviceGetCurrPcieLinkGeneration(void* device, unsigned int* value)
{
    return field(device, "pcie", "gen", value);
}

int nvmlDeviceGetMaxPcieLinkGeneration(void* device, unsigned int* value)
{
    return field(device, "pcie", "max_gen", value);
}

int nvmlDeviceGetCurrPcieLinkWidth(void* device, unsigned int* value)
{
    return field(device, "pcie", "width", value);
}

int nvmlDeviceGetMaxPcieLinkWidth(void* device, unsigned int* value)
{
    return field(device, "pcie", "max_width", value);
}

int nvmlDeviceGetUtilizationRates(void* device, unsigned int* rates)
{
    misbehave("nvmlDeviceGetUtilizationRates");
    ++samples_taken()[gpu_of(device)];
    unsigned int u = 0;
    int rc = field(device, nullptr, "utilization", &u);
    rates[0] = u;
    rates[1] = 0;
    return rc;
}

int nvmlDeviceGetP2PStatus(void* a, void* b, int index, int* status)
{
    *status = 0;
    const auto& p2p = fixture().value("p2p", nlohmann::json::object());
    for (const auto& key : {pair_key(a, b), pair_key(b, a)}) {
        if (p2p.contains(key)) {
            *status = p2p[key].value(index == 0 ? "read" : "write", 0);
        }
    }
    return 0;
}

int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level)
{
    *level = fixture().value("default_ancestor", 40);
    const auto& anc = fixture().value("ancestor", nlohmann::json::object());
    for (const auto& key : {pair_key(a, b), pair_key(b, a)}) {
        if (anc.contains(key)) {
            *level = anc[key].get<int>();
        }
    }
    return 0;
}

int nvmlDeviceGetNvLinkState(void* device, unsigned int link, int* active)
{
    const auto& g = gpu(device);
    if (g.contains("nvlink_error")) {
        return g["nvlink_error"].get<int>();
    }
    if (!g.contains("nvlinks")) {
        return 3;
    }
    if (link >= 18) {
        return 2;
    }
    *active = link < g["nvlinks"].size() ? 1 : 0;
    return 0;
}

int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor)
{
    const auto& g = gpu(device);
    if (!g.contains("compute_capability")) {
        return 3;
    }
    const auto text = g["compute_capability"].get<std::string>();
    if (std::sscanf(text.c_str(), "%d.%d", major, minor) != 2) {
        return 999;
    }
    return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned int link, PciInfo* pci)
{
    const auto& g = gpu(device);
    if (!g.contains("nvlinks") || link >= g["nvlinks"].size()) {
        return 2;
    }
    std::memset(pci, 0, sizeof *pci);
    std::snprintf(pci->bus_id, sizeof pci->bus_id, "%s", g["nvlinks"][link].get<std::string>().c_str());
    return 0;
}
#endif

} // extern "C"
