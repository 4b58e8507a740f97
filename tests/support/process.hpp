#pragma once

#include <chrono>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace test_support {

/// What a finished program did.
struct Finished {
    int exit_code = -1; ///< exit status, or 128+signal
    std::string out;
    std::string err;
    bool timed_out = false;
};

/// Environment changes for a child: a value sets the variable, nullopt-like "\x01unset" removes it.
using EnvChanges = std::map<std::string, std::string>;
inline const std::string unset_var = "\x01unset";

/// Runs argv (no shell) with the current environment plus `env`, stdin from /dev/null, and
/// returns its exit code and output. Killed after `timeout`.
Finished run(const std::vector<std::string>& argv, const EnvChanges& env = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// Runs `program ARGS...` with `base` environment changes and `extra` ones on top (extra wins).
inline Finished run_with(const std::string& program, std::vector<std::string> args, EnvChanges base,
    const EnvChanges& extra = {}, std::chrono::milliseconds timeout = std::chrono::seconds(60))
{
    args.insert(args.begin(), program);
    for (const auto& [k, v] : extra) {
        base[k] = v;
    }
    return run(args, base, timeout);
}

/// Starts argv in the background with stdout and stderr going to `log`; returns its pid.
pid_t start(const std::vector<std::string>& argv, const EnvChanges& env, const std::string& log);

/// Waits for `pid` up to `timeout`; returns its exit code (128+signal), or -1 if it still runs.
int wait_for(pid_t pid, std::chrono::milliseconds timeout);

/// Whether a process with this pid exists and is not a zombie.
bool alive(pid_t pid);

} // namespace test_support
