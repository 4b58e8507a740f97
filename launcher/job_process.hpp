#pragma once

#include "launcher/rank_output.hpp"

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace launcher {

/// How a job ended, as gpurun tells it.
struct JobEnd {
    int status = 0; ///< the exit status to give the user
    int launcher_status = 0; ///< the launcher's own: its exit code, or 128+N for signal N
    int signal = 0; ///< the signal gpurun received and passed on (SIGINT...), 0 for none
    std::vector<RankFailure> failures; ///< the helpers' failure reports, in the order they came
    std::size_t first = 0; ///< which of them failed first (first_failure), when there are any
    double seconds = 0; ///< from the launcher's start to its end
};

/// Runs the launcher and stays with it until it ends: SIGINT, SIGTERM and SIGHUP are passed on
/// (SIGINT and SIGHUP as `interrupt_as` where set), a second signal or the grace period's end
/// brings SIGKILL. The launcher's standard error (every
/// rank's, on every host) passes through gpurun, which takes the rank helpers' failure reports out
/// of it: the first is printed as "failed first" and stops the job (SIGTERM to the launcher, SIGKILL
/// after the grace period, as for a signal), later ones as "also failed". The status to give the
/// user: 128+N when gpurun got signal N, else the status of the rank that failed first, else the
/// launcher's.
/// argv is executed directly (execvp), never through a shell. `tick`, when given, is called from
/// the wait loop about every 200 ms (more often while signals or output arrive) for as long as the
/// launcher runs; it must not throw.
/// How gpurun deals with a launcher (from its launchers::Backend row and the options).
struct JobControl {
    double grace_seconds = 10;
    bool launcher_stops_on_failure = true;
    /// The signal passed on for SIGINT and SIGHUP, 0 for the signal itself: srun takes one SIGINT
    /// as a request for status (the step runs on) but passes SIGTERM to every task.
    int interrupt_as = 0;
};

JobEnd run_job(const std::vector<std::string>& argv, const JobControl& control, const std::function<void()>& tick = {});

/// The JSON of --json-summary: how the job ended, and which rank failed first and how.
nlohmann::json summary_json(const JobEnd& end, const std::vector<std::string>& launcher_command, unsigned ranks);

} // namespace launcher
