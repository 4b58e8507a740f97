#include "probes/library_versions.hpp"

#include "probes/dynamic_library.hpp"
#include "probes/error.hpp"
#include "probes/nccl_allreduce.hpp"
#include "probes/nvml.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <hwloc.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace probes {

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

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        set_notes(v, fmt::format("not asked (pipe: {})", std::strerror(errno)));
        return v;
    }
    const pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        std::string text;
        try {
            text = gpu_library_versions();
        } catch (...) {
            _exit(1);
        }
        for (std::size_t done = 0; done < text.size();) {
            ssize_t n = write(fds[1], text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                _exit(1);
            }
            done += static_cast<std::size_t>(n);
        }
        _exit(0);
    }
    close(fds[1]);
    if (child < 0) {
        close(fds[0]);
        set_notes(v, fmt::format("not asked (fork: {})", std::strerror(errno)));
        return v;
    }
    std::string output;
    bool timed_out = false;
    const auto end = std::chrono::steady_clock::now() + deadline;
    char buffer[4096];
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) {
            continue; // EINTR or the deadline: the loop checks the time
        }
        ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n > 0) {
            output.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    if (timed_out) {
        kill(child, SIGKILL);
        // A child stuck in a driver ioctl dies only when the call returns: do not wait for it long.
        for (int i = 0; i < 25 && waitpid(child, &status, WNOHANG) != child; ++i) {
            usleep(20000);
        }
        set_notes(v, fmt::format("no answer in {} s (the driver may be wedged)", deadline.count() / 1000.0));
        return v;
    }
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) { }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        set_notes(v,
            WIFSIGNALED(status) ? fmt::format("not asked: the library crashed ({})", strsignal(WTERMSIG(status)))
                                : "not asked: the library check failed");
        return v;
    }
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

} // namespace probes
