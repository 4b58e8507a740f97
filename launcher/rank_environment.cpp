#include "launcher/rank_environment.hpp"

#include "launcher/global_batch.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace launcher {

std::vector<RankVariable> rank_environment(const HelperOptions& o, const RankContext& context, const RankBinding& mine,
    const std::optional<base::BatchSplit>& batch)
{
    std::vector<RankVariable> env;
    auto set = [&](const std::string& name, std::string value, bool unless_set = false) {
        env.push_back({name, std::move(value), unless_set});
    };
    set("RANK", std::to_string(context.rank));
    set("WORLD_SIZE", std::to_string(context.world_size));
    set("LOCAL_RANK", std::to_string(context.local_rank));
    set("LOCAL_WORLD_SIZE", std::to_string(context.local_size));
    // The node's index, as torchrun (GROUP_RANK) and Lightning (NODE_RANK) read it: the host that
    // holds this rank in the plan's order.
    if (!o.host_ranks.empty()) {
        unsigned first = 0;
        for (std::size_t host = 0; host < o.host_ranks.size(); ++host) {
            if (context.rank < first + o.host_ranks[host]) {
                set("GROUP_RANK", std::to_string(host));
                set("NODE_RANK", std::to_string(host));
                set("GROUP_WORLD_SIZE", std::to_string(o.host_ranks.size()));
                break;
            }
            first += o.host_ranks[host];
        }
    }
    if (!o.master_addr.empty()) {
        set("MASTER_ADDR", o.master_addr);
    }
    if (o.master_port != 0) {
        set("MASTER_PORT", std::to_string(o.master_port));
    }
    if (batch) {
        set("GPURUN_LOCAL_BATCH", std::to_string(batch->per_gpu.at(context.rank)));
        set("GPURUN_LOSS_WEIGHT", format_loss_weight(batch->loss_weight.at(context.rank)));
    }
    set("GPURUN_CPUS", mine.cpus.to_list());
    if (!mine.numa.empty()) {
        set("GPURUN_NUMA", fmt::format("{}", fmt::join(mine.numa, ",")));
    }
    if (!mine.hca.empty()) {
        set("GPURUN_NIC", mine.hca);
        set("GPURUN_HCA", mine.hca); // the older name, kept for scripts that read it
        for (const auto& [name, value] : nic_variables(o.nic_binding, mine.hca)) {
            set(name, value, true);
        }
    }
    if (o.plan.bind != BindMode::none) {
        set("OMP_NUM_THREADS", std::to_string(std::max(1U, mine.cores)), true);
    }
    if (mine.gpu) {
        set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        set("GPURUN_GPU_BUS_ID", mine.gpu->bus_id.to_string());
        if (!mine.gpu->uuid.empty()) {
            set("GPURUN_GPU_UUID", mine.gpu->uuid);
        }
        if (o.plan.visibility == GpuVisibility::isolate) {
            set("CUDA_VISIBLE_DEVICES", mine.gpu->selector);
            set("GPURUN_GPU", "0");
        } else {
            set("GPURUN_GPU", std::to_string(mine.cuda_index));
        }
    }
    return env;
}

} // namespace launcher
