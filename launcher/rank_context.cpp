#include "launcher/rank_context.hpp"

#include "base/error.hpp"
#include "base/launchers/backends.hpp"
#include "base/launchers/node_list.hpp"

#include <charconv>
#include <cstring>

namespace launcher {

namespace {

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
            auto counts = base::launchers::expand_count_list(text);
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
    const char* slurm = base::launchers::row(base::launchers::LauncherKind::srun).variables.local_rank;
    for (const auto& f : base::launchers::rank_variables()) {
        auto local_rank = number(getenv(f.local_rank));
        if (!local_rank) {
            continue;
        }
        auto local_size = f.local_rank == slurm ? slurm_local_size(getenv) : number(getenv(f.local_size));
        auto rank = number(getenv(f.rank));
        auto size = number(getenv(f.size));
        if (!local_size || !rank || !size || *local_rank >= *local_size || *rank >= *size) {
            continue;
        }
        return RankContext{*rank, *size, *local_rank, *local_size, f.launcher};
    }
    return std::nullopt;
}

} // namespace launcher
