// Stand-ins for the CUDA libraries gpudoctor's libraries probe opens, with the same C symbols,
// answering from environment variables read at every call (so one loaded copy serves many tests).
// Built once per library with a -D switch:
//   FAKE_CUDA_DRIVER  libcuda.so.1: cuInit, cuDriverGetVersion, cuDeviceGetCount, cuGetErrorString,
//                     cuGetErrorName.  FAKE_CUDA_DRIVER_VERSION (default 12040),
//                     FAKE_CUDA_INIT_ERROR (default 0), FAKE_CUDA_DEVICE_COUNT (default 1);
//                     FAKE_CUDA_HANG_IN / FAKE_CUDA_CRASH_IN = "<function name>" make that call
//                     hang (a wedged driver) or crash.
//   FAKE_CUDA_NO_DEVICE_COUNT  with FAKE_CUDA_DRIVER: lacks cuDeviceGetCount, so the loader must
//                     refuse it.
//   FAKE_CUDART       cudaRuntimeGetVersion: FAKE_CUDART_VERSION (default 12040).
//   FAKE_CUDNN        cudnnGetVersion: FAKE_CUDNN_VERSION (default 90100).
//   FAKE_CUBLAS       cublasGetProperty: FAKE_CUBLAS_VERSION "major.minor.patch" (default 12.4.5).
//   FAKE_NCCL         ncclGetVersion: FAKE_NCCL_VERSION (default 21803).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

[[maybe_unused]] long env_number(const char* name, long fallback)
{
    const char* text = std::getenv(name);
    return text != nullptr && *text != '\0' ? std::strtol(text, nullptr, 10) : fallback;
}

[[maybe_unused]] void misbehave(const char* function)
{
    const char* hang = std::getenv("FAKE_CUDA_HANG_IN");
    if (hang != nullptr && std::strcmp(hang, function) == 0) {
        while (true) {
            pause();
        }
    }
    const char* crash = std::getenv("FAKE_CUDA_CRASH_IN");
    if (crash != nullptr && std::strcmp(crash, function) == 0) {
        std::raise(SIGSEGV);
    }
}

} // namespace

extern "C" {

#ifdef FAKE_CUDA_DRIVER
int cuInit(unsigned int flags)
{
    misbehave("cuInit");
    return flags == 0 ? static_cast<int>(env_number("FAKE_CUDA_INIT_ERROR", 0)) : 1; // CUDA_ERROR_INVALID_VALUE
}

int cuDriverGetVersion(int* version)
{
    misbehave("cuDriverGetVersion");
    if (version == nullptr) {
        return 1;
    }
    *version = static_cast<int>(env_number("FAKE_CUDA_DRIVER_VERSION", 12040));
    return 0;
}

#ifndef FAKE_CUDA_NO_DEVICE_COUNT
int cuDeviceGetCount(int* count)
{
    misbehave("cuDeviceGetCount");
    if (env_number("FAKE_CUDA_INIT_ERROR", 0) != 0) {
        return 3; // CUDA_ERROR_NOT_INITIALIZED
    }
    *count = static_cast<int>(env_number("FAKE_CUDA_DEVICE_COUNT", 1));
    return 0;
}
#endif

// One table for both error calls: code, CUresult name, text.
struct ErrorText {
    int code;
    const char* name;
    const char* text;
};
constexpr ErrorText error_texts[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
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
    return 1; // CUDA_ERROR_INVALID_VALUE
}

int cuGetErrorName(int error, const char** name)
{
    return error_lookup(error, name, true);
}

int cuGetErrorString(int error, const char** text)
{
    return error_lookup(error, text, false);
}
#endif

#ifdef FAKE_CUDART
int cudaRuntimeGetVersion(int* version)
{
    *version = static_cast<int>(env_number("FAKE_CUDART_VERSION", 12040));
    return 0;
}
#endif

#ifdef FAKE_CUDNN
std::size_t cudnnGetVersion()
{
    return static_cast<std::size_t>(env_number("FAKE_CUDNN_VERSION", 90100));
}
#endif

#ifdef FAKE_CUBLAS
int cublasGetProperty(int type, int* value)
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
int ncclGetVersion(int* version)
{
    *version = static_cast<int>(env_number("FAKE_NCCL_VERSION", 21803));
    return 0;
}
#endif

} // extern "C"
