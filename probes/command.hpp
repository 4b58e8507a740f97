#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace probes {

/// What an external command did.
struct CommandResult {
    int exit_code = -1; ///< exit status, or 128+signal
    bool timed_out = false;
    /// stdout and stderr together: all of it up to 16 MiB; past that the first and the last 8 MiB
    /// around a line that says how many bytes were left out (see KeptOutput).
    std::string output;
};

/// Output kept from a command that may print without end: the first `head` bytes and the last
/// `tail` bytes, with "[... N bytes of output left out ...]" on a line of its own between them
/// when anything was dropped. The end matters as much as the start: a training run's out-of-memory
/// error comes last, after whatever it printed before.
class KeptOutput {
public:
    explicit KeptOutput(std::size_t head = 8U << 20, std::size_t tail = 8U << 20)
        : m_head_limit(head), m_tail_limit(tail)
    {
    }
    void append(const char* data, std::size_t size);
    /// Everything kept, in order; the object is left empty.
    std::string take();

private:
    std::size_t m_head_limit;
    std::size_t m_tail_limit;
    std::string m_head;
    std::string m_tail; ///< up to twice m_tail_limit between trims
    std::uint64_t m_dropped = 0;
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

/// For a child whose exec failed: writes `message` (made before fork), strerror(`err`) and a newline
/// to standard error with write(2) only, since after fork a threaded parent's heap and stdio locks
/// may be held, then _exit(127).
[[noreturn]] void exit_after_failed_exec(const std::string& message, int err) noexcept;

} // namespace probes
