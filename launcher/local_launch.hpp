#pragma once

// gpurun's own launcher, for a job on this node alone without MPI (--launcher local): the rank
// helper, started as `gpurun-rank --launch-local N --grace S -- HELPER ARGS...`, forks the N ranks'
// helpers and stays as their parent.

#include <string>
#include <vector>

namespace launcher {

/// The first argument that makes gpurun-rank the local launcher.
inline constexpr const char* local_launch_flag = "--launch-local";

/// Runs `N` copies of the helper command after "--", copy i with GPURUN_LAUNCH_RANK and
/// GPURUN_LAUNCH_LOCAL_RANK = i and GPURUN_LAUNCH_SIZE and GPURUN_LAUNCH_LOCAL_SIZE = N (which
/// read_rank_context reads first). Each dies with the launcher (SIGTERM, which its helper passes
/// on). SIGINT, SIGTERM and SIGHUP are passed on to every rank (not a terminal's Ctrl-C, which
/// reached them already), and SIGKILL follows after the grace or at a second signal. The first rank
/// that fails (status not 0) stops the others the same way: fail fast. Returns the status of the
/// rank that failed first, 128+N after signal N, else 0. `args` are those after the flag; throws
/// base::Error for arguments gpurun does not write.
int run_local_launch(const std::vector<std::string>& args);

} // namespace launcher
