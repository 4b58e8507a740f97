#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace probes {

/// What an external command did.
struct CommandResult {
    int exit_code = -1; ///< exit status, or 128+signal
    bool timed_out = false;
    std::string output; ///< stdout and stderr together (the first 16 MiB)
};

/// Runs argv[0] (searched in PATH) with argv, never through a shell, with a deadline after which
/// it is killed; stdin is /dev/null. Throws probes::Error when it cannot be started.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

/// The same, but the child gets exactly `env` as its environment instead of this process's, and
/// argv[0] is searched in env's PATH: a collector runs a command in the environment snapshot it
/// was given (doctor::CollectContext::env), not in whatever gpudoctor itself inherited.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const std::map<std::string, std::string>& env);

/// The first executable `name` in the PATH-style list `path`; a name with a '/' is checked as is.
std::optional<std::string> find_executable(const std::string& name, const char* path);

} // namespace probes
