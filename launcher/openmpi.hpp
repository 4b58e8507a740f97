#pragma once

#include "launcher/binding_plan.hpp"
#include "launcher/launch_options.hpp"

#include <string>
#include <vector>

namespace launcher {

/// The mpirun this job will use.
struct MpiLauncher {
    std::string path;
    std::string flavour; ///< "Open MPI", "MPICH", "Intel MPI", "unknown"
};

/// Finds mpirun in PATH and checks it is Open MPI (from its real file name when that says
/// orterun/prterun, else by `mpirun --version`). Throws probes::Error, with what to install.
MpiLauncher find_openmpi(const char* path_env);

/// Whether mpirun must be told --allow-run-as-root: only when the user said so (flag, or both
/// OMPI_ALLOW_RUN_AS_ROOT and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM set to 1).
bool root_allowed(bool flag, const char* allow, const char* confirm);

/// `mpirun -np N --bind-to none --map-by slot -H host:n,... [-x ...] HELPER HELPER_ARGS...`: a -x for each of
/// `forwarded_env` (gpurun's own: NAME or NAME=VALUE), then for each of the user's exports.
/// Open MPI binding is switched off: the helper binds each rank itself.
std::vector<std::string> openmpi_command(const std::string& mpirun, const JobPlan& job, const LaunchOptions& options,
    bool allow_root, const std::vector<std::string>& forwarded_env, const std::string& helper,
    const std::vector<std::string>& helper_args);

} // namespace launcher
