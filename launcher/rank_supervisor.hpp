#pragma once

// The rank helper does not become the rank: it starts the program as its child, in a process group
// of its own, and stays as its small parent until everything the program started has ended. So a
// rank leaves nothing behind: not when it ends, not when a signal stops the job, not when the
// launcher that started the helper dies (even by SIGKILL).

#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace launcher {

/// The variable every process of a rank inherits, naming the helper that started it.
inline constexpr const char* rank_marker_variable = "GPURUN_RANK_MARKER";

struct RankSupervision {
    unsigned rank = 0;
    unsigned local_rank = 0;
    std::string host;
    bool tag_output = false; ///< "[rank] " before each line of standard output and error
    std::string log_dir; ///< "": none; else rank<R>.out and rank<R>.err in it, on this host
    double grace_seconds = 10.0; ///< between passing on a signal and SIGKILL
    std::function<void(pid_t)> started; ///< called with the program's pid once it runs (may be empty)
};

/// Runs `program` (argv, looked up in PATH) as the rank and returns the helper's exit status: the
/// program's own, or 128+N when it ended by signal N. The helper:
/// - becomes the subreaper of what the program starts, so daemons it double-forks stay its
///   descendants;
/// - passes SIGINT, SIGTERM and SIGHUP on to the program's group, and SIGKILLs the group and
///   every descendant `grace_seconds` later or at a second signal;
/// - ends the program when its own parent (the launcher's daemon) dies: the helper's parent-death
///   signal is SIGTERM;
/// - when the program has ended, stops what it left (SIGTERM, then SIGKILL within 2 s) before it
///   returns;
/// - marks the program's environment (rank_marker_variable); a watcher it leaves in a session of
///   its own SIGKILLs every process still so marked once the helper has ended, however it ended
///   (a launcher's SIGKILL too);
/// - copies standard error through (tagged with `tag_output`, into the log with `log_dir`) and
///   keeps its last 20 lines; when the program fails (status not 0, or a signal it did not get
///   from the helper) it prints failure_report to standard error.
/// Throws base::Error when the program cannot be started (pipe, fork) or a log file not opened.
int supervise_rank(const std::vector<std::string>& program, const RankSupervision& options);

} // namespace launcher
