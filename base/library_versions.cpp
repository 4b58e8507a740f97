#include "base/library_versions.hpp"

#include "base/dynamic_library.hpp"
#include "base/error.hpp"
#include "base/nccl_allreduce.hpp"
#include "base/nvml.hpp"
#include "base/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <hwloc.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

namespace base {

namespace {

#ifndef GPUKIT_DATA_RELATIVE
#define GPUKIT_DATA_RELATIVE "../share/gpukit"
#endif

#ifdef HWLOC_VERSION
constexpr const char* hwloc_release = HWLOC_VERSION;
#else
constexpr const char* hwloc_release = "";
#endif

/// A library that cannot be opened is "not found"; one that opens but cannot be used says why.
template <typename Load> void ask(const std::string& file, Load load, nlohmann::json& out, const char* key)
{
    const std::string note = std::string(key) + "_note";
    try {
        DynamicLibrary probe(file);
    } catch (const Error&) {
        out[note] = fmt::format("not found ({})", file);
        return;
    }
    try {
        out[key] = load();
    } catch (const std::exception& e) {
        out[note] = fmt::format("not usable: {}", e.what());
    }
}

/// Runs in the child: the GPU libraries' versions as JSON.
std::string gpu_library_versions()
{
    nlohmann::json out = nlohmann::json::object();
    ask(
        Nvml::default_file(),
        [] {
            auto version = Nvml::load().driver_version();
            if (!version) {
                throw Error("the library has no nvmlSystemGetDriverVersion");
            }
            return *version;
        },
        out, "driver");
    ask(
        Nccl::default_file(), [] { return Nccl::load().version(); }, out, "nccl");
    return out.dump();
}

void set_notes(LibraryVersions& v, const std::string& note)
{
    v.driver_note = note;
    v.nccl_note = note;
}

} // namespace

std::string hwloc_api_text(unsigned api_version)
{
    return fmt::format("{}.{}.{}", api_version >> 16, (api_version >> 8) & 0xff, api_version & 0xff);
}

std::string installed_data_dir()
{
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        return "";
    }
    const auto dir = (self.parent_path() / GPUKIT_DATA_RELATIVE).lexically_normal();
    return std::filesystem::is_directory(dir, ec) ? dir.string() : "";
}

LibraryVersions library_versions(std::chrono::milliseconds deadline)
{
    LibraryVersions v;
    v.data_dir = installed_data_dir();
    v.hwloc_built = hwloc_release;
    v.hwloc_built_api = HWLOC_API_VERSION;
    v.hwloc_runtime_api = hwloc_get_api_version();

    std::vector<Child> children;
    try {
        children.push_back(spawn_function(gpu_library_versions, SpawnOptions{}));
    } catch (const Error& e) {
        set_notes(v, fmt::format("not asked ({})", e.what()));
        return v;
    }
    // A child stuck in a driver ioctl dies only when the call returns: do not wait for it long.
    const ChildOutcome outcome = wait_for_children(children, deadline, std::chrono::milliseconds(500)).front();
    if (outcome.timed_out) {
        set_notes(v, fmt::format("no answer in {} s (the driver may be wedged)", deadline.count() / 1000.0));
        return v;
    }
    if (!outcome.exited(0)) {
        set_notes(v,
            outcome.signaled() ? fmt::format("not asked: the library crashed ({})", strsignal(WTERMSIG(outcome.status)))
                               : "not asked: the library check failed");
        return v;
    }
    const std::string& output = outcome.output;
    try {
        auto doc = nlohmann::json::parse(output);
        v.driver = doc.value("driver", "");
        v.driver_note = doc.value("driver_note", "");
        v.nccl = doc.value("nccl", "");
        v.nccl_note = doc.value("nccl_note", "");
    } catch (const nlohmann::json::exception&) {
        set_notes(v, "not asked: the library check answered garbage");
    }
    return v;
}

std::string version_text(const std::string& program, const std::string& version, const LibraryVersions& libraries)
{
    const auto& l = libraries;
    std::string out = fmt::format("{} (gpukit) {}\n", program, version);
    out += fmt::format("hwloc: API {} at run time; built with hwloc {} (API {})\n", hwloc_api_text(l.hwloc_runtime_api),
        l.hwloc_built.empty() ? "?" : l.hwloc_built, hwloc_api_text(l.hwloc_built_api));
    out += fmt::format("NVIDIA driver: {}\n", l.driver.empty() ? l.driver_note : l.driver + " (NVML)");
    out += fmt::format("NCCL: {}\n", l.nccl.empty() ? l.nccl_note : l.nccl);
    if (!l.data_dir.empty()) {
        out += fmt::format("data: {}\n", l.data_dir);
    }
    return out;
}

} // namespace base
