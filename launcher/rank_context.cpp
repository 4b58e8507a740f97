#include "launcher/rank_context.hpp"

#include "base/error.hpp"
#include "launcher/node_list.hpp"

#include <array>
#include <charconv>
#include <cstring>

namespace launcher {

namespace {

struct Family {
    const char* name;
    const char* local_rank;
    const char* local_size;
    const char* rank;
    const char* size;
};

// DESIGN §3.6; reference/launchers.md §6.
// gpurun's own local launcher comes first: it runs inside allocations whose SLURM_* the ranks inherit.
constexpr std::array<Family, 8> families{{
    {"gpurun local", "GPURUN_LAUNCH_LOCAL_RANK", "GPURUN_LAUNCH_LOCAL_SIZE", "GPURUN_LAUNCH_RANK",
        "GPURUN_LAUNCH_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE"},
    {"MPICH/Intel MPI (Hydra)", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_SIZE"},
    {"MVAPICH2", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_SIZE"},
    {"Cray PALS", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "PALS_RANKID", "PMI_SIZE"},
    {"Cray PMI", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE"},
    {"Slurm", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_PROCID", "SLURM_NTASKS"},
    {"torchrun-style", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE"},
}};

std::optional<unsigned> number(const char* text)
{
    if (text == nullptr || *text == '\0') {
        return std::nullopt;
    }
    unsigned value = 0;
    const char* end = text + std::strlen(text);
    auto [ptr, ec] = std::from_chars(text, end, value);
    if (ec != std::errc() || ptr != end) {
        return std::nullopt;
    }
    return value;
}

// SLURM_NTASKS_PER_NODE exists only when the user gave --ntasks-per-node. Otherwise the per-node
// task counts come compressed ("2(x2),1": nodes 0 and 1 run two tasks, node 2 one), and this node's
// is the entry at SLURM_NODEID. The step's list wins over the job's: a step may use fewer tasks.
std::optional<unsigned> slurm_local_size(const std::function<const char*(const char*)>& getenv)
{
    // The step's per-node list is exact on every node; SLURM_NTASKS_PER_NODE (set only when the
    // user gave --ntasks-per-node) is a maximum, wrong on a last node that runs fewer tasks.
    const char* text = getenv("SLURM_STEP_TASKS_PER_NODE");
    if (text == nullptr) {
        text = getenv("SLURM_TASKS_PER_NODE");
    }
    auto node = number(getenv("SLURM_NODEID"));
    if (text != nullptr && node) {
        try {
            auto counts = expand_count_list(text);
            if (*node < counts.size()) {
                return counts[*node];
            }
        } catch (const base::Error&) {
        }
        return std::nullopt;
    }
    return number(getenv("SLURM_NTASKS_PER_NODE"));
}

} // namespace

std::optional<RankContext> read_rank_context(const std::function<const char*(const char*)>& getenv)
{
    for (const auto& f : families) {
        auto local_rank = number(getenv(f.local_rank));
        if (!local_rank) {
            continue;
        }
        auto local_size = std::string_view(f.name) == "Slurm" ? slurm_local_size(getenv) : number(getenv(f.local_size));
        auto rank = number(getenv(f.rank));
        auto size = number(getenv(f.size));
        if (!local_size || !rank || !size || *local_rank >= *local_size || *rank >= *size) {
            continue;
        }
        return RankContext{*rank, *size, *local_rank, *local_size, f.name};
    }
    return std::nullopt;
}

} // namespace launcher
