#include "launcher/openmpi.hpp"

#include "probes/command.hpp"
#include "probes/error.hpp"
#include "probes/mpi_flavour.hpp"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>

namespace launcher {

MpiLauncher find_openmpi(const char* path_env)
{
    auto path = probes::find_executable("mpirun", path_env);
    if (!path) {
        throw probes::Error("mpirun not found in PATH; install Open MPI (apt-get install openmpi-bin) or add its bin "
                            "directory to PATH");
    }
    std::error_code ec;
    const std::string real = std::filesystem::canonical(*path, ec).filename().string();
    if (!ec && (real == "orterun" || real == "prterun" || real == "mpirun.openmpi")) {
        return MpiLauncher{*path, "Open MPI"};
    }
    auto result = probes::run_command({*path, "--version"}, std::chrono::seconds(10));
    std::string flavour = probes::mpi_flavour(result.output);
    if (flavour != "Open MPI") {
        throw probes::Error(fmt::format("{} is {}, not Open MPI{}; gpurun drives Open MPI's mpirun: put Open "
                                        "MPI's bin directory first in PATH",
            *path, flavour == "unknown" ? "an unknown MPI" : flavour,
            result.timed_out ? " (mpirun --version did not answer in 10 s)" : ""));
    }
    return MpiLauncher{*path, flavour};
}

bool root_allowed(bool flag, const char* allow, const char* confirm)
{
    auto one = [](const char* v) { return v != nullptr && std::string(v) == "1"; };
    return flag || (one(allow) && one(confirm));
}

std::vector<std::string> openmpi_command(const std::string& mpirun, const JobPlan& job, const LaunchOptions& options,
    bool allow_root, const std::vector<std::string>& forwarded_env, const std::string& helper,
    const std::vector<std::string>& helper_args)
{
    std::vector<std::string> argv{
        mpirun, "-np", std::to_string(job.ranks.size()), "--bind-to", "none", "--map-by", "slot"};
    std::string hosts;
    for (const auto& h : job.hosts) {
        hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", h.name, h.slots.value_or(1));
    }
    argv.insert(argv.end(), {"-H", hosts});
    if (allow_root) {
        argv.emplace_back("--allow-run-as-root");
    }
    for (const auto& name : forwarded_env) {
        argv.insert(argv.end(), {"-x", name});
    }
    for (const auto& e : options.exports) {
        argv.insert(argv.end(), {"-x", e});
    }
    argv.push_back(helper);
    argv.insert(argv.end(), helper_args.begin(), helper_args.end());
    return argv;
}

} // namespace launcher
