#pragma once

// gpurun --monitor's per-job private directory on each node: every rank's helper records its
// pid and GPU there before it execs the program, and the node's monitor reads the records.

#include "launcher/gpu_ownership.hpp"

#include <string>
#include <vector>

namespace launcher {

/// The variable that carries the job id from gpurun to each rank's helper and to the node monitor.
/// It travels in the environment, which only the user can read, never in arguments, which `ps`
/// shows every user: knowing the id, another user could make the job's directory on a node first
/// and so stop the job there.
inline constexpr const char* job_id_variable = "GPURUN_MONITOR_JOB";

/// The job's directory named by job_id_variable and TMPDIR in this process's environment.
/// Throws base::Error when the variable is missing or is not a job id.
std::string job_dir_from_environment();

/// A new job id: 16 random hex digits. Throws base::Error when the kernel gives no randomness.
std::string new_job_id();

/// Whether `id` is what new_job_id makes (so it can go into a path).
bool valid_job_id(const std::string& id);

/// The job's directory on a node: `tmpdir` (the helper's TMPDIR; "" means /tmp)/gpurun-<id>.
std::string job_dir_path(const std::string& job_id, const std::string& tmpdir);

/// Makes `dir` with mode 0700. One that exists already (another rank of the node made it) is
/// accepted only when lstat shows a directory, not a symlink, owned by this user, mode 0700:
/// anything else may be another user's trap, and throws base::Error saying what was found.
void make_private_dir(const std::string& dir);

/// Writes `record` as <dir>/rank-<rank>: a temporary file (mkstemp, mode 0600) renamed into
/// place, so a reader sees the whole record or none. Throws base::Error.
void write_rank_record(const std::string& dir, const RankRecord& record);

/// The records in `dir`, by rank; files that are not whole records are skipped.
std::vector<RankRecord> read_rank_records(const std::string& dir);

} // namespace launcher
