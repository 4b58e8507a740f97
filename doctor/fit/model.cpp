#include "doctor/fit/model.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/spelling.hpp"
#include "doctor/fit/codes.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <fmt/format.h>

namespace doctor::fit {

namespace {

using base::Error;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b)
{
    return a / b + (a % b != 0 ? 1 : 0);
}

bool sixteen_bit(Precision p)
{
    return p != Precision::fp32;
}

std::uint64_t scaled(std::uint64_t bytes, double fraction)
{
    return static_cast<std::uint64_t>(std::llround(static_cast<long double>(bytes) * fraction));
}

unsigned max_batch_of(
    const ModelSpec& model, const TrainingSetup& setup, std::uint64_t memory, const Overheads& overheads)
{
    return fit_gpu(plan_memory(model, setup, overheads), memory, overheads).max_batch;
}

// How far above the counts the real peak was seen: the states' share by what trains, the
// activations' by what counted them. Each is the smallest round share that keeps the upper
// estimate at or above the published measurements it was compared with (tests/data/
// fit_published.tsv, bench/fit_accuracy.py; PyTorch's ZeroRedundancyOptimizer recipe, whose
// 16,000,000-byte tensors the caching allocator rounds up to 16 MiB, +4.9 %, is covered with its
// cuBLAS workspaces counted; see BENCHMARKS.md).
struct StatesUncertainty {
    Framework framework;
    double share;
    const char* basis;
};
constexpr std::array<StatesUncertainty, 2> states_uncertainties{{
    {Framework::pytorch, 0.05, "the states are exact counts, as accelerate's"},
    {Framework::tensorflow, 0.25,
        "TensorFlow runs every variable's Adam update at once: BERT-Large does not fit batch 1 at sequence 384 "
        "in 12 GB (google-research/bert), which needs the states 1.25× the count"},
}};
// The activations' share by their source; a row for QLoRA's 4-bit base follows the general row of
// its source and replaces it there.
struct ActivationsUncertainty {
    const char* source; // ActivationBytes::source
    bool four_bit_base; // only under LoRA over 4-bit weights
    double share;
    const char* basis;
};
constexpr std::array<ActivationsUncertainty, 4> activations_uncertainties{{
    {"transformer formula", false, 0.40,
        "the most a published run held above the count: LitGPT's LoRA of Llama 2 7B at 1304 tokens +37 % with "
        "the states' +5 %; under TensorFlow, with its states' +25 %, the least that keeps BERT-Large at 384 from "
        "batch 1 in 12 GB"},
    // LitGPT's config-hub and resource tables (bitsandbytes 0.41 and 0.42): its QLoRA runs of
    // Llama 2 7B, Mistral 7B and Llama 3.x 1B-8B held +70 % to +94 % above the count with the
    // states' +5 %, where its LoRA runs of the same models held at most +37 %. The count is
    // bitsandbytes' own since 0.43.2, which keeps no input of a 4-bit layer.
    {"transformer formula", true, 1.00,
        "bitsandbytes#1270: before 0.43.2 each 4-bit layer kept its input, which its backward never used; "
        "LitGPT's QLoRA runs on those versions peaked up to 94 % above the count"},
    // Lambda's nvidia-smi logs of NVIDIA's ResNet-50 trainer: +8.3 % on a V100 32 GB at batch 296,
    // +4.0 % on a Titan RTX at 224, none on an RTX 2080 Ti at 100.
    {"measured", false, 0.10,
        "the most a published CNN run held above the count, the transient share in it: ResNet-50 on a V100 32 GB "
        "+8 % in nvidia-smi"},
    {"given", false, 0.0, "activations as measured (--activation-bytes-per-sample)"},
}};

Uncertainty uncertainty_for(const std::string& source, const TrainingSetup& setup)
{
    const bool four_bit = setup.lora.rank > 0 && setup.lora.base_bits == 4;
    Uncertainty u;
    for (const auto& row : states_uncertainties) {
        if (row.framework == setup.framework) {
            u.states = row.share;
            u.states_basis = row.basis;
        }
    }
    for (const auto& row : activations_uncertainties) {
        if (source == row.source && (!row.four_bit_base || four_bit)) {
            u.activations = row.share;
            u.activations_basis = row.basis;
        }
    }
    return u;
}

std::string change_text(const TrainingSetup& from, const TrainingSetup& to)
{
    std::string out;
    auto add = [&](const std::string& option) { out += (out.empty() ? "" : " ") + option; };
    if (to.zero != from.zero) {
        add(fmt::format("--zero {}", to.zero));
    }
    if (to.dp != from.dp) {
        add(fmt::format("--dp {}", to.dp));
    }
    if (to.recompute != from.recompute) {
        add(fmt::format("--recompute {}", to_string(to.recompute)));
    }
    if (to.precision != from.precision) {
        add(fmt::format("--precision {}", to_string(to.precision)));
    }
    if (to.loss != from.loss) {
        add(fmt::format("--loss {}", to_string(to.loss)));
    }
    if (to.bucket_view && !from.bucket_view) {
        add("--bucket-view");
    }
    if (!to.bucket_view && from.bucket_view) {
        add("without --bucket-view");
    }
    return out;
}

} // namespace

namespace {

template <typename E> struct Named {
    E value;
    const char* name;
};

constexpr std::array<Named<Precision>, 6> precisions{
    {{Precision::fp32, "fp32"}, {Precision::fp16, "fp16"}, {Precision::bf16, "bf16"}, {Precision::amp, "amp"},
        {Precision::fp16_pure, "fp16-pure"}, {Precision::bf16_pure, "bf16-pure"}}};
constexpr std::array<Named<Optimizer>, 7> optimizers{
    {{Optimizer::sgd, "sgd"}, {Optimizer::momentum, "momentum"}, {Optimizer::adam, "adam"}, {Optimizer::adamw, "adamw"},
        {Optimizer::adam8bit, "adam8bit"}, {Optimizer::adafactor, "adafactor"}, {Optimizer::lamb, "lamb"}}};
constexpr std::array<Named<Recompute>, 3> recomputes{
    {{Recompute::none, "none"}, {Recompute::selective, "selective"}, {Recompute::full, "full"}}};
constexpr std::array<Named<Framework>, 2> frameworks{
    {{Framework::pytorch, "pytorch"}, {Framework::tensorflow, "tensorflow"}}};
constexpr std::array<Named<Offload>, 3> offloads{
    {{Offload::none, "none"}, {Offload::optimizer, "optimizer"}, {Offload::all, "all"}}};
constexpr std::array<Named<Attention>, 3> attentions{
    {{Attention::eager, "eager"}, {Attention::sdpa, "sdpa"}, {Attention::flash, "flash"}}};
constexpr std::array<Named<Loss>, 3> losses{{{Loss::fp32, "fp32"}, {Loss::chunked, "chunked"}, {Loss::fused, "fused"}}};

template <typename E, std::size_t N> const char* name_of(const std::array<Named<E>, N>& table, E value)
{
    for (const auto& entry : table) {
        if (entry.value == value) {
            return entry.name;
        }
    }
    return "?";
}

template <typename E, std::size_t N>
std::optional<E> value_named(const std::array<Named<E>, N>& table, std::string_view name)
{
    for (const auto& entry : table) {
        if (name == entry.name) {
            return entry.value;
        }
    }
    return std::nullopt;
}

template <typename E, std::size_t N> std::vector<std::string> names_of(const std::array<Named<E>, N>& table)
{
    std::vector<std::string> out;
    for (const auto& entry : table) {
        out.emplace_back(entry.name);
    }
    return out;
}

} // namespace

const char* to_string(Precision precision)
{
    return name_of(precisions, precision);
}

const char* to_string(Optimizer optimizer)
{
    return name_of(optimizers, optimizer);
}

const char* to_string(Recompute recompute)
{
    return name_of(recomputes, recompute);
}

const char* to_string(Attention attention)
{
    return name_of(attentions, attention);
}

std::optional<Precision> precision_named(std::string_view name)
{
    return value_named(precisions, name);
}

std::optional<Optimizer> optimizer_named(std::string_view name)
{
    return value_named(optimizers, name);
}

std::optional<Recompute> recompute_named(std::string_view name)
{
    return value_named(recomputes, name);
}

std::optional<Attention> attention_named(std::string_view name)
{
    return value_named(attentions, name);
}

const char* to_string(Framework framework)
{
    return name_of(frameworks, framework);
}

std::optional<Framework> framework_named(std::string_view name)
{
    return value_named(frameworks, name);
}

std::vector<std::string> framework_names()
{
    return names_of(frameworks);
}

const char* to_string(Offload offload)
{
    return name_of(offloads, offload);
}

std::optional<Offload> offload_named(std::string_view name)
{
    return value_named(offloads, name);
}

std::vector<std::string> offload_names()
{
    return names_of(offloads);
}

const char* to_string(Loss loss)
{
    return name_of(losses, loss);
}

std::optional<Loss> loss_named(std::string_view name)
{
    return value_named(losses, name);
}

std::vector<std::string> loss_names()
{
    return names_of(losses);
}

std::vector<std::string> precision_names()
{
    return names_of(precisions);
}

std::vector<std::string> optimizer_names()
{
    return names_of(optimizers);
}

std::vector<std::string> recompute_names()
{
    return names_of(recomputes);
}

std::vector<std::string> attention_names()
{
    return names_of(attentions);
}

StateBytes state_bytes(Precision precision, Optimizer optimizer, Framework framework)
{
    if (framework == Framework::tensorflow) {
        // BERT's optimization.py clips by global norm: a clipped copy of every gradient, fp32.
        StateBytes b = state_bytes(precision, optimizer);
        b.gradients += 4;
        return b;
    }
    // Optimizer states in fp32: momentum keeps one (4 bytes), Adam, AdamW and LAMB two (m and v,
    // 8); 8-bit Adam keeps them in a byte each whatever the weights' type (2); Adafactor's row and
    // column statistics are (rows + columns) / (rows × columns) of a matrix: nothing to count.
    unsigned states = 0;
    bool follows_weights = true; // pure 16-bit keeps the states in the weights' type
    switch (optimizer) {
    case Optimizer::momentum:
        states = 4;
        break;
    case Optimizer::adam:
    case Optimizer::adamw:
    case Optimizer::lamb:
        states = 8;
        break;
    case Optimizer::adam8bit:
        states = 2;
        follows_weights = false;
        break;
    case Optimizer::sgd:
    case Optimizer::adafactor:
        break;
    }
    switch (precision) {
    case Precision::fp32:
        return {4, 4, states};
    case Precision::fp16:
    case Precision::bf16:
        // 16-bit weights and gradients; the optimizer holds the fp32 master weights (4) too.
        return {2, 2, 4 + states};
    case Precision::amp:
        // fp32 weights plus autocast's 16-bit copy, fp32 gradients.
        return {6, 4, states};
    case Precision::fp16_pure:
    case Precision::bf16_pure:
        // Everything in the weights' 16-bit type, the optimizer's states too.
        return {2, 2, follows_weights ? states / 2 : states};
    }
    return {};
}

namespace {

// A TensorFlow layer as BERT's modeling.py builds it, no recompute; e for matmul inputs and
// outputs, f = 4 for the element-wise steps and masks. A TensorFlow session runs only what the
// fetched train op needs, so a tensor is kept when a gradient that reaches a weight reads it:
//   - each dense layer its input (the QKV input, the context, the first layer norm's output,
//     the GELU's output), e; the attention's Q, K and V (the two matmuls), e;
//   - dropout (x / keep_prob · floor(keep_prob + U)) its float mask only: the gradient towards
//     the mask is never fetched, so the scaled input is not kept, f;
//   - each layer norm (nn.moments, batch_normalization) its input, f;
//   - the GELU (x · 0.5 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))) its input, the tanh and the cdf,
//     3·f (pow's gradient reads x; the scalings read only their constants);
//   - the scores: the softmax's output (its gradient), dropout's mask, and dropout's output (the
//     second matmul's input), f + f + e; the scaled product and the mask's sum keep nothing.
// In fp32 a BERT layer keeps 104·s·h + 12·a·s².
std::uint64_t tensorflow_layer_bytes(const TransformerShape& shape, std::uint64_t e, bool keep_scores)
{
    const std::uint64_t s = shape.seq;
    const std::uint64_t h = shape.hidden;
    const std::uint64_t a = shape.heads;
    const std::uint64_t kv = shape.kv_heads == 0 ? a : std::min<std::uint64_t>(shape.kv_heads, a);
    const std::uint64_t inner = shape.intermediate == 0 ? 4 * h : shape.intermediate;
    constexpr std::uint64_t f = 4;
    const std::uint64_t mask = shape.dropout ? f : 0;
    // Three dense layers' inputs, Q, two layer norms' inputs, two dropouts' masks.
    const std::uint64_t per_sh = 3 * e + e + 2 * f + 2 * mask;
    const std::uint64_t kv_bytes = 2 * s * (h / a) * kv * e;
    // GELU: its input, the tanh and the cdf; its output feeds the second dense layer.
    const std::uint64_t mlp = s * inner * (3 * f + e);
    // Without dropout the softmax's output is the matmul's input too (in fp32 the same tensor).
    const std::uint64_t scores_each = f + (shape.dropout ? f + e : (e == f ? 0 : e));
    const std::uint64_t scores = keep_scores ? a * s * s * scores_each : 0;
    return s * h * per_sh + kv_bytes + mlp + scores;
}

} // namespace

namespace {

constexpr std::array<Named<Lora::Target>, 7> lora_target_names{{{Lora::q, "q"}, {Lora::k, "k"}, {Lora::v, "v"},
    {Lora::o, "o"}, {Lora::gate, "gate"}, {Lora::up, "up"}, {Lora::down, "down"}}};

// A projection's input and output widths.
struct Projection {
    Lora::Target target;
    std::uint64_t in;
    std::uint64_t out;
};

std::vector<Projection> projections(const TransformerShape& shape)
{
    const std::uint64_t h = shape.hidden;
    const std::uint64_t kv = shape.kv_heads == 0 ? shape.heads : shape.kv_heads;
    const std::uint64_t kv_width = h / shape.heads * kv;
    const std::uint64_t inner = shape.intermediate == 0 ? 4 * h : shape.intermediate;
    std::vector<Projection> out{{Lora::q, h, h}, {Lora::k, h, kv_width}, {Lora::v, h, kv_width}, {Lora::o, h, h},
        {Lora::up, h, inner}, {Lora::down, inner, h}};
    if (shape.gated_mlp) {
        out.push_back({Lora::gate, h, inner});
    }
    return out;
}

} // namespace

namespace {

// Bytes per element of a matmul's saved input or output (e), and of the residual stream, which
// autocast keeps in fp32 (normalisation runs in fp32).
struct ElementBytes {
    std::uint64_t e;
    std::uint64_t residual;
};

ElementBytes element_bytes(Precision precision)
{
    const std::uint64_t e = sixteen_bit(precision) ? 2 : 4;
    return {e, precision == Precision::amp ? 4 : e};
}

// Bytes eager attention keeps per score: the softmax output, then its dropout mask and output;
// amp: both fp32, then a 16-bit copy for the product with V.
std::uint64_t bytes_per_score(const TransformerShape& shape, Precision precision)
{
    const std::uint64_t e = element_bytes(precision).e;
    if (precision == Precision::amp) {
        return 4 + (shape.dropout ? 1 + 4 : 0) + 2;
    }
    return e + (shape.dropout ? 1 + e : 0);
}

// Whether projections among `targets` keep their input: always in full training, for a weight
// gradient; under LoRA those with adapters, and every 8-bit one, whose MatMul8bitLt keeps its
// input whenever the input needs a gradient (bitsandbytes' autograd/_functions.py; before 0.45
// it kept an int8 copy too, 1 byte per element more; its 4-bit MatMul4Bit keeps none since
// 0.43.2).
std::uint64_t keeps_input(const Lora& lora, unsigned targets)
{
    return lora.rank == 0 || lora.base_bits == 8 || (lora.targets & targets) != 0 ? 1 : 0;
}

// One attention of `queries` tokens over `keys` tokens (a layer's own, or a decoder's over the
// encoder's output), no full recompute: the query projection's input and the output
// projection's input where they are kept (`query_input`, `output_input`: 0 or 1), Q, and K and
// V over the keys, the output's dropout mask, and the scores as the attention keeps them: eager
// the softmax (and its dropout), unless selective recompute drops them; sdpa and flash the
// softmax's log-sum-exp per row, fp32. With grouped-query attention K and V are repeated to
// every head before eager's matmuls and PyTorch's SDPA (Hugging Face's repeat_kv where a mask
// is given, LitGPT's repeat_interleave, torchtune's expand), and the kernel keeps the copies at
// Q's width; FlashAttention-2 (and SDPA with enable_gqa) keeps them at kv/a of it (h/a divides h
// exactly).
std::uint64_t attention_bytes(const TransformerShape& shape, std::uint64_t queries, std::uint64_t keys,
    Precision precision, Recompute recompute, Attention attention, std::uint64_t query_input,
    std::uint64_t output_input)
{
    const std::uint64_t h = shape.hidden;
    const std::uint64_t a = shape.heads;
    const std::uint64_t kv =
        shape.kv_heads == 0 || attention != Attention::flash ? a : std::min<std::uint64_t>(shape.kv_heads, a);
    const std::uint64_t e = element_bytes(precision).e;
    const std::uint64_t block = queries * h * e * (query_input + 1 + output_input) + 2 * keys * (h / a) * kv * e +
        queries * h * (shape.dropout ? 1 : 0);
    if (attention != Attention::eager) {
        return block + 4 * a * queries;
    }
    return block + (recompute == Recompute::selective ? 0 : a * queries * keys * bytes_per_score(shape, precision));
}

} // namespace

std::optional<unsigned> lora_targets_named(std::string_view list, std::string& bad)
{
    if (list == "all") {
        return Lora::q | Lora::k | Lora::v | Lora::o | Lora::gate | Lora::up | Lora::down;
    }
    unsigned targets = 0;
    for (const std::string& name : base::split_commas(std::string(list))) {
        const auto t = value_named(lora_target_names, name);
        if (!t) {
            bad = name;
            return std::nullopt;
        }
        targets |= *t;
    }
    return targets;
}

std::vector<std::string> lora_target_list(unsigned targets)
{
    std::vector<std::string> out;
    for (const auto& entry : lora_target_names) {
        if ((targets & entry.value) != 0) {
            out.emplace_back(entry.name);
        }
    }
    return out;
}

std::uint64_t norm_bytes(const TransformerShape& shape, Precision precision, const Lora& lora)
{
    const std::uint64_t residual = element_bytes(precision).residual;
    if (!shape.rms_norm) {
        return residual;
    }
    // x.float() is saved by pow and by the product with rsqrt; the cast back to the input's type
    // saves nothing; weight · y saves y, in the residual stream's type, while the weight trains.
    return 4 + (lora.rank == 0 ? residual : 0);
}

bool counts_vocabulary(const ModelSpec& model)
{
    return model.transformer && model.transformer->vocab > 0 && !model.activation_bytes;
}

std::uint64_t cross_attention_bytes(const TransformerShape& shape, unsigned target, unsigned source,
    Precision precision, Recompute recompute, Attention attention, const Lora& lora)
{
    if (recompute == Recompute::full) {
        return 0;
    }
    // Its norm besides the attention, whose projections all keep their inputs.
    return attention_bytes(shape, target, source, precision, recompute, attention, 1, 1) +
        std::uint64_t{target} * shape.hidden * norm_bytes(shape, precision, lora);
}

std::uint64_t lora_layer_params(const TransformerShape& shape, const Lora& lora)
{
    std::uint64_t params = 0;
    for (const Projection& p : projections(shape)) {
        if (lora.on(p.target)) {
            params += std::uint64_t{lora.rank} * (p.in + p.out);
        }
    }
    return params;
}

std::uint64_t transformer_layer_bytes(const TransformerShape& shape, Precision precision, Recompute recompute,
    Attention attention, Framework framework, const Lora& lora)
{
    const std::uint64_t s = shape.seq;
    const std::uint64_t h = shape.hidden;
    const std::uint64_t inner = shape.intermediate == 0 ? 4 * h : shape.intermediate;
    const auto [e, residual] = element_bytes(precision);
    const std::uint64_t mask = shape.dropout ? 1 : 0;
    if (recompute == Recompute::full) {
        return s * h * residual;
    }
    if (framework == Framework::tensorflow) {
        return tensorflow_layer_bytes(shape, e, recompute != Recompute::selective);
    }
    // Which projections keep their input for a weight gradient: all of them, unless LoRA freezes
    // them (then only those with adapters; sdpa and flash keep their output, the o input, anyway).
    const std::uint64_t attention_input = keeps_input(lora, Lora::q | Lora::k | Lora::v);
    const std::uint64_t output_input = attention == Attention::eager ? keeps_input(lora, Lora::o) : 1;
    const std::uint64_t mlp_input = keeps_input(lora, Lora::gate | Lora::up);
    const std::uint64_t down_input = keeps_input(lora, Lora::down);
    std::uint64_t adapters = 0; // each adapter's r-wide middle, A·x
    if (lora.rank > 0) {
        for (const Projection& p : projections(shape)) {
            adapters += lora.on(p.target) ? s * lora.rank * e : 0;
        }
    }
    // Plain: the first projection's output (GELU's input) and the GELU's output (the second's
    // input). Gated: gate's output (SiLU's input), SiLU's and up's outputs (the product's inputs),
    // and the product (down's input).
    const std::uint64_t mlp = shape.gated_mlp ? s * e * (h * mlp_input + inner * (3 + down_input))
                                              : s * e * (h * mlp_input + inner * (1 + down_input)) + s * h * mask;
    const std::uint64_t norms = 2 * s * h * norm_bytes(shape, precision, lora);
    return attention_bytes(shape, s, s, precision, recompute, attention, attention_input, output_input) + mlp + norms +
        adapters;
}

std::uint64_t output_layer_bytes(const TransformerShape& shape, unsigned seq, const TrainingSetup& setup)
{
    if (shape.vocab == 0) {
        return 0;
    }
    const std::uint64_t sh = std::uint64_t{seq} * shape.hidden;
    const std::uint64_t sv = std::uint64_t{seq} * shape.vocab;
    const bool fp32 = setup.precision == Precision::fp32;
    if (setup.framework == Framework::tensorflow) {
        // The final norm's and the head's inputs; the logits and the softmax: in the precision's
        // type, amp's softmax in fp32 (the cross-entropy is on TensorFlow's mixed-precision deny
        // list).
        return (fp32 ? 8 : 4) * sh + (fp32 ? 8 : setup.precision == Precision::amp ? 6 : 4) * sv;
    }
    // The final norm (as a layer's, see norm_bytes), and the head's input (in the matmul's type:
    // 16-bit under amp), kept as a projection's is (keeps_input): while the head trains, and over
    // 8-bit weights (LitGPT quantizes the head with the projections, as plan_lora counts it); it
    // carries no adapter.
    const std::uint64_t input = sh *
        (norm_bytes(shape, setup.precision, setup.lora) +
            keeps_input(setup.lora, 0) * element_bytes(setup.precision).e);
    switch (setup.loss) {
    case Loss::fp32:
        // At the start of the backward pass log_softmax's saved output, nll_loss's gradient and
        // log_softmax's gradient, fp32 each (the cast logits are freed before: nothing saves them).
        // Hugging Face and torchtune keep the logits whole on every tensor-parallel GPU.
        return input + 12 * sv;
    case Loss::chunked:
        // The logits as the head wrote them and the loss's chunks: LitGPT's bf16 log-probabilities
        // and the gradients of the chunks it concatenates hold about 6·s·V in 16-bit (4 with its
        // chunked head), torchtune's fp32 chunks about 5; fp32 logits and log-probabilities 8.
        return input + (fp32 ? 8 : 6) * sv;
    case Loss::fused:
        // Megatron's vocab-parallel cross-entropy: each tensor-parallel GPU its share of the
        // vocabulary, the fp32 softmax that its gradient overwrites, and in 16-bit that gradient
        // cast back to the logits' type while it lives.
        return input + (fp32 ? 4 : 6) * ceil_div(sv, setup.tp == 0 ? 1 : setup.tp);
    }
    return input;
}

namespace {

// ZeRO stage 1 shards the optimizer states over the data-parallel GPUs, stage 2 the gradients
// too, stage 3 the weights too (Rajbhandari et al., ZeRO: P_os, P_os+g, P_os+g+p).
void shard(StateMemory& st, const TrainingSetup& setup)
{
    // Tensor and pipeline parallelism split the model itself first.
    const std::uint64_t model_parallel = std::uint64_t{setup.tp} * setup.pp;
    st.weights = ceil_div(st.weights, model_parallel);
    st.gradients = ceil_div(st.gradients, model_parallel);
    st.optimizer = ceil_div(st.optimizer, model_parallel);
    if (setup.zero >= 1) {
        st.optimizer = ceil_div(st.optimizer, setup.dp);
    }
    if (setup.zero >= 2) {
        st.gradients = ceil_div(st.gradients, setup.dp);
    }
    if (setup.zero >= 3) {
        st.weights = ceil_div(st.weights, setup.dp);
    }
    // ZeRO-Offload: the optimizer (fp32 master weights and states) on the CPU; with ZeRO-3 the
    // weights too, but the layer being gathered.
    if (setup.offload != Offload::none) {
        st.offloaded = st.optimizer;
        st.optimizer = 0;
    }
    if (setup.offload == Offload::all) {
        st.offloaded += st.weights;
        st.weights = 0;
    }
}

// The part of a layer's activations each tensor-parallel GPU keeps whole without sequence
// parallelism: the norms' inputs, the attention's and the MLP's inputs and the dropout masks
// (Korthikanti et al.'s 10·s·b·h in 16-bit); with full recompute, the layer's input.
std::uint64_t replicated_layer_bytes(const TransformerShape& shape, const TrainingSetup& setup)
{
    const std::uint64_t sh = std::uint64_t{shape.seq} * shape.hidden;
    const auto [e, residual] = element_bytes(setup.precision);
    if (setup.recompute == Recompute::full) {
        return sh * residual;
    }
    const std::uint64_t inputs =
        keeps_input(setup.lora, Lora::q | Lora::k | Lora::v) + keeps_input(setup.lora, Lora::gate | Lora::up);
    return sh * (2 * norm_bytes(shape, setup.precision, setup.lora) + e * inputs + (shape.dropout ? 2 : 0));
}

// An encoder-decoder model: the encoder's layers at seq (as computed into act by the caller), the
// decoder's at target_seq with cross-attention, and the encoder's output once.
void plan_encoder_decoder(const ModelSpec& model, const TrainingSetup& setup, ActivationBytes& act)
{
    const TransformerShape& shape = *model.transformer;
    if (shape.decoder_layers >= model.layers) {
        throw Error(fmt::format("model {}: {} decoder layers of {} layers leave no encoder layer", model.name,
            shape.decoder_layers, model.layers));
    }
    if (setup.framework != Framework::pytorch || setup.tp > 1 || setup.lora.rank > 0) {
        throw Error(fmt::format("model {}: encoder-decoder models are counted for PyTorch without --tp and "
                                "--lora-rank; give --activation-bytes-per-sample as measured",
            model.name));
    }
    const unsigned source = shape.seq;
    const unsigned target = shape.output_seq();
    TransformerShape decoder = shape;
    decoder.seq = target;
    auto decoder_layer = [&](Recompute recompute) {
        return transformer_layer_bytes(decoder, setup.precision, recompute, setup.attention) +
            cross_attention_bytes(shape, target, source, setup.precision, recompute, setup.attention);
    };
    const unsigned encoder_layers = model.layers - shape.decoder_layers;
    act.decoder_layers = shape.decoder_layers;
    act.decoder_per_layer = decoder_layer(setup.recompute);
    act.encoder_output = std::uint64_t{source} * shape.hidden * element_bytes(setup.precision).e;
    act.layers_total = act.per_layer * encoder_layers + act.decoder_per_layer * shape.decoder_layers;
    act.rebuilt_layer = std::max(act.rebuilt_layer, decoder_layer(Recompute::none) - act.decoder_per_layer);
}

// LoRA's states: the frozen weights in their bits, the adapters' weights, gradients and optimizer
// states at the precision's bytes; ZeRO shards the adapters' states as it would the model's.
void plan_lora(const ModelSpec& model, const TrainingSetup& setup, StateMemory& st)
{
    const Lora& lora = setup.lora;
    if (!model.transformer || model.activation_bytes || model.layers == 0) {
        throw Error(fmt::format("--lora-rank needs a transformer's shape (a transformer --model, --config, or "
                                "--layers, --hidden, --heads, --seq); {} has none",
            model.name));
    }
    if (setup.framework != Framework::pytorch) {
        throw Error("--lora-rank is for PyTorch (PEFT, Lightning, torchtune): leave out --framework tensorflow");
    }
    if (lora.base_bits != 16 && lora.base_bits != 8 && lora.base_bits != 4) {
        throw Error(fmt::format("--base-bits {}: expected 16, 8 or 4 (QLoRA's NF4)", lora.base_bits));
    }
    const TransformerShape& t = *model.transformer;
    if (lora.rank > t.hidden) {
        throw Error(fmt::format("--lora-rank {}: above the hidden size {}", lora.rank, t.hidden));
    }
    const std::uint64_t adapters = lora_layer_params(t, lora) * model.layers;
    if (adapters == 0) {
        throw Error(fmt::format("--lora-targets: {} has none of those projections (a plain MLP has up and down, "
                                "no gate)",
            model.name));
    }
    const std::uint64_t embeddings =
        std::min(model.params, model.embedding_params > 0 ? model.embedding_params : std::uint64_t{t.vocab} * t.hidden);
    const std::uint64_t projections = model.params - embeddings;
    // The frozen weights: 16-bit as the precision stores weights (fp32 and amp: fp32).
    const std::uint64_t wide = setup.precision == Precision::fp32 || setup.precision == Precision::amp ? 4 : 2;
    std::uint64_t frozen = model.params * wide;
    if (lora.base_bits == 8) {
        frozen = projections + embeddings * wide;
    } else if (lora.base_bits == 4) {
        frozen = projections / 2 + ceil_div(projections, 64) * 4 + embeddings * wide; // NF4, fp32 scale per 64
    }
    if (lora.base_bits < 16) {
        // One projection at a time is dequantized to 16-bit: the largest.
        const std::uint64_t inner = t.intermediate == 0 ? 4 * std::uint64_t{t.hidden} : t.intermediate;
        st.dequantized = 2 * std::uint64_t{t.hidden} * std::max<std::uint64_t>(inner, t.hidden);
    }
    st.adapter_params = adapters;
    st.frozen_weights = frozen;
    st.weights = frozen + st.per_param.weights * adapters;
    st.gradients = st.per_param.gradients * adapters;
    st.optimizer = st.per_param.optimizer * adapters;
    shard(st, setup);
    if (setup.zero >= 3) {
        st.zero3_gather = ceil_div(frozen, model.layers); // one layer's frozen weights, gathered
    }
}

} // namespace

namespace {

// The setup's input errors that do not depend on the activations.
void check_setup(const ModelSpec& model, const TrainingSetup& setup)
{
    if (model.params == 0) {
        throw Error(fmt::format("model {}: no parameter count; give --params (e.g. 350M or 7B)", model.name));
    }
    if (setup.zero > 3) {
        throw Error(fmt::format("--zero {}: expected a ZeRO stage, 0 to 3", setup.zero));
    }
    if (setup.dp == 0) {
        throw Error("--dp 0: expected the number of data-parallel GPUs, 1 or more");
    }
    if (setup.tp == 0 || setup.pp == 0) {
        throw Error(fmt::format("--{} 0: expected 1 or more GPUs", setup.tp == 0 ? "tp" : "pp"));
    }
    if (setup.offload == Offload::optimizer && setup.zero == 0) {
        throw Error("--offload optimizer needs ZeRO (--zero 1, 2 or 3): DeepSpeed offloads the ZeRO optimizer");
    }
    if (setup.offload == Offload::all && setup.zero != 3) {
        throw Error("--offload all moves the weights too, which needs --zero 3");
    }
    if (setup.tp > 1 && (!model.transformer || model.activation_bytes || setup.framework != Framework::pytorch)) {
        throw Error("--tp splits a transformer's layers (Megatron): give a transformer model, PyTorch");
    }
    if (setup.tp > 1 && model.transformer && model.transformer->heads % setup.tp != 0) {
        throw Error(
            fmt::format("--tp {}: the {} attention heads do not split evenly", setup.tp, model.transformer->heads));
    }
    if (setup.pp > 1 && model.layers > 0 && setup.pp > model.layers) {
        throw Error(fmt::format("--pp {}: more stages than the model's {} layers", setup.pp, model.layers));
    }
}

// Model states, sharded by ZeRO; the accumulation buffer and DDP's buckets.
void plan_states(const ModelSpec& model, const TrainingSetup& setup, MemoryPlan& plan)
{
    const std::uint64_t p = model.params;
    // Model states, sharded by ZeRO.
    StateMemory& st = plan.states;
    st.per_param = state_bytes(setup.precision, setup.optimizer, setup.framework);
    st.weights = st.per_param.weights * p;
    st.gradients = st.per_param.gradients * p;
    st.optimizer = st.per_param.optimizer * p;
    shard(st, setup);
    if (setup.zero >= 3) {
        if (model.layers > 0) {
            st.zero3_gather = ceil_div(2 * st.per_param.gradients * p, model.layers);
        } else {
            plan.findings.push_back(fit_finding("fit.zero3_gather_not_counted", "model",
                "ZeRO-3 also gathers one layer's weights and gradients at a time; not counted because the layer "
                "count is unknown"));
        }
    }
    if (setup.lora.rank > 0) {
        plan_lora(model, setup, st);
    }
    if (setup.grad_accum == 0) {
        throw Error("--grad-accum 0: expected the micro-batches per optimizer step, 1 or more");
    }
    const std::uint64_t trained = setup.lora.rank > 0 ? st.adapter_params : p;
    if (setup.grad_accum > 1) {
        // Sharded as the gradients are: by the model's split, and by ZeRO from stage 2.
        std::uint64_t buffer = ceil_div(accumulation_bytes(setup) * trained, std::uint64_t{setup.tp} * setup.pp);
        if (setup.zero >= 2) {
            buffer = ceil_div(buffer, setup.dp);
        }
        st.accumulation = buffer;
    }
    st.buckets = bucket_bytes(setup) * trained;
    if (setup.zero > 0 && setup.dp == 1) {
        plan.findings.push_back(fit_finding("fit.zero_over_one_gpu", "setup",
            fmt::format("ZeRO-{} over 1 data-parallel GPU shards nothing", setup.zero)));
    }
}

// A transformer shape the formulas can count: every size given, 64 bits enough, the heads dividing.
void check_transformer_shape(const ModelSpec& model, const TrainingSetup& setup)
{
    const TransformerShape& shape = *model.transformer;
    if (model.layers == 0 || shape.hidden == 0 || shape.heads == 0 || shape.seq == 0) {
        throw Error(fmt::format("model {}: the transformer shape needs layers, hidden, heads and seq, each 1 or "
                                "more",
            model.name));
    }
    if (setup.framework == Framework::tensorflow && setup.attention != Attention::eager) {
        throw Error(fmt::format("--attention {} with --framework tensorflow: TensorFlow's attention keeps its "
                                "scores; leave --attention out (eager)",
            to_string(setup.attention)));
    }
    {
        // Shapes whose byte counts would not fit in 64 bits are refused (about 10^18 bytes).
        const long double s = shape.seq;
        const long double h = shape.hidden;
        const long double inner = shape.intermediate == 0 ? 4 * h : shape.intermediate;
        const long double a = shape.heads;
        // An encoder-decoder's decoder runs at the target length t, its cross-attention over s.
        const long double t = shape.output_seq();
        const long double rough =
            static_cast<long double>(model.layers) * (s * h * 200 + s * inner * 40 + a * s * s * 20) +
            static_cast<long double>(shape.decoder_layers) *
                (t * h * 200 + t * inner * 40 + a * t * t * 20 + a * t * s * 20) +
            std::max(s, t) * static_cast<long double>(shape.vocab) * 16;
        if (rough > 1e18L) {
            throw Error(fmt::format("model {}: {} layers, hidden {}, {} heads at sequence {} need more than 10^18 "
                                    "bytes of activations per sample; check the shape",
                model.name, model.layers, shape.hidden, shape.heads, shape.seq));
        }
    }
    if (shape.hidden % shape.heads != 0) {
        throw Error(fmt::format(
            "model {}: hidden {} is not a multiple of its {} attention heads", model.name, shape.hidden, shape.heads));
    }
    if (shape.kv_heads > shape.heads || (shape.kv_heads > 0 && shape.heads % shape.kv_heads != 0)) {
        throw Error(fmt::format("model {}: {} key/value heads for {} attention heads; expected a divisor of the "
                                "heads",
            model.name, shape.kv_heads, shape.heads));
    }
}

// The formula as the text shows it, from the bytes one layer keeps per s·h.
std::string transformer_formula(const TransformerShape& shape, const TrainingSetup& setup, const ActivationBytes& act,
    std::uint64_t whole, std::uint64_t scores)
{
    const std::uint64_t s = shape.output_seq();
    const std::uint64_t sh = s * shape.hidden;
    const double per_sh = static_cast<double>(whole - scores) / static_cast<double>(sh);
    if (shape.decoder_layers > 0) {
        return fmt::format("encoder at s = {}, decoder at s = {} with cross-attention", shape.seq, s);
    }
    if (setup.recompute == Recompute::full) {
        return fmt::format("{:g}·s·h (the layer's input)", static_cast<double>(act.per_layer) / sh);
    }
    if (setup.attention != Attention::eager) {
        return fmt::format("{:.4g}·s·h + 4·a·s ({} attention keeps no s×s scores)", per_sh, to_string(setup.attention));
    }
    if (setup.recompute == Recompute::selective) {
        return fmt::format("{:.4g}·s·h (scores recomputed)", per_sh);
    }
    return fmt::format("{:.4g}·s·h + {:.4g}·a·s² (eager attention)", per_sh,
        static_cast<double>(scores) / (static_cast<double>(shape.heads) * s * s));
}

void plan_transformer_activations(const ModelSpec& model, const TrainingSetup& setup, MemoryPlan& plan)
{
    const TransformerShape& shape = *model.transformer;
    check_transformer_shape(model, setup);
    ActivationBytes& act = plan.activations;
    // One tensor-parallel GPU's share of a layer.
    auto per_gpu = [&](Recompute recompute) {
        TrainingSetup at = setup;
        at.recompute = recompute;
        const std::uint64_t layer =
            transformer_layer_bytes(shape, at.precision, recompute, at.attention, at.framework, at.lora);
        if (setup.tp == 1) {
            return layer;
        }
        const std::uint64_t whole_on_each = setup.sequence_parallel ? 0 : replicated_layer_bytes(shape, at);
        return whole_on_each + ceil_div(layer - whole_on_each, setup.tp);
    };
    act.per_layer = per_gpu(setup.recompute);
    act.layers_total = act.per_layer * model.layers;
    const std::uint64_t whole = per_gpu(Recompute::none);
    act.rebuilt_layer = whole - act.per_layer;
    if (shape.decoder_layers > 0) {
        plan_encoder_decoder(model, setup, act);
    }
    // The output layer runs over the decoder's tokens.
    const std::uint64_t s = shape.output_seq();
    act.output_layer = output_layer_bytes(shape, static_cast<unsigned>(s), setup);
    act.per_sample = act.layers_total + act.rebuilt_layer + act.output_layer + act.encoder_output;
    act.source = "transformer formula";
    // The scores as this GPU keeps them (its LoRA, its tensor-parallel share): what selective
    // recompute drops.
    const std::uint64_t scores = setup.attention == Attention::eager ? whole - per_gpu(Recompute::selective)
                                                                     : 4 * std::uint64_t{shape.heads} * s;
    act.formula = transformer_formula(shape, setup, act, whole, scores);
    if (setup.precision == Precision::fp32) {
        plan.findings.push_back(fit_finding("fit.fp32_activations", "model",
            "fp32 activations: the 16-bit formula's tensors at 4 bytes (dropout masks stay 1 byte)"));
    }
}

// A CNN preset's activations, as measured, with the allocator's transient share.
void plan_measured_activations(
    const ModelSpec& model, const TrainingSetup& setup, const Overheads& overheads, MemoryPlan& plan)
{
    ActivationBytes& act = plan.activations;
    if (setup.precision == Precision::fp32) {
        act.measured = model.measured_fp32 ? *model.measured_fp32 : 2 * *model.measured_16bit;
    } else {
        act.measured = model.measured_16bit ? *model.measured_16bit : *model.measured_fp32 / 2;
    }
    act.transient = scaled(act.measured, overheads.cnn_transient);
    act.per_sample = act.measured + act.transient;
    act.source = "measured";
    act.formula = fmt::format("tensors saved for backward{}, plus {:g} % held in the allocator's cache",
        model.image_size > 0 ? fmt::format(" at {0}×{0}", model.image_size) : "", overheads.cnn_transient * 100);
    if (setup.recompute != Recompute::none) {
        plan.findings.push_back(fit_finding("fit.recompute_not_counted", "model",
            fmt::format("--recompute {} is not counted for {}: its activations were measured without "
                        "recomputation",
                to_string(setup.recompute), model.name)));
    }
}

} // namespace

MemoryPlan plan_memory(const ModelSpec& model, const TrainingSetup& setup, const Overheads& overheads)
{
    check_setup(model, setup);
    MemoryPlan plan;
    plan.setup = setup;
    plan_states(model, setup, plan);

    // Activations per sample.
    ActivationBytes& act = plan.activations;
    if (model.activation_bytes) {
        act.per_sample = *model.activation_bytes;
        act.source = "given";
        act.formula = "as given (--activation-bytes-per-sample)";
    } else if (model.transformer) {
        plan_transformer_activations(model, setup, plan);
    } else if (model.measured_fp32 || model.measured_16bit) {
        plan_measured_activations(model, setup, overheads, plan);
    } else {
        throw Error(fmt::format("model {}: no way to count its activations; give the transformer shape (--layers, "
                                "--hidden, --heads, --seq) or --activation-bytes-per-sample",
            model.name));
    }
    if (act.per_sample == 0) {
        throw Error(
            fmt::format("model {}: zero activation bytes per sample; give --activation-bytes-per-sample", model.name));
    }
    plan.uncertainty = uncertainty_for(act.source, setup);
    return plan;
}

unsigned accumulation_bytes(const TrainingSetup& setup)
{
    if (setup.grad_accum <= 1) {
        return 0;
    }
    if (setup.framework == Framework::tensorflow || setup.precision == Precision::bf16) {
        return 4;
    }
    return 0;
}

bool has_ddp_buckets(const TrainingSetup& setup)
{
    const bool own_buffers = setup.precision == Precision::fp16 || setup.precision == Precision::bf16;
    return setup.framework == Framework::pytorch && setup.dp > 1 && setup.zero <= 1 && setup.offload == Offload::none &&
        setup.tp == 1 && setup.pp == 1 && !own_buffers;
}

unsigned bucket_bytes(const TrainingSetup& setup)
{
    return has_ddp_buckets(setup) && !setup.bucket_view
        ? state_bytes(setup.precision, setup.optimizer, setup.framework).gradients
        : 0;
}

std::string Uncertainty::basis() const
{
    return fmt::format("{}; {}", activations_basis, states_basis);
}

std::uint64_t Uncertainty::upper_states(std::uint64_t central) const
{
    return central + scaled(central, states);
}

std::uint64_t Uncertainty::upper_activations(std::uint64_t central) const
{
    return central + scaled(central, activations);
}

GpuFit fit_gpu(const MemoryPlan& plan, std::uint64_t memory, const Overheads& overheads)
{
    GpuFit fit;
    fit.memory = memory;
    fit.cuda_context = overheads.cuda_context;
    fit.workspaces = workspaces_for(plan.setup, overheads.gpu, overheads.workspace);
    fit.margin = static_cast<std::uint64_t>(static_cast<long double>(memory) * overheads.margin_fraction);
    const std::int64_t room = static_cast<std::int64_t>(memory) - static_cast<std::int64_t>(fit.cuda_context) -
        static_cast<std::int64_t>(fit.workspaces.total()) - static_cast<std::int64_t>(fit.margin);
    // floor((room − states) / per sample), 0 when nothing fits.
    auto batches = [&](std::uint64_t states, std::uint64_t per_sample) {
        const std::int64_t left = room - static_cast<std::int64_t>(states);
        if (left <= 0 || per_sample == 0) {
            return 0U;
        }
        return static_cast<unsigned>(std::min<std::uint64_t>(static_cast<std::uint64_t>(left) / per_sample, UINT_MAX));
    };
    const Uncertainty& u = plan.uncertainty;
    fit.states = u.upper_states(plan.states.total());
    fit.available = room - static_cast<std::int64_t>(fit.states);
    fit.max_batch = batches(fit.states, u.upper_activations(plan.activations.per_sample));
    fit.max_batch_central = batches(plan.states.total(), plan.activations.per_sample);
    return fit;
}

PeakMemory peak_at(const MemoryPlan& plan, unsigned batch, const Overheads& overheads)
{
    PeakMemory peak{batch, plan.states.total(), std::uint64_t{batch} * plan.activations.per_sample,
        overheads.cuda_context, workspaces_for(plan.setup, overheads.gpu, overheads.workspace)};
    // As fit_gpu counts them: batch × one sample's upper estimate.
    peak.states_upper = plan.uncertainty.upper_states(peak.states);
    peak.activations_upper = std::uint64_t{batch} * plan.uncertainty.upper_activations(plan.activations.per_sample);
    peak.cached = std::uint64_t{batch} * plan.activations.transient;
    return peak;
}

namespace {

// A changed setup keeps --bucket-view only where it still has DDP buckets to view.
TrainingSetup without_stale_view(TrainingSetup s)
{
    s.bucket_view = s.bucket_view && has_ddp_buckets(s);
    return s;
}

} // namespace

std::vector<Suggestion> suggest_changes(
    const ModelSpec& model, const TrainingSetup& setup, std::uint64_t memory, const Overheads& overheads)
{
    const bool formula = model.transformer && !model.activation_bytes;
    const bool lower_precision = setup.precision == Precision::fp32 || setup.precision == Precision::amp;
    // The loss in chunks keeps one chunk's gradients instead of the whole sequence's.
    const bool chunk_loss =
        counts_vocabulary(model) && setup.framework == Framework::pytorch && setup.loss == Loss::fp32;

    // Each change alone.
    std::vector<TrainingSetup> singles;
    // Selective recompute drops the s×s scores, which only eager attention keeps.
    if (formula && setup.recompute == Recompute::none && setup.attention == Attention::eager) {
        singles.push_back(setup);
        singles.back().recompute = Recompute::selective;
    }
    if (formula && setup.recompute != Recompute::full) {
        singles.push_back(setup);
        singles.back().recompute = Recompute::full;
    }
    if (setup.dp > 1) {
        for (unsigned stage = setup.zero + 1; stage <= 3; ++stage) {
            singles.push_back(setup);
            singles.back().zero = stage;
        }
    }
    if (lower_precision) {
        singles.push_back(setup);
        singles.back().precision = Precision::bf16;
    }
    if (chunk_loss) {
        singles.push_back(setup);
        singles.back().loss = Loss::chunked;
    }
    // DDP's buckets as views of the gradients instead of a copy.
    const bool bucket_copy = bucket_bytes(setup) > 0;
    if (bucket_copy) {
        singles.push_back(setup);
        singles.back().bucket_view = true;
    }
    std::vector<Suggestion> out;
    bool fits = false;
    for (auto& s : singles) {
        s = without_stale_view(s);
        out.push_back({change_text(setup, s), s, max_batch_of(model, s, memory, overheads)});
        fits = fits || out.back().max_batch > 0;
    }
    if (fits) {
        return out;
    }

    // All of them together.
    TrainingSetup all = setup;
    if (formula) {
        all.recompute = Recompute::full;
    }
    if (setup.dp > 1) {
        all.zero = 3;
    }
    if (lower_precision) {
        all.precision = Precision::bf16;
    }
    if (chunk_loss) {
        all.loss = Loss::chunked;
    }
    all = without_stale_view(all);
    const std::string together = change_text(setup, all);
    if (std::none_of(out.begin(), out.end(), [&](const Suggestion& s) { return s.change == together; })) {
        out.push_back({together, all, max_batch_of(model, all, memory, overheads)});
        if (out.back().max_batch > 0) {
            return out;
        }
    }

    // ZeRO-3 over more GPUs: the fewest that fit batch 1, first alone, then with the other changes.
    std::vector<TrainingSetup> sharded;
    TrainingSetup zero3 = setup;
    zero3.zero = 3;
    sharded.push_back(zero3);
    if (formula && setup.recompute != Recompute::full) {
        zero3.recompute = Recompute::full;
        sharded.push_back(zero3);
    }
    if (lower_precision) {
        zero3.precision = Precision::bf16;
        sharded.push_back(zero3);
    }
    constexpr unsigned most_gpus = 4096;
    unsigned fewest = most_gpus + 1;
    for (TrainingSetup s : sharded) {
        s = without_stale_view(s);
        for (unsigned dp = std::max(2u, setup.dp + 1); dp < fewest; ++dp) {
            s.dp = dp;
            const unsigned batch = max_batch_of(model, s, memory, overheads);
            if (batch > 0) {
                out.push_back({change_text(setup, s), s, batch});
                fewest = dp;
                break;
            }
        }
    }
    return out;
}

LrAdvice advise_lr(
    Optimizer optimizer, unsigned global_batch, std::optional<double> base_lr, std::optional<unsigned> base_batch)
{
    LrAdvice advice;
    advice.linear = optimizer == Optimizer::sgd || optimizer == Optimizer::momentum;
    advice.global_batch = global_batch;
    advice.base_lr = base_lr;
    advice.base_batch = base_batch;
    if (base_batch && *base_batch > 0) {
        const double k = static_cast<double>(global_batch) / *base_batch;
        advice.k = k;
        if (base_lr) {
            advice.lr = *base_lr * (advice.linear ? k : std::sqrt(k));
        }
    }
    if (global_batch > 8192) {
        const char* note = advice.linear
            ? "above a global batch of about 8k linear scaling stops holding (Goyal et al. went to 8k): consider LARS"
            : "at this global batch consider LAMB (Adam with layer-wise trust ratios)";
        advice.notes.emplace_back(note);
    }
    return advice;
}

std::uint64_t parse_param_count(std::string_view text, const std::string& what)
{
    auto bad = [&](const std::string& why) {
        return Error(fmt::format("{} {}: {}; write a count such as 7B, 350M, 125k or 1.5e9", what, text, why));
    };
    std::string_view number = text;
    double multiplier = 1;
    if (!number.empty()) {
        switch (number.back()) {
        case 'k':
        case 'K':
            multiplier = 1e3;
            break;
        case 'm':
        case 'M':
            multiplier = 1e6;
            break;
        case 'b':
        case 'B':
        case 'g':
        case 'G':
            multiplier = 1e9;
            break;
        case 't':
        case 'T':
            multiplier = 1e12;
            break;
        default:
            break;
        }
        if (multiplier != 1) {
            number.remove_suffix(1);
        }
    }
    // Digits, an optional fraction, an optional exponent; no sign, no hex, no inf or nan.
    if (number.empty() || number.find_first_not_of("0123456789.eE+-") != std::string_view::npos ||
        number.front() == '+' || number.front() == '-' || number.front() == 'e' || number.front() == 'E') {
        throw bad("not a parameter count");
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) {
        throw bad("not a parameter count");
    }
    const double count = std::round(value * multiplier);
    if (!std::isfinite(count) || count < 1) {
        throw bad("fewer than 1 parameter");
    }
    if (count > 1e15) {
        throw bad("more than 10^15 parameters");
    }
    return static_cast<std::uint64_t>(count);
}

std::string format_param_count(std::uint64_t params)
{
    static constexpr std::array<std::pair<double, const char*>, 4> units = {
        {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "k"}}};
    const auto p = static_cast<double>(params);
    for (const auto& [unit, suffix] : units) {
        if (p >= unit * 0.9995) {
            return fmt::format("{:.3g}{}", p / unit, suffix);
        }
    }
    return fmt::format("{}", params);
}

} // namespace doctor::fit
