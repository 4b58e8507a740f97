#pragma once

// gpudoctor fit, analytic mode: how many samples fit on a GPU, from the model's size and shape,
// the precision, the optimizer and ZeRO, and the learning rate that goes with the global batch.
// Pure: every number comes from the arguments.
//
//   per GPU:  memory = model states + CUDA context + workspaces + margin + batch × activations
//   max batch = floor((memory − context − workspaces − margin − states) / activations per sample)

#include "probes/finding.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::fit {

/// How the training step keeps its numbers.
/// - fp32: everything in 32-bit floats.
/// - fp16, bf16: 16-bit weights, gradients and activations, with the fp32 master weights inside
///   the optimizer (ZeRO's mixed-precision accounting; DeepSpeed fp16/bf16, Megatron, apex O2).
/// - amp: 32-bit weights and gradients with 16-bit compute (torch.autocast, the Hugging Face
///   Trainer's --fp16/--bf16): autocast keeps a 16-bit copy of the weights for the backward pass.
enum class Precision { fp32, fp16, bf16, amp };
/// sgd: plain SGD (no state); momentum: SGD with momentum (one state); adam, adamw: two states.
enum class Optimizer { sgd, momentum, adam, adamw };
/// Activation recomputation (checkpointing): selective recomputes the attention scores only
/// (Korthikanti et al.); full keeps each layer's input only.
enum class Recompute { none, selective, full };

const char* to_string(Precision precision);
const char* to_string(Optimizer optimizer);
const char* to_string(Recompute recompute);
/// The value for a name ("bf16", "adamw", "full"); nullopt for an unknown name.
std::optional<Precision> precision_named(std::string_view name);
std::optional<Optimizer> optimizer_named(std::string_view name);
std::optional<Recompute> recompute_named(std::string_view name);

/// Bytes each parameter costs, before ZeRO divides anything.
///
/// | precision  | weights | gradients | optimizer: sgd / momentum / adam, adamw | total        |
/// |------------|---------|-----------|-----------------------------------------|--------------|
/// | fp32       | 4       | 4         | 0 / 4 / 8                               | 8 / 12 / 16  |
/// | fp16, bf16 | 2       | 2         | 4 / 8 / 12 (fp32 master + states)       | 8 / 12 / 16  |
/// | amp        | 6       | 4         | 0 / 4 / 8                               | 10 / 14 / 18 |
///
/// Mixed-precision Adam is 16 bytes (2 + 2 + 12, the ZeRO paper's K = 12) where the weights and
/// gradients are 16-bit; it is 18 where the framework keeps fp32 gradients and weights beside a
/// 16-bit copy (amp: 6 + 4 + 8, the Hugging Face accounting). Adam and AdamW keep the same state,
/// so they cost the same; the 16-or-18 difference comes from the precision recipe.
struct StateBytes {
    unsigned weights = 0;
    unsigned gradients = 0;
    unsigned optimizer = 0;
    unsigned total() const { return weights + gradients + optimizer; }
};
StateBytes state_bytes(Precision precision, Optimizer optimizer);

/// What the transformer activation formula needs besides the layer count.
struct TransformerShape {
    unsigned hidden = 0; ///< h
    unsigned heads = 0; ///< a
    unsigned seq = 0; ///< s, tokens per sample
    unsigned vocab = 0; ///< V; 0 when unknown (then the output layer is not counted)
};

/// A model as the fit sees it: a preset, a user's entry, or the command line.
struct ModelSpec {
    std::string name = "custom";
    std::string description;
    std::uint64_t params = 0;
    unsigned layers = 0; ///< 0 when unknown; transformers always have it
    std::optional<TransformerShape> transformer;
    /// Measured activation bytes per sample for CNNs: the tensors saved for backward, a lower
    /// bound of the real peak (a transient factor is added).
    std::optional<std::uint64_t> measured_fp32;
    std::optional<std::uint64_t> measured_16bit; ///< when absent, half of measured_fp32
    unsigned image_size = 0; ///< for the description of CNN presets
    /// Peak activation bytes per sample as the user measured them: used as they are.
    std::optional<std::uint64_t> activation_bytes;
};

struct TrainingSetup {
    Precision precision = Precision::fp32;
    Optimizer optimizer = Optimizer::adam;
    unsigned zero = 0; ///< ZeRO stage 0..3
    unsigned dp = 1; ///< data-parallel GPUs the ZeRO stages shard over
    Recompute recompute = Recompute::none;
};

/// The fixed costs of a training process on one GPU.
struct Overheads {
    /// CUDA context and the framework's kernels: 0.3–0.5 GiB with lazy module loading (CUDA ≥
    /// 11.7), over 1 GiB on older stacks.
    std::uint64_t cuda_context = std::uint64_t{512} << 20;
    /// cuBLAS/cuBLASLt workspaces (up to 32 MiB per stream on Hopper), cuDNN workspaces, NCCL
    /// buffers (a few MiB per channel and peer).
    std::uint64_t workspace = std::uint64_t{256} << 20;
    /// The share of the GPU's memory kept free for allocator fragmentation and rounding.
    double margin_fraction = 0.10;
    /// Measured CNN activations are the tensors saved for backward; the peak adds transient
    /// gradient buffers and workspaces: this share more.
    double cnn_transient = 0.20;
};

/// Activation bytes for one sample, with the parts they come from.
struct ActivationBytes {
    std::uint64_t per_sample = 0;
    // Transformer formula (Korthikanti et al. 2022, Table 2).
    std::uint64_t per_layer = 0; ///< what each layer keeps for backward
    std::uint64_t layers_total = 0; ///< per_layer × layers
    std::uint64_t rebuilt_layer = 0; ///< with recompute: the part one layer rebuilds during its backward
    std::uint64_t output_layer = 0; ///< logits and loss, 4·s·h + 4·s·V (16-bit)
    // CNN measurement.
    std::uint64_t measured = 0;
    std::uint64_t transient = 0;
    std::string source; ///< "transformer formula", "measured (preset)", "given"
    std::string formula; ///< the per-layer formula in words, for the report
};

/// Model-state bytes on one GPU after ZeRO.
struct StateMemory {
    StateBytes per_param;
    std::uint64_t weights = 0;
    std::uint64_t gradients = 0;
    std::uint64_t optimizer = 0;
    /// ZeRO-3 gathers one layer's weights and gradients at a time: 2·gradient bytes × params /
    /// layers (DeepSpeed: 4 bytes × the largest layer's parameters in 16-bit).
    std::uint64_t zero3_gather = 0;
    std::uint64_t total() const { return weights + gradients + optimizer + zero3_gather; }
};

/// Everything that does not depend on the GPU.
struct MemoryPlan {
    StateMemory states;
    ActivationBytes activations;
    std::vector<probes::Finding> findings; ///< how the estimate was made, setups that do nothing
};

/// Throws probes::Error when the model gives no way to count activations or has no parameters,
/// or when the setup is out of range (ZeRO stage > 3, dp 0).
MemoryPlan plan_memory(const ModelSpec& model, const TrainingSetup& setup, const Overheads& overheads = {});

/// Transformer activations of one layer for one sample, in bytes:
///   16-bit, no recompute  s·h·(34 + 5·a·s/h) = 34·s·h + 5·a·s²
///   fp32, no recompute    s·h·(66 + 9·a·s/h)  (the 2-byte tensors double; dropout masks stay 1 byte)
///   selective recompute   34·s·h (fp32 66·s·h): the attention scores are recomputed
///   full recompute        2·s·h (fp32 4·s·h): only the layer's input is kept
std::uint64_t transformer_layer_bytes(const TransformerShape& shape, Precision precision, Recompute recompute);

/// One GPU's share of the sum.
struct GpuFit {
    std::uint64_t memory = 0; ///< what the GPU offers (total from the table or --gpu-mem, free from NVML)
    std::uint64_t cuda_context = 0;
    std::uint64_t workspace = 0;
    std::uint64_t margin = 0;
    std::uint64_t states = 0;
    /// memory − context − workspace − margin − states; negative when the states alone do not fit.
    std::int64_t available = 0;
    unsigned max_batch = 0; ///< floor(available / activations per sample); 0 when nothing fits
};
GpuFit fit_gpu(const MemoryPlan& plan, std::uint64_t memory, const Overheads& overheads = {});

/// One change to the setup and what it gives on the GPU the fit failed on.
struct Suggestion {
    std::string change; ///< as options, e.g. "--recompute full" or "--zero 3 --dp 8 --recompute full"
    TrainingSetup setup;
    unsigned max_batch = 0;
};

/// When nothing fits (even batch 1) on `memory`: each single change that could help (full or
/// selective recompute for transformers, each higher ZeRO stage when dp > 1, 16-bit precision
/// from fp32 or amp), with its max batch; when none alone fits, all of them together; and the
/// fewest data-parallel GPUs (up to 4096) over which ZeRO-3 (with full recompute and 16-bit
/// precision where those apply) fits batch 1.
std::vector<Suggestion> suggest_changes(
    const ModelSpec& model, const TrainingSetup& setup, std::uint64_t memory, const Overheads& overheads = {});

/// Learning-rate scaling for a global batch B against the batch the base learning rate was tuned
/// for: k = B / B_base; linear (lr·k, Goyal et al. 2017, with gradual warmup over 5 epochs) for
/// sgd and momentum, square root (lr·√k, Malladi et al. 2022) for adam and adamw.
struct LrAdvice {
    bool linear = true;
    unsigned global_batch = 0;
    std::optional<unsigned> base_batch;
    std::optional<double> base_lr;
    std::optional<double> k; ///< with base_batch
    std::optional<double> lr; ///< with base_lr and base_batch
    unsigned warmup_epochs = 5;
    std::vector<std::string> notes;
};
LrAdvice advise_lr(Optimizer optimizer, unsigned global_batch, std::optional<double> base_lr = std::nullopt,
    std::optional<unsigned> base_batch = std::nullopt);

/// Parses a parameter count: "7B", "350M", "125k", "1.5e9", "6738415616" (K, M, B or G, T are
/// powers of 1000, case-insensitive). Throws probes::Error naming `what` for anything else, for
/// counts below 1 and above 10^15.
std::uint64_t parse_param_count(std::string_view text, const std::string& what);

/// "335M", "6.74B", "25.6M": three significant digits and a suffix.
std::string format_param_count(std::uint64_t params);

} // namespace doctor::fit
