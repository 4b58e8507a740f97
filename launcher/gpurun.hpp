#pragma once

namespace launcher {

/// gpurun's whole run: parse, plan, then print (--dry-run) or launch and wait. Returns the exit
/// status; usage and input errors are reported here as one "gpurun: ..." line with status 2.
int run_gpurun(int argc, char** argv);

/// The rank helper's whole run: read the rank's place from the launcher, plan this node, bind,
/// set the environment, and exec the program. Returns only on failure.
int run_rank_helper(int argc, char** argv);

} // namespace launcher
