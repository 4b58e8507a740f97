#pragma once

// gpurun --nccl-check: every rank's NCCL writes its INFO log to a file of its own, and gpurun reads
// the files with the NCCL log analyzer and prints its verdict.

#include "launcher/launch_options.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace base::nccl {
class Analyzer;
}

namespace launcher {

/// The name of each rank's log in the log directory; NCCL itself puts in the short host name for %h
/// and the process id for %p.
inline constexpr const char* nccl_log_name = "nccl.%h.%p.log";

/// How --dry-run shows the private log directory, which it does not create.
inline constexpr const char* nccl_private_dir_shown = "<private dir>";

/// The variable that tells each rank's helper which directory NCCL_DEBUG_FILE points into, so it
/// can check the directory on its own host before the program starts.
inline constexpr const char* nccl_log_dir_variable = "GPURUN_NCCL_LOG_DIR";

/// Why NCCL may not write its logs into `dir`, or "" when it may: the directory (symbolic links
/// followed) must exist, belong to this user and not be writable by every user. A directory that
/// another user made or can write to lets them read the logs or plant links that NCCL's fopen
/// follows. Group write is allowed: a project directory on a shared file system often has it.
std::string nccl_log_dir_problem(const std::string& dir);

/// In the rank's helper, before exec: when gpurun named the log directory (nccl_log_dir_variable)
/// and NCCL_DEBUG_FILE is set, unsets NCCL_DEBUG_FILE unless the directory passes
/// nccl_log_dir_problem here, so NCCL logs to standard output instead. Returns a warning for a
/// directory that exists but fails ("" otherwise: a directory missing on another host is usual).
/// Unsets nccl_log_dir_variable.
std::string keep_nccl_log_file_only_in_own_dir();

/// The variables that make NCCL write the logs the check reads, and notes on the user's own settings.
struct NcclCheckEnv {
    std::vector<std::string> exports; ///< mpirun -x arguments: NAME=VALUE, or NAME to pass the user's value on
    std::vector<std::string> notes;
};

/// NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET, unless the user set them (in gpurun's environment,
/// read through `getenv`, or with -x in `user_exports`): then theirs reach every rank, with a note
/// when NCCL would log too little for the check. NCCL_DEBUG_FILE is always `log_dir`/nccl_log_name,
/// with a note when it replaces the user's. Pure.
NcclCheckEnv nccl_check_env(const std::string& log_dir, const std::function<const char*(const char*)>& getenv,
    const std::vector<std::string>& user_exports);

/// The NCCL logs of one job and what has been printed about them. A private log directory lives as
/// long as this object: it is removed, with the logs, when the object goes (normal end, error or
/// forwarded signal alike).
class NcclCheck {
public:
    /// `keep_dir` empty: a private directory made by mkdtemp (mode 0700) under `temp_dir` ("" = /tmp).
    /// Otherwise the absolute path `keep_dir`, made with mode 0700 when missing and kept; logs
    /// already there are not read unless a rank writes them again. Throws base::Error.
    NcclCheck(NcclCheckMode mode, unsigned ranks, const std::string& keep_dir, const std::string& temp_dir);
    ~NcclCheck();
    NcclCheck(const NcclCheck&) = delete;
    NcclCheck& operator=(const NcclCheck&) = delete;

    const std::string& dir() const { return m_dir; }

    /// While the job runs; call it as often as convenient, it reads the logs at most every 200 ms,
    /// each from where the last read stopped: what the logs gained, its whole lines.
    /// With NcclCheckMode::init: the lines to print (each "gpurun: nccl-check: ...") the first time
    /// as many processes as the job has ranks have logged Init COMPLETE; otherwise "". Never throws:
    /// a failure ends the polling with one line saying why.
    std::string poll() noexcept;

    /// When the job has ended: the verdict, unless poll() already gave the same one; one line instead
    /// when no log appeared; and where kept logs are. Reads what the logs gained since the last
    /// poll(), the last line too. Logs in a private directory are named by their file names. Never
    /// throws.
    std::string finish() noexcept;

    /// The log files written for this job, sorted.
    std::vector<std::filesystem::path> logs() const;

    /// Bytes read from the logs so far. Each byte is read once; only a log that shrank or was
    /// replaced (another inode) makes the reading start over, every log from its start.
    std::uint64_t bytes_read() const { return m_bytes_read; }

private:
    /// A log as far as it has been read.
    struct FollowedLog {
        std::uint32_t input = 0; ///< the analyzer's number for it
        std::uint64_t device = 0;
        std::uint64_t inode = 0;
        std::uint64_t offset = 0; ///< bytes read
    };

    /// Reads what each log gained into m_analyzer: whole lines, and with `at_end` the last line
    /// too. Returns a line for each log that could not be read.
    std::string follow_logs(bool at_end);
    /// Forgets what was read: a fresh analyzer, every log from its start.
    void start_over();

    NcclCheckMode m_mode;
    unsigned m_ranks;
    std::string m_dir;
    bool m_private = false;
    /// Logs in a kept directory before the job, with their time and size then.
    std::map<std::string, std::pair<std::filesystem::file_time_type, std::uintmax_t>> m_before;
    bool m_polling = true;
    std::chrono::steady_clock::time_point m_next_poll{};
    std::string m_shown; ///< the verdict poll() gave
    std::unique_ptr<base::nccl::Analyzer> m_analyzer;
    std::map<std::string, FollowedLog> m_followed; ///< by path
    std::uint64_t m_bytes_read = 0;
    bool m_broken = false; ///< a read failed half-way: the analyzer is not to be trusted
};

} // namespace launcher
