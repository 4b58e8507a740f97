#pragma once

// The environment of one rank: what gpurun-rank sets before it execs the program, and what
// `gpurun --dry-run --json` shows for every rank. One pure function serves both, so the preview is
// the run.

#include "base/batch_split.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/rank_context.hpp"

#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// One variable of a rank's environment.
struct RankVariable {
    std::string name;
    std::string value;
    /// Set only when the rank's environment does not have it already (OMP_NUM_THREADS, the NIC
    /// variables): what the user chose wins.
    bool unless_set = false;
    friend bool operator==(const RankVariable&, const RankVariable&) = default;
};

/// The variables for the rank `context` names, bound as `binding`, in the order they are set:
/// RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE [MASTER_ADDR MASTER_PORT] (torch.distributed's
/// env://), [GPURUN_LOCAL_BATCH GPURUN_LOSS_WEIGHT], GPURUN_CPUS [GPURUN_NUMA] [GPURUN_NIC GPURUN_HCA and
/// the NIC variables], [OMP_NUM_THREADS], and with a GPU CUDA_DEVICE_ORDER GPURUN_GPU_BUS_ID
/// [GPURUN_GPU_UUID] [CUDA_VISIBLE_DEVICES] GPURUN_GPU.
std::vector<RankVariable> rank_environment(const HelperOptions& options, const RankContext& context,
    const RankBinding& binding, const std::optional<base::BatchSplit>& batch);

} // namespace launcher
