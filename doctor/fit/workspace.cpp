#include "doctor/fit/workspace.hpp"

#include "base/byte_size.hpp"
#include "doctor/fit/model.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace doctor::fit {

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

// PyTorch's CublasHandlePool.cpp defaults (see workspaces_for).
constexpr std::uint64_t cublas_workspace_bytes = 4096 * 1024 * 2 + 16 * 1024 * 8; // 8,519,680
constexpr std::uint64_t cublas_workspace_hopper_bytes = 4096 * 1024 * 8; // 32 MiB, from compute capability 9
constexpr std::uint64_t cublaslt_workspace_bytes = 1024 * 1024;
constexpr unsigned cublas_handles = 2; // forward and optimizer; autograd's device thread

// NCCL's buffers per connection, one per protocol (src/init.cc): Simple, LL128, LL.
constexpr std::uint64_t nccl_connection_bytes = (1 << 22) + 120 * 640 * 8 * 8 + 8 * 512 * 8 * 16; // 9,633,792
constexpr unsigned nccl_peers_per_channel = 3; // the ring's, the tree's parent and child
constexpr unsigned nccl_channels_nvlink = 24;
constexpr unsigned nccl_channels_pcie = 4;

// TensorFlow's MinSystemMemory by compute capability (TF ≥ 2.5; 1800 MiB from 9.0 on since).
std::uint64_t tensorflow_reserve(unsigned major)
{
    return major <= 6 ? 500 * MiB : major == 7 ? 1050 * MiB : major == 8 ? 1536 * MiB : 1800 * MiB;
}

} // namespace

std::uint64_t Workspaces::total() const
{
    if (given) {
        return *given;
    }
    return std::max(tensorflow_reserve, cublas + nccl);
}

Workspaces workspaces_for(const TrainingSetup& setup, const GpuTraits& gpu, std::optional<std::uint64_t> given)
{
    Workspaces w;
    if (given) {
        w.given = given;
        return w;
    }
    // Where the GPU is not known, the larger choice: Hopper's workspaces, NVLink's channels.
    const unsigned major = gpu.compute_capability ? gpu.compute_capability->major : 9;
    const bool nvlink = gpu.nvlink.value_or(true);

    for (const unsigned degree : {setup.dp, setup.tp, setup.pp}) {
        w.nccl_communicators += degree > 1 ? 1 : 0;
    }
    w.assumed = !gpu.compute_capability || (w.nccl_communicators > 0 && !gpu.nvlink);
    if (w.nccl_communicators > 0) {
        w.nccl_channels = nvlink ? nccl_channels_nvlink : nccl_channels_pcie;
        w.nccl = std::uint64_t{w.nccl_communicators} * w.nccl_channels * nccl_peers_per_channel * nccl_connection_bytes;
    }
    if (setup.framework == Framework::tensorflow) {
        w.tensorflow_reserve = tensorflow_reserve(major);
        // TensorFlow's NCCL buffers come from the reserve: total() takes the larger.
    } else {
        w.cublas = cublas_handles *
            ((major >= 9 ? cublas_workspace_hopper_bytes : cublas_workspace_bytes) + cublaslt_workspace_bytes);
    }
    return w;
}

std::string describe(const Workspaces& w, const GpuTraits& gpu)
{
    if (w.given) {
        return "--workspace";
    }
    const std::string cc = gpu.compute_capability ? "compute capability " + to_string(*gpu.compute_capability)
                                                  : "compute capability not known, Hopper's assumed";
    std::string out = w.tensorflow_reserve > 0
        ? fmt::format("TensorFlow's reserve {} ({})", base::format_bytes(w.tensorflow_reserve), cc)
        : fmt::format("cuBLAS {} ({})", base::format_bytes(w.cublas), cc);
    if (w.nccl > 0) {
        out += fmt::format(", NCCL {} ({} communicator{} × {} channels, {}){}", base::format_bytes(w.nccl),
            w.nccl_communicators, w.nccl_communicators == 1 ? "" : "s", w.nccl_channels,
            !gpu.nvlink       ? "NVLink assumed"
                : *gpu.nvlink ? "NVLink"
                              : "PCIe",
            w.tensorflow_reserve == 0            ? ""
                : w.nccl <= w.tensorflow_reserve ? ", within the reserve"
                                                 : ", more than the reserve");
    }
    return out;
}

} // namespace doctor::fit
