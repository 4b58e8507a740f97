#pragma once

// gpudoctor fit, analytic mode: how many samples fit on a GPU, from the model's size and shape,
// the precision, the optimizer and ZeRO, and the learning rate that goes with the global batch.
// Pure: every number comes from the arguments.
//
//   per GPU:  memory = model states + CUDA context + workspaces + margin + batch × activations
//   max batch = floor((memory − context − workspaces − margin − states) / activations per sample)

#include "base/finding.hpp"
#include "doctor/fit/workspace.hpp"

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
///   Trainer's --fp16/--bf16): autocast keeps a 16-bit copy of the weights for the backward pass,
///   and runs normalisation, softmax and the loss in fp32 (their saved tensors are fp32).
/// - fp16-pure, bf16-pure: the model itself in 16-bit, no fp32 master weights; the optimizer's
///   states take the weights' type (Lightning's bf16-true, from_pretrained(torch_dtype=bfloat16)
///   with torch.optim.AdamW).
enum class Precision { fp32, fp16, bf16, amp, fp16_pure, bf16_pure };
/// How attention keeps what its backward needs.
/// - eager: the s×s scores, their softmax and dropout are stored (Hugging Face "eager",
///   TensorFlow, Megatron without fused kernels): the 5·a·s² term.
/// - sdpa, flash: torch's scaled_dot_product_attention (the default of PyTorch ≥ 2.0 models and
///   of Hugging Face Transformers since 4.36) and FlashAttention recompute the scores in the
///   backward pass and keep only the softmax statistics, 4·a·s bytes (Dao et al. 2022, §3.1).
enum class Attention { eager, sdpa, flash };
/// What runs the training step, where it keeps more than the tensors the formula counts.
/// - pytorch: autograd keeps what each operation's backward needs (the default).
/// - tensorflow: TensorFlow 1/2 graphs as BERT's reference code builds them: dropout keeps its
///   float mask (tf.nn.dropout: x / keep_prob · floor(keep_prob + U)), the tanh GELU its input,
///   tanh and cdf, layer norm its input; the scores are stored (no fused attention); and
///   clip_by_global_norm holds a clipped copy of every gradient.
enum class Framework { pytorch, tensorflow };
/// ZeRO-Offload (DeepSpeed): the optimizer's states and fp32 master weights on the CPU
/// (optimizer, ZeRO 1–3), and with ZeRO-3 the weights too (all).
enum class Offload { none, optimizer, all };
/// sgd: plain SGD (no state); momentum: SGD with momentum (one state); adam, adamw, lamb: two
/// states (m and v; LAMB adds only a per-layer trust ratio); adam8bit: bitsandbytes' 8-bit Adam
/// (m and v in 1 byte each, block-wise scales; Dettmers et al. 2022); adafactor: factored
/// second moments, one row and one column vector per matrix and no momentum (Shazeer and Stern
/// 2018, the Hugging Face default), negligible next to the parameters.
enum class Optimizer { sgd, momentum, adam, adamw, adam8bit, adafactor, lamb };
/// Activation recomputation (checkpointing): selective recomputes the attention scores only
/// (Korthikanti et al.); full keeps each layer's input only.
enum class Recompute { none, selective, full };
/// How the loss over the vocabulary runs, which sets what the output layer holds at its peak, the
/// start of the backward pass (s tokens, V words; TensorFlow keeps its own count):
/// - fp32: the logits cast to fp32 and PyTorch's cross_entropy, as Hugging Face Transformers'
///   causal-LM loss and torch.nn.CrossEntropyLoss over fp32 logits run it: the log-probabilities
///   it saved, the NLL's gradient and log_softmax's gradient are alive at once, fp32 each: 12·s·V.
/// - chunked: the loss over chunks of the sequence (LitGPT's chunked_cross_entropy, torchtune's
///   CEWithChunkedOutputLoss and LinearCrossEntropyLoss): the logits in the model's type and one
///   chunk's gradients at a time, 6·s·V in 16-bit as a bound (LitGPT about 4 to 6, torchtune
///   about 5), 8·s·V in fp32.
/// - fused: Megatron's vocab-parallel cross-entropy, whose gradient overwrites its fp32 softmax:
///   (4 + e)·s·V / tp in 16-bit (the gradient cast back while it lives), 4·s·V / tp in fp32.
enum class Loss { fp32, chunked, fused };

const char* to_string(Precision precision);
const char* to_string(Optimizer optimizer);
const char* to_string(Recompute recompute);
const char* to_string(Attention attention);
const char* to_string(Framework framework);
const char* to_string(Offload offload);
const char* to_string(Loss loss);
/// The value for a name ("bf16", "adamw", "full"); nullopt for an unknown name.
std::optional<Precision> precision_named(std::string_view name);
std::optional<Optimizer> optimizer_named(std::string_view name);
std::optional<Recompute> recompute_named(std::string_view name);
std::optional<Attention> attention_named(std::string_view name);
std::optional<Framework> framework_named(std::string_view name);
std::optional<Offload> offload_named(std::string_view name);
std::optional<Loss> loss_named(std::string_view name);
/// Every name of each, in order, for help texts and errors.
std::vector<std::string> precision_names();
std::vector<std::string> optimizer_names();
std::vector<std::string> recompute_names();
std::vector<std::string> attention_names();
std::vector<std::string> framework_names();
std::vector<std::string> offload_names();
std::vector<std::string> loss_names();

/// Bytes each parameter costs, before ZeRO divides anything.
///
/// | precision            | weights | gradients | optimizer: sgd / momentum / adam, adamw | total        |
/// |----------------------|---------|-----------|-----------------------------------------|--------------|
/// | fp32                 | 4       | 4         | 0 / 4 / 8                               | 8 / 12 / 16  |
/// | fp16, bf16           | 2       | 2         | 4 / 8 / 12 (fp32 master + states)       | 8 / 12 / 16  |
/// | amp                  | 6       | 4         | 0 / 4 / 8                               | 10 / 14 / 18 |
/// | fp16-pure, bf16-pure | 2       | 2         | 0 / 2 / 4 (states in 16-bit)            | 4 / 6 / 8    |
///
/// adam8bit's states are 2 bytes in every precision, adafactor's 0, lamb's as adam's.
///
/// Mixed-precision Adam is 16 bytes (2 + 2 + 12, the ZeRO paper's K = 12) where the weights and
/// gradients are 16-bit; it is 18 where the framework keeps fp32 gradients and weights beside a
/// 16-bit copy (amp: 6 + 4 + 8, the Hugging Face accounting); 8 where there are no fp32 copies at
/// all (torch.optim.AdamW keeps exp_avg and exp_avg_sq in the parameters' dtype). Adam and AdamW
/// keep the same state, so they cost the same.
struct StateBytes {
    unsigned weights = 0;
    unsigned gradients = 0;
    unsigned optimizer = 0;
    unsigned total() const { return weights + gradients + optimizer; }
};
/// TensorFlow adds the clipped copy of the gradients (4 bytes, fp32) to the gradients' bytes.
StateBytes state_bytes(Precision precision, Optimizer optimizer, Framework framework = Framework::pytorch);

/// What the transformer activation formula needs besides the layer count.
struct TransformerShape {
    unsigned hidden = 0; ///< h
    unsigned heads = 0; ///< a
    unsigned seq = 0; ///< s, tokens per sample
    unsigned vocab = 0; ///< V; 0 when unknown (then the output layer is not counted)
    unsigned kv_heads = 0; ///< grouped-query attention's key/value heads; 0: as many as heads
    unsigned intermediate = 0; ///< the MLP's inner size; 0: 4·h
    bool gated_mlp = false; ///< SwiGLU/GeGLU: gate and up projections, then down (Llama, Mistral)
    bool dropout = true; ///< dropout after the attention probabilities, attention and MLP (BERT, GPT-2)
    /// Encoder-decoder models (T5, BART): how many of the model's layers are decoder layers, which
    /// add cross-attention over the encoder's output and run at target_seq; 0: one stack.
    unsigned decoder_layers = 0;
    unsigned target_seq = 0; ///< the decoder's tokens per sample; 0: seq
    /// RMSNorm (Llama, Mistral, Qwen, Gemma, T5) instead of LayerNorm: as Hugging Face's Llama and
    /// torchtune write it, it casts its input to fp32 and keeps that, and the normalised output
    /// its weight multiplies while that weight trains (see transformer_layer_bytes). Gemma's, and
    /// LitGPT's since July 2024, keep that output in fp32 (2 bytes more per element in 16-bit full
    /// training); T5's keeps its 16-bit input too in 16-bit training; fused kernels (Apex,
    /// Transformer Engine) keep the 16-bit input alone: not told apart.
    bool rms_norm = false;
    /// The tokens the last layers and the output layer run over: the decoder's in an
    /// encoder-decoder model, else seq.
    unsigned output_seq() const { return decoder_layers > 0 && target_seq > 0 ? target_seq : seq; }
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
    /// The attention the model's implementation runs when none is asked for: T5's is eager in
    /// Transformers (its relative position bias has no sdpa path); nullopt: PyTorch's default.
    std::optional<Attention> attention;
    /// Parameters outside the projections (embeddings, an untied output layer, positions): LoRA's
    /// 8- and 4-bit bases keep them 16-bit. 0: vocabulary × hidden when the vocabulary is known.
    std::uint64_t embedding_params = 0;
};

/// LoRA (Hu et al. 2021) and QLoRA (Dettmers et al. 2023): the model's weights frozen, stored in
/// 16, 8 or 4 bits, and rank-r adapters A (r × in) and B (out × r) trained beside the projections
/// named. Frozen projections keep no input for a weight gradient, except over 8-bit weights,
/// whose matmul keeps it whenever the input needs a gradient; the 4-bit weights are NF4 in
/// blocks of 64 with an fp32 scale each (0.5625 bytes per weight); embeddings and norms stay
/// 16-bit.
struct Lora {
    /// The projections that can carry adapters; a plain MLP has up and down.
    enum Target : unsigned { q = 1, k = 2, v = 4, o = 8, gate = 16, up = 32, down = 64 };
    unsigned rank = 0; ///< 0: no LoRA, everything trained
    unsigned base_bits = 16; ///< 16, 8 (LLM.int8) or 4 (NF4)
    unsigned targets = q | v; ///< PEFT's default for Llama and BERT
    bool on(Target t) const { return rank > 0 && (targets & t) != 0; }
};
/// "q,v", "all" (every projection): the targets; nullopt with the unknown name in `bad`.
std::optional<unsigned> lora_targets_named(std::string_view list, std::string& bad);
/// The names of `targets`, in the order q, k, v, o, gate, up, down.
std::vector<std::string> lora_target_list(unsigned targets);

struct TrainingSetup {
    Precision precision = Precision::fp32;
    Optimizer optimizer = Optimizer::adam;
    unsigned zero = 0; ///< ZeRO stage 0..3
    unsigned dp = 1; ///< data-parallel GPUs the ZeRO stages shard over
    /// Tensor parallelism (Megatron): each GPU holds 1/tp of every layer's weights, and of its
    /// activations but the norms, dropout masks and the attention's and MLP's inputs, which each
    /// GPU keeps whole unless the sequence is split too (Korthikanti et al.: s·b·h·(10 + 24/t +
    /// 5·a·s/(h·t)), or everything / t with sequence parallelism).
    unsigned tp = 1;
    bool sequence_parallel = false;
    /// Pipeline stages: each holds 1/pp of the layers' states; with 1F1B the first stage keeps
    /// pp micro-batches of its layers in flight, as many activations as all layers for one.
    unsigned pp = 1;
    Offload offload = Offload::none;
    /// Gradient accumulation: micro-batches per optimizer step. Where the gradients are kept in a
    /// wider type than backward writes them, the framework adds a buffer (see accumulation_bytes).
    unsigned grad_accum = 1;
    Recompute recompute = Recompute::none;
    Attention attention = Attention::sdpa;
    Framework framework = Framework::pytorch;
    Loss loss = Loss::fp32;
    Lora lora;
    /// PyTorch DDP with gradient_as_bucket_view=True: the gradients are views into the all-reduce
    /// buckets instead of a second copy (see bucket_bytes).
    bool bucket_view = false;
};

/// Bytes per trained parameter of the buffer gradient accumulation adds (0 with one micro-batch):
/// - bf16 with fp32 master weights: 4, an fp32 buffer the bf16 gradients add up in (DeepSpeed's
///   BF16_Optimizer, whose default grad_accum_dtype is fp32, PR #4713; Megatron's main_grad);
/// - TensorFlow: 4, an fp32 variable per weight (a graph's gradients live only within a step;
///   NVIDIA's BERT keeps a GradientAccumulator);
/// - PyTorch otherwise: 0, backward adds into the .grad the step already keeps (fp32, amp, the
///   pure 16-bit precisions; fp16 with fp32 masters as DeepSpeed's FP16_Optimizer does it).
unsigned accumulation_bytes(const TrainingSetup& setup);

/// Whether PyTorch's DDP, with its all-reduce buckets, runs `setup`, whatever bucket_view says.
/// The Reducer copies every gradient into a flat bucket (25 MiB each, together the size of all
/// gradients), allocated when the model is wrapped and kept for the whole run, so they cost the
/// gradients' bytes again (torch.nn.parallel's documentation of gradient_as_bucket_view: "the
/// saved memory size will be equal to the total gradients size"). PyTorch's
/// ZeroRedundancyOptimizer recipe shows it: 20 Linear(2000, 2000), 80,040,000 fp32 parameters,
/// take 335 MB, and 656 MB once wrapped in DDP (tests/data/fit_published.tsv). True for PyTorch,
/// more than one data-parallel GPU, no ZeRO or ZeRO-1 (torch's ZeroRedundancyOptimizer shards the
/// optimizer of a DDP model), no offload, no --tp or --pp, and gradients torch keeps (fp32, amp,
/// the pure 16-bit precisions). False otherwise: DeepSpeed's and Megatron's mixed precision (fp16,
/// bf16) and DeepSpeed's offload reduce from their own gradient buffers, ZeRO-2 and -3 (FSDP)
/// shard the gradients.
bool has_ddp_buckets(const TrainingSetup& setup);
/// Bytes per trained parameter of those buckets: the gradients' where has_ddp_buckets, 0 with
/// bucket_view (the buckets are the gradients) or without DDP.
unsigned bucket_bytes(const TrainingSetup& setup);

/// The fixed costs of a training process on one GPU.
struct Overheads {
    /// CUDA context and the framework's kernels: 0.3–0.5 GiB with lazy module loading (CUDA ≥
    /// 11.7), over 1 GiB on older stacks.
    std::uint64_t cuda_context = std::uint64_t{512} << 20;
    /// --workspace SIZE: the workspaces as given; otherwise counted for `gpu` and the setup
    /// (workspaces_for).
    std::optional<std::uint64_t> workspace;
    GpuTraits gpu; ///< the GPU these overheads are for
    /// The share of the GPU's memory kept free for allocator fragmentation and rounding.
    double margin_fraction = 0.10;
    /// Measured CNN activations are the tensors saved for backward; what nvidia-smi shows adds
    /// this share more (the caching allocator's cached blocks, cuDNN's benchmark workspaces),
    /// while max_memory_allocated() shows the saved tensors alone.
    double cnn_transient = 0.20;
};

/// Activation bytes for one sample, with the parts they come from.
struct ActivationBytes {
    std::uint64_t per_sample = 0;
    // Transformer formula (Korthikanti et al. 2022, Table 2).
    std::uint64_t per_layer = 0; ///< what each layer keeps for backward
    std::uint64_t layers_total = 0; ///< per_layer × layers
    std::uint64_t rebuilt_layer = 0; ///< with recompute: the part one layer rebuilds during its backward
    std::uint64_t output_layer = 0; ///< its input and the loss, output_layer_bytes()
    // Encoder-decoder models: per_layer is an encoder layer's, these the decoder's.
    unsigned decoder_layers = 0;
    std::uint64_t decoder_per_layer = 0; ///< self-attention, cross-attention and MLP at the target length
    std::uint64_t encoder_output = 0; ///< the encoder's output, every cross-attention's K and V input
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
    /// QLoRA and 8-bit: the largest projection dequantized to 16-bit while it computes.
    std::uint64_t dequantized = 0;
    /// With LoRA: the trained adapters' parameters and the frozen weights' bytes (in weights).
    std::uint64_t adapter_params = 0;
    std::uint64_t frozen_weights = 0;
    std::uint64_t offloaded = 0; ///< kept in CPU memory instead (ZeRO-Offload)
    /// With gradient accumulation, the buffer the gradients add up in, where there is one.
    std::uint64_t accumulation = 0;
    std::uint64_t buckets = 0; ///< PyTorch DDP's all-reduce buckets (bucket_bytes)
    std::uint64_t total() const
    {
        return weights + gradients + optimizer + zero3_gather + dequantized + accumulation + buckets;
    }
};

/// How far the real peak may lie above the estimate, as shares of each part: the upper estimate is
/// states × (1 + states) + activations × (1 + activations) + context + workspaces. The shares come
/// from comparing the counts with published measurements (tests/data/fit_published.tsv): what the
/// counts leave out (allocator blocks, the backward pass's transient buffers, a framework's own
/// temporaries) is not in any formula, so it is stated instead of hidden.
struct Uncertainty {
    double states = 0;
    double activations = 0;
    const char* states_basis = ""; ///< where each share comes from, in words
    const char* activations_basis = "";
    std::string basis() const; ///< both, for the report
    std::uint64_t upper_states(std::uint64_t central) const;
    std::uint64_t upper_activations(std::uint64_t central) const;
};

/// Everything that does not depend on the GPU.
struct MemoryPlan {
    TrainingSetup setup; ///< what was planned
    StateMemory states;
    ActivationBytes activations;
    Uncertainty uncertainty;
    std::vector<base::Finding> findings; ///< how the estimate was made, setups that do nothing
};

/// Throws base::Error when the model gives no way to count activations or has no parameters,
/// or when the setup is out of range (ZeRO stage > 3, dp 0).
MemoryPlan plan_memory(const ModelSpec& model, const TrainingSetup& setup, const Overheads& overheads = {});

/// Transformer activations of one layer for one sample, in bytes: what each operation keeps for
/// its backward pass (Korthikanti et al. 2022, §4.1), with e = 2 bytes per element in 16-bit and
/// amp, 4 in fp32; g = kv_heads / heads with flash attention, 1 with eager and sdpa (PyTorch's
/// kernels get K and V repeated to every head and keep the copies); I = the MLP's inner size;
/// masks 1 byte (when dropout).
///   attention   s·h·e·(3 + 2·g) + s·h (output dropout mask)   QKV input, Q, K, V, output input
///   scores      eager: a·s²·(e + 1 + e) (softmax, its dropout mask and output; without dropout
///               a·s²·e); amp keeps softmax and dropout in fp32 and a 16-bit copy: a·s²·(4+1+4+2)
///               sdpa, flash: 4·a·s (the softmax statistics)
///   MLP         s·e·(h + 2·I) + s·h (mask); gated: s·e·(h + 4·I) (gate, up, activation, product)
///   norms       2·s·h·e (amp: fp32 inputs, 4 bytes); RMSNorm 2·s·h·(4 + y): the input cast to
///               fp32 (x.float(), which pow and the product with rsqrt save) and, while its weight
///               trains (not under LoRA), the normalised output y that weight multiplies (e bytes
///               after the cast back; 4 in fp32 and amp)
/// GPT with h = 4·I, g = 1 and dropout gives Korthikanti's 34·s·h + 5·a·s² in 16-bit.
/// Selective recompute drops the scores; full recompute keeps only the layer's input, s·h·e
/// (amp: the fp32 residual stream, 4 bytes).
///
/// TensorFlow (f = 4 bytes, element-wise in fp32; e for the matmuls' inputs), what a session
/// keeps for the gradients it fetches: each dropout its float mask, f per element (not the scaled
/// input: the mask's gradient is never fetched); each layer norm its input; the tanh GELU its
/// input, the tanh and the cdf, 3·f·s·I; the scores the softmax's output, dropout's mask and
/// dropout's output, (2·f + e)·a·s². In fp32 a BERT layer keeps 104·s·h + 12·a·s² (PyTorch:
/// 66·s·h + 9·a·s²).
/// With LoRA (`lora` ranked), a frozen projection keeps no input: the attention's input is kept
/// only with an adapter on q, k or v, the output projection's only with one on o (sdpa and flash
/// keep their output anyway), the MLP's input only with one on gate or up, and the down
/// projection's only with one on down; each adapter keeps its r-wide middle, s·r·e. Over 8-bit
/// weights every projection keeps its input (bitsandbytes' MatMul8bitLt keeps it).
std::uint64_t transformer_layer_bytes(const TransformerShape& shape, Precision precision, Recompute recompute,
    Attention attention = Attention::eager, Framework framework = Framework::pytorch, const Lora& lora = {});
/// A decoder layer's cross-attention over `source` encoder tokens for `target` decoder tokens, in
/// bytes for one sample: the query projection's input, Q, K and V (K and V over the source), the
/// output projection's input, its dropout mask and norm, and the scores a·target·source as
/// attention keeps them (eager: the softmax, its dropout mask and output; sdpa, flash: 4·a·target).
/// Full recompute keeps nothing more (the encoder's output is counted once, apart); selective
/// drops eager scores.
std::uint64_t cross_attention_bytes(const TransformerShape& shape, unsigned target, unsigned source,
    Precision precision, Recompute recompute, Attention attention, const Lora& lora = {});
/// What one norm keeps per token and hidden unit: LayerNorm its input, in the residual stream's
/// type; RMSNorm 4 + y (see transformer_layer_bytes).
std::uint64_t norm_bytes(const TransformerShape& shape, Precision precision, const Lora& lora = {});
/// The output layer of one sample over `seq` tokens: the final norm (as a layer's, norm_bytes), the
/// head's input, s·h·e, which a head frozen by LoRA does not keep, and what the loss holds over the
/// vocabulary (see Loss). TensorFlow: both inputs, 4·s·h (fp32 8·s·h), and the logits and the
/// softmax, 4·s·V in 16-bit, 6·s·V with amp, 8·s·V in fp32. 0 without a vocabulary.
std::uint64_t output_layer_bytes(const TransformerShape& shape, unsigned seq, const TrainingSetup& setup);
/// Whether the formula counts an output layer over a vocabulary for `model` (a transformer with
/// one, its activations not given): where PyTorch's --loss changes the count.
bool counts_vocabulary(const ModelSpec& model);
/// Parameters of one layer's adapters.
std::uint64_t lora_layer_params(const TransformerShape& shape, const Lora& lora);

/// One GPU's share of the sum, at the upper estimate (what max_batch promises) and the central one.
struct GpuFit {
    std::uint64_t memory = 0; ///< what the GPU offers (total from the table or --gpu-mem, free from NVML)
    std::uint64_t cuda_context = 0;
    Workspaces workspaces;
    std::uint64_t margin = 0;
    std::uint64_t states = 0; ///< the upper estimate of the model states
    /// memory − context − workspaces − margin − states; negative when the states alone do not fit.
    std::int64_t available = 0;
    /// floor(available / upper activations per sample): the largest batch whose upper estimate fits;
    /// 0 when nothing fits.
    unsigned max_batch = 0;
    unsigned max_batch_central = 0; ///< the same at the central estimate (≥ max_batch)
};
GpuFit fit_gpu(const MemoryPlan& plan, std::uint64_t memory, const Overheads& overheads = {});

/// What one GPU holds at a per-GPU batch: about what nvidia-smi shows for the training process
/// (torch.cuda.max_memory_allocated() shows allocated()).
struct PeakMemory {
    unsigned batch = 0;
    std::uint64_t states = 0;
    std::uint64_t activations = 0; ///< batch × activations per sample
    std::uint64_t cuda_context = 0;
    Workspaces workspaces;
    std::uint64_t states_upper = 0; ///< with the plan's uncertainty
    std::uint64_t activations_upper = 0;
    /// Of the activations, a CNN preset's transient share (batch × ActivationBytes::transient):
    /// held by the allocator's cache, not allocated at the peak.
    std::uint64_t cached = 0;
    std::uint64_t total() const { return states + activations + cuda_context + workspaces.total(); }
    std::uint64_t upper() const { return states_upper + activations_upper + cuda_context + workspaces.total(); }
    /// What torch.cuda.max_memory_allocated() shows: no context, no NCCL buffers, no cached blocks.
    std::uint64_t allocated() const { return states + activations - cached + workspaces.allocated(); }
    std::uint64_t allocated_upper() const { return states_upper + activations_upper - cached + workspaces.allocated(); }
};
PeakMemory peak_at(const MemoryPlan& plan, unsigned batch, const Overheads& overheads = {});

/// One change to the setup and what it gives on the GPU the fit failed on.
struct Suggestion {
    std::string change; ///< as options, e.g. "--recompute full" or "--zero 3 --dp 8 --recompute full"
    TrainingSetup setup;
    unsigned max_batch = 0;
};

/// When nothing fits (even batch 1) on `memory`: each single change that could help (full or
/// selective recompute for transformers, each higher ZeRO stage when dp > 1, 16-bit precision
/// from fp32 or amp, the loss in chunks, DDP's buckets as views of the gradients), with its max
/// batch; when none alone fits, all of them together (ZeRO-3 has no DDP buckets); and the
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
/// powers of 1000, case-insensitive). Throws base::Error naming `what` for anything else, for
/// counts below 1 and above 10^15.
std::uint64_t parse_param_count(std::string_view text, const std::string& what);

/// "335M", "6.74B", "25.6M": three significant digits and a suffix.
std::string format_param_count(std::uint64_t params);

} // namespace doctor::fit
