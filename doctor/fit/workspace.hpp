#pragma once

// The memory a training process takes on each GPU besides its tensors and the CUDA context:
// cuBLAS's workspaces, NCCL's buffers, and what TensorFlow's allocator leaves to the libraries.
// They depend on the GPU's architecture (compute capability), on whether it talks to its peers
// over NVLink, and on the setup (framework, parallel degrees). Pure.

#include "doctor/engine/gpu_table.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace doctor::fit {

struct TrainingSetup;

// A GPU's compute capability and NVLink, as the GPU table and NVML give them.
using engine::ComputeCapability;
using engine::GpuTraits;
using engine::parse_compute_capability;
using engine::to_string;

/// The workspaces of one training process on one GPU.
struct Workspaces {
    /// PyTorch's cuBLAS and cuBLASLt workspaces: from its caching allocator, so inside
    /// torch.cuda.max_memory_allocated(). 0 where the workspaces were given: their parts are not
    /// known.
    std::uint64_t cublas = 0;
    /// NCCL's communication buffers, allocated by NCCL itself (outside the framework's allocator).
    std::uint64_t nccl = 0;
    unsigned nccl_communicators = 0; ///< the process groups of more than one GPU
    unsigned nccl_channels = 0; ///< per communicator
    /// TensorFlow: the memory its allocator leaves to cuDNN, cuBLAS, NCCL and the like.
    std::uint64_t tensorflow_reserve = 0;
    /// --workspace SIZE, used as given instead of the count.
    std::optional<std::uint64_t> given;
    /// The compute capability, or with NCCL the interconnect, was not known and the larger choice
    /// was taken.
    bool assumed = false;

    /// What the workspaces take on the GPU. TensorFlow's NCCL buffers come out of its reserve.
    std::uint64_t total() const;
    /// The part inside the framework's allocator (what max_memory_allocated() counts).
    std::uint64_t allocated() const { return cublas; }
};

/// The workspaces of `setup` on a GPU like `gpu`, or `given` where set.
///
/// cuBLAS (PyTorch): a workspace per handle and stream, from the caching allocator
/// (aten/src/ATen/cuda/CublasHandlePool.cpp: ":4096:2:16:8", 4096 KiB × 2 + 16 KiB × 8 =
/// 8,519,680 B by default, and 4096 KiB × 8 = 32 MiB "for Hopper", PyTorch PRs #89027/#91564;
/// Blackwell too since #175344), and a cuBLASLt workspace of 1 MiB (CUBLASLT_WORKSPACE_SIZE,
/// #73439). A training step has two handles on its GPU: the thread that runs forward and the
/// optimizer, and autograd's device thread that runs backward.
///
/// NCCL: each channel of a communicator keeps, per peer connection, a buffer for each of its three
/// protocols (NVIDIA/nccl src/init.cc: Simple 1 << 22 = 4,194,304 B; LL128 120 · 640 · 8 · 8 =
/// 4,915,200 B; LL 8 · 512 · 8 · 16 = 524,288 B), and connects three peers per channel: the ring's
/// and the tree's two. Channels: 24 over NVLink (NCCL's "Channel 23/24" on 8 A100 SXM,
/// NVIDIA/nccl-tests#100), 4 over PCIe ("4 coll channels", NVIDIA/nccl#1706). 24 × 3 × 9,633,792 B
/// = 694 MB agrees with the 688 MB measured per communicator of 4 A100 over NVLink
/// (NVIDIA/nccl#964). One communicator per parallel group of more than one GPU (data, tensor,
/// pipeline); NCCL's NVLink SHARP buffers (NVLS, on NVSwitch systems) are not counted.
///
/// TensorFlow: its allocator takes the free memory less a reserve for the libraries
/// (tensorflow/core/common_runtime/gpu/gpu_device.cc, MinSystemMemory, TF ≥ 2.5, PR #44810):
/// 500 MiB up to compute capability 6.x, 1050 MiB for 7.x, 1536 MiB for 8.x, and 1800 MiB from
/// 9.0 on in today's source (TF ≤ 2.4 kept max(300 MiB, 5–6 % of the free memory); a GPU with
/// less than 2 GiB free, 225 MiB, is not one to train on; TF_DEVICE_MIN_SYS_MEMORY_IN_MB
/// overrides it). cuBLAS's and cuDNN's workspaces come from its allocator during the step, among
/// the transient buffers the states' upper share covers under TensorFlow.
///
/// cuDNN's convolution workspaces are transient: in a CNN's measured activations' transient share.
Workspaces workspaces_for(const TrainingSetup& setup, const GpuTraits& gpu, std::optional<std::uint64_t> given = {});

/// The parts in words, e.g. "cuBLAS 66 MiB (compute capability 9.0), NCCL 661.5 MiB (1 communicator
/// × 24 channels, NVLink)".
std::string describe(const Workspaces& w, const GpuTraits& gpu);

} // namespace doctor::fit
