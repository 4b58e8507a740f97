#pragma once

// gpurun --profile nsys: the chosen ranks' helpers exec `nsys profile ... PROGRAM ARGS` instead of
// the program, each writing DIR/rank<RANK>.nsys-rep and DIR/rank<RANK>.sqlite; gpurun checks that
// nsys is there, makes the directory, and says at the end where the reports are and how to read
// them with gpudoctor profile.

#include "launcher/launch_options.hpp"

#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace launcher {

/// Ranks as "0,3", "0-7", "0-3,8" or "all" (an empty list). Sorted and unique. Throws
/// base::Error naming `option` for anything else, for a range that goes down, and for ranks
/// beyond 2^20.
std::vector<unsigned> parse_rank_list(std::string_view text, const std::string& option);

/// The inverse of parse_rank_list: runs folded into ranges ("0-3,8"); "all" for an empty list.
std::string format_rank_list(const std::vector<unsigned>& ranks);

/// Whether `rank` runs under the profiler.
bool profiles_rank(const ProfileOptions& profile, unsigned rank);

/// The report of `rank` without its extension: DIR/rank<RANK> (nsys adds .nsys-rep and .sqlite).
std::string profile_report_base(const std::string& dir, unsigned rank);

/// What the helper of a chosen rank execs: `nsys profile -o DIR/rank<RANK> --trace=cuda,nvtx,osrt,mpi
/// --mpi-impl=MPI --export=sqlite --force-overwrite=true PROGRAM ARGS...`, MPI being openmpi or mpich
/// (the MPI whose calls nsys traces). argv only, no shell.
std::vector<std::string> nsys_command(const std::string& dir, unsigned rank, const std::vector<std::string>& program,
    const std::string& mpi_impl = "openmpi");

/// The default report directory for a job started at `now` (local time), relative to the working
/// directory: "gpurun-profile-20261130-141502".
std::string default_profile_dir(std::time_t now);

/// Before the launch: checks the chosen ranks against the job's size and that nsys is in
/// `path_env` (a note instead with `dry_run`), and makes `profile.dir` absolute (a new default
/// directory when empty). Notes for the user go to `notes`. Throws base::Error.
void prepare_profile(ProfileOptions& profile, unsigned world_size, bool dry_run, bool remote_hosts,
    const char* path_env, std::vector<std::string>& notes);

/// Creates the report directory (and its parents, mode 0700), right before the launch, as
/// base::own_directory does: another user's link on the way, a directory every user can write to
/// without the sticky bit, or one that is not the caller's is a base::Error.
void create_profile_dir(const ProfileOptions& profile);

/// After the job: the lines gpurun prints (each "gpurun: profile: ..."): which reports are in the
/// directory, which chosen ranks left none, and the gpudoctor profile command that reads them.
std::string profile_epilogue(const ProfileOptions& profile, unsigned world_size);

} // namespace launcher
