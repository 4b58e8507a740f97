#pragma once

#include <functional>
#include <optional>
#include <string>

namespace launcher {

/// Who this process is in the job, read from whichever launcher started it.
struct RankContext {
    unsigned rank = 0;
    unsigned world_size = 1;
    unsigned local_rank = 0;
    unsigned local_size = 1;
    std::string launcher; ///< the variable family found: "Open MPI", "MPICH/Intel MPI (Hydra)", "Slurm", ...
};

/// Reads the launcher's variables through `getenv`. Launchers are tried in an order that keeps
/// stale outer variables from winning: Open MPI, Hydra, MVAPICH2, Cray PALS, Cray PMI, then
/// Slurm (an `mpirun` inside `salloc` inherits SLURM_*), then torchrun-style LOCAL_RANK.
/// nullopt when no family is complete.
std::optional<RankContext> read_rank_context(const std::function<const char*(const char*)>& getenv);

} // namespace launcher
