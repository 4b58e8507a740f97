#pragma once

#include <functional>
#include <string>
#include <vector>

namespace launcher {

/// Runs the launcher and stays with it until it ends: SIGINT, SIGTERM and SIGHUP are passed on,
/// a second signal or the grace period's end brings SIGKILL. Returns the exit status to give the
/// user: the launcher's exit code, or 128+N when it (or gpurun) died of signal N.
/// argv is executed directly (execvp), never through a shell. `tick`, when given, is called from
/// the wait loop about every 200 ms (more often while signals arrive) for as long as the launcher
/// runs; it must not throw.
int run_job(const std::vector<std::string>& argv, double grace_seconds, const std::function<void()>& tick = {});

} // namespace launcher
