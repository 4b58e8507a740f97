// A stand-in for libnvidia-ml.so.1 with the same C symbols, answering from a JSON fixture named
// by FAKE_NVML_FIXTURE:
//   {"init_error": 0, "driver": "550.54.15",
//    "gpus": [{"bus_id": "00000000:07:00.0", "name": "...", "uuid": "GPU-...",
//              "memory_total": 85899345920, "mig": ["MIG-..."]}]}
// Built in variants: FAKE_NVML_MINIMAL exports only the symbols gpukit requires;
// FAKE_NVML_NO_PCI also lacks nvmlDeviceGetPciInfo_v3/_v2, so the loader must refuse it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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

void load_fixture()
{
    const char* path = std::getenv("FAKE_NVML_FIXTURE");
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
    return fixture().value("init_error", 0);
}

int nvmlShutdown()
{
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int* count)
{
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
    const auto& gpu = fixture()["gpus"][gpu_of(device)];
    memory->total = gpu.value("memory_total", 0ULL);
    memory->used = 0;
    memory->free = memory->total;
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
#endif

} // extern "C"
