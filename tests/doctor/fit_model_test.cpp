// The analytic fit against hand-computed cases; the arithmetic is in the comments.
#include "doctor/fit/model.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <tuple>

using namespace doctor::fit;

namespace {

constexpr std::uint64_t GiB = std::uint64_t{1} << 30;
constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

ModelSpec bert_large()
{
    ModelSpec m;
    m.name = "bert-large";
    m.params = 335141888;
    m.layers = 24;
    m.transformer = TransformerShape{1024, 16, 512, 30522};
    return m;
}

ModelSpec llama_7b()
{
    ModelSpec m;
    m.name = "llama-7b";
    m.params = 6738415616;
    m.layers = 32;
    m.transformer = TransformerShape{4096, 32, 4096, 32000};
    return m;
}

ModelSpec resnet50()
{
    ModelSpec m;
    m.name = "resnet50";
    m.params = 25557032;
    m.measured_fp32 = 85878374; // 81.9 MiB = 85,878,374.4 B
    m.measured_16bit = 43725619; // 41.7 MiB = 43,725,619.2 B
    m.image_size = 224;
    return m;
}

// Eager attention: the hand-computed cases below follow Korthikanti et al.'s count with its s² term.
TrainingSetup setup(Precision p, Optimizer o, unsigned zero = 0, unsigned dp = 1, Recompute r = Recompute::none)
{
    TrainingSetup s;
    s.precision = p;
    s.optimizer = o;
    s.zero = zero;
    s.dp = dp;
    s.recompute = r;
    s.attention = Attention::eager;
    return s;
}

} // namespace

TEST(FitModel, StateBytesPerParameter)
{
    struct Row {
        Precision p;
        Optimizer o;
        unsigned weights, gradients, optimizer, total;
    };
    const Row rows[] = {
        // fp32: 4 + 4 + states (momentum 4, Adam m and v 8).
        {Precision::fp32, Optimizer::sgd, 4, 4, 0, 8},
        {Precision::fp32, Optimizer::momentum, 4, 4, 4, 12},
        {Precision::fp32, Optimizer::adam, 4, 4, 8, 16},
        {Precision::fp32, Optimizer::adamw, 4, 4, 8, 16},
        // 16-bit weights and gradients, fp32 master (4) + states in the optimizer: ZeRO's 2 + 2 + 12.
        {Precision::fp16, Optimizer::sgd, 2, 2, 4, 8},
        {Precision::fp16, Optimizer::momentum, 2, 2, 8, 12},
        {Precision::fp16, Optimizer::adam, 2, 2, 12, 16},
        {Precision::bf16, Optimizer::adamw, 2, 2, 12, 16},
        // amp: fp32 weights + 16-bit copy (6), fp32 gradients (4): Hugging Face's 18 for AdamW.
        {Precision::amp, Optimizer::sgd, 6, 4, 0, 10},
        {Precision::amp, Optimizer::momentum, 6, 4, 4, 14},
        {Precision::amp, Optimizer::adam, 6, 4, 8, 18},
        {Precision::amp, Optimizer::adamw, 6, 4, 8, 18},
        // Pure 16-bit: no fp32 copies; torch.optim.AdamW keeps its states in the weights' dtype.
        {Precision::bf16_pure, Optimizer::sgd, 2, 2, 0, 4},
        {Precision::bf16_pure, Optimizer::momentum, 2, 2, 2, 6},
        {Precision::fp16_pure, Optimizer::adam, 2, 2, 4, 8},
        {Precision::bf16_pure, Optimizer::adamw, 2, 2, 4, 8},
        // 8-bit Adam: m and v in a byte each, whatever the precision; LAMB as Adam; Adafactor's
        // factored statistics count as nothing.
        {Precision::fp32, Optimizer::adam8bit, 4, 4, 2, 10},
        {Precision::amp, Optimizer::adam8bit, 6, 4, 2, 12},
        {Precision::bf16, Optimizer::adam8bit, 2, 2, 6, 10},
        {Precision::bf16_pure, Optimizer::adam8bit, 2, 2, 2, 6},
        {Precision::fp32, Optimizer::lamb, 4, 4, 8, 16},
        {Precision::fp16, Optimizer::lamb, 2, 2, 12, 16},
        {Precision::fp32, Optimizer::adafactor, 4, 4, 0, 8},
        {Precision::bf16, Optimizer::adafactor, 2, 2, 4, 8},
    };
    for (const auto& r : rows) {
        const StateBytes b = state_bytes(r.p, r.o);
        EXPECT_EQ(b.weights, r.weights) << to_string(r.p) << " " << to_string(r.o);
        EXPECT_EQ(b.gradients, r.gradients) << to_string(r.p) << " " << to_string(r.o);
        EXPECT_EQ(b.optimizer, r.optimizer) << to_string(r.p) << " " << to_string(r.o);
        EXPECT_EQ(b.total(), r.total) << to_string(r.p) << " " << to_string(r.o);
    }
}

TEST(FitModel, NamesRoundTrip)
{
    for (auto p : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::amp, Precision::fp16_pure,
             Precision::bf16_pure}) {
        EXPECT_EQ(precision_named(to_string(p)), p);
    }
    EXPECT_EQ(precision_named("bf16-pure"), Precision::bf16_pure);
    for (auto a : {Attention::eager, Attention::sdpa, Attention::flash}) {
        EXPECT_EQ(attention_named(to_string(a)), a);
    }
    EXPECT_EQ(attention_names(), (std::vector<std::string>{"eager", "sdpa", "flash"}));
    for (auto o : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam, Optimizer::adamw, Optimizer::adam8bit,
             Optimizer::adafactor, Optimizer::lamb}) {
        EXPECT_EQ(optimizer_named(to_string(o)), o);
    }
    for (auto r : {Recompute::none, Recompute::selective, Recompute::full}) {
        EXPECT_EQ(recompute_named(to_string(r)), r);
    }
    EXPECT_FALSE(precision_named("FP32"));
    EXPECT_FALSE(optimizer_named("lion"));
    EXPECT_FALSE(recompute_named(""));
}

TEST(FitModel, TransformerLayerBytes)
{
    // BERT-Large: s = 512, h = 1024, a = 16; s·h = 524,288, a·s² = 16 · 262,144 = 4,194,304.
    const TransformerShape shape{1024, 16, 512, 0};
    // 16-bit: 34 · 524,288 + 5 · 4,194,304 = 17,825,792 + 20,971,520 = 38,797,312
    // (s·h·(34 + 5·a·s/h) = 524,288 · (34 + 40)).
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::none), 38797312u);
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16_pure, Recompute::none), 38797312u);
    // amp: the norms' inputs in fp32 (8·s·h instead of 4·s·h), softmax and its dropout in fp32 with
    // a 16-bit copy for the product with V: (4 + 1 + 4 + 2)·a·s². 38 · 524,288 + 11 · 4,194,304 =
    // 19,922,944 + 46,137,344 = 66,060,288 (×1.70 the 16-bit count).
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::amp, Recompute::none), 66060288u);
    // fp32: 66 · 524,288 + 9 · 4,194,304 = 34,603,008 + 37,748,736 = 72,351,744.
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::fp32, Recompute::none), 72351744u);
    // Selective: 34 · s·h = 17,825,792; fp32 66 · s·h = 34,603,008.
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::fp16, Recompute::selective), 17825792u);
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::fp32, Recompute::selective), 34603008u);
    // Full: 2 · s·h = 1,048,576; fp32 4 · s·h = 2,097,152.
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::full), 1048576u);
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::fp32, Recompute::full), 2097152u);
    // amp keeps the fp32 residual stream: 4 · s·h.
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::amp, Recompute::full), 2097152u);
}

TEST(FitModel, SdpaAndFlashKeepNoScores)
{
    const TransformerShape shape{1024, 16, 512, 0};
    // 34 · s·h = 17,825,792, plus the softmax statistics 4·a·s = 4 · 16 · 512 = 32,768.
    for (auto a : {Attention::sdpa, Attention::flash}) {
        EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::none, a), 17858560u);
        // Selective recompute has nothing more to drop.
        EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::selective, a), 17858560u);
    }
    // The plan says which attention it counted.
    ModelSpec m = bert_large();
    TrainingSetup s = setup(Precision::bf16, Optimizer::adam);
    s.attention = Attention::flash;
    const MemoryPlan plan = plan_memory(m, s);
    EXPECT_EQ(plan.activations.per_layer, 17858560u);
    EXPECT_EQ(plan.activations.rebuilt_layer, 0u);
    EXPECT_NE(plan.activations.formula.find("flash attention keeps no s×s scores"), std::string::npos)
        << plan.activations.formula;
}

TEST(FitModel, GatedMlpAndGroupedQueryAttention)
{
    // A Llama-2-7B layer in bf16 with sdpa: s = h = 4096 (s·h = 16,777,216), a = 32, I = 11008, no
    // dropout. Attention: Q, its input and the output's input 3 · 2 · s·h = 100,663,296; K and V
    // 2 · s · 128 · 32 · 2 = 67,108,864. MLP: 2 · s · (h + 4·I) = 8,192 · 48,128 = 394,264,576.
    // Norms 2 · 2 · s·h = 67,108,864. Statistics 4 · 32 · 4096 = 524,288. Sum 629,669,888.
    TransformerShape llama{4096, 32, 4096, 32000};
    llama.intermediate = 11008;
    llama.gated_mlp = true;
    llama.dropout = false;
    EXPECT_EQ(transformer_layer_bytes(llama, Precision::bf16, Recompute::none, Attention::sdpa), 629669888u);
    // Mistral's 8 key/value heads with I = 14336: MLP 8,192 · (4096 + 57,344) = 503,316,480.
    // PyTorch's SDPA and eager attention get K and V repeated to the 32 heads (Hugging Face's
    // repeat_kv, LitGPT's and torchtune's copies) and keep the copies: 67,108,864 as with 32;
    // FlashAttention-2 takes the 8 heads as they are, 2 · s · 128 · 8 · 2 = 16,777,216.
    TransformerShape mistral = llama;
    mistral.kv_heads = 8;
    mistral.intermediate = 14336;
    EXPECT_EQ(transformer_layer_bytes(mistral, Precision::bf16, Recompute::none, Attention::sdpa),
        100663296u + 67108864u + 503316480u + 67108864u + 524288u);
    EXPECT_EQ(transformer_layer_bytes(mistral, Precision::bf16, Recompute::none, Attention::flash),
        100663296u + 16777216u + 503316480u + 67108864u + 524288u);
    EXPECT_EQ(transformer_layer_bytes(mistral, Precision::bf16, Recompute::selective, Attention::eager),
        100663296u + 67108864u + 503316480u + 67108864u);
    // Heads that do not divide the hidden size, or key/value heads that do not divide the heads,
    // are refused.
    ModelSpec m;
    m.name = "odd";
    m.params = 1000;
    m.layers = 2;
    m.transformer = mistral;
    m.transformer->kv_heads = 5;
    EXPECT_THROW(plan_memory(m, setup(Precision::bf16, Optimizer::adam)), base::Error);
    m.transformer->kv_heads = 8;
    m.transformer->heads = 30;
    EXPECT_THROW(plan_memory(m, setup(Precision::bf16, Optimizer::adam)), base::Error);
}

TEST(FitModel, TensorFlowKeepsFloatMasksAndTheGeluSteps)
{
    // A BERT-Base layer at s = 128 in fp32: 104·s·h + 12·a·s² = 104 · 98,304 + 12 · 12 · 16,384 =
    // 10,223,616 + 2,359,296 = 12,582,912. Per s·h: three dense inputs and Q 16, K and V 8, two
    // layer norms 8, two dropouts' float masks 8; the GELU's input, tanh and cdf and its output
    // 16·s·I = 64·s·h. The scores: the softmax, dropout's mask and its output, 12·a·s².
    const TransformerShape bert{768, 12, 128, 0};
    EXPECT_EQ(transformer_layer_bytes(bert, Precision::fp32, Recompute::none, Attention::eager, Framework::tensorflow),
        12582912u);
    // Without dropout: no masks, and the softmax's output is the matmul's input: 96·s·h + 4·a·s²
    // = 9,437,184 + 786,432 = 10,223,616.
    TransformerShape plain = bert;
    plain.dropout = false;
    EXPECT_EQ(transformer_layer_bytes(plain, Precision::fp32, Recompute::none, Attention::eager, Framework::tensorflow),
        10223616u);
    // PyTorch keeps 66·s·h + 9·a·s² of the same layer: 6,488,064 + 1,769,472 = 8,257,536.
    EXPECT_EQ(transformer_layer_bytes(bert, Precision::fp32, Recompute::none, Attention::eager), 8257536u);
    // The clipped copy of the gradients: 4 bytes more per parameter.
    const StateBytes tf = state_bytes(Precision::fp32, Optimizer::adam, Framework::tensorflow);
    EXPECT_EQ(tf.gradients, 8u);
    EXPECT_EQ(tf.total(), 20u);
    // TensorFlow's attention stores its scores: sdpa or flash with it is refused.
    ModelSpec m = bert_large();
    TrainingSetup s = setup(Precision::fp32, Optimizer::adam);
    s.framework = Framework::tensorflow;
    EXPECT_EQ(plan_memory(m, s).states.per_param.total(), 20u);
    s.attention = Attention::sdpa;
    EXPECT_THROW(plan_memory(m, s), base::Error);
}

TEST(FitModel, LoraAdaptersAndFrozenWeights)
{
    // Llama-2-7B's shape; PEFT prints "trainable params: 4,194,304" for rank 8 on q and v, and
    // 19,988,480 on every projection: per layer 8 · (4096 + 4096) · 4 + 8 · (4096 + 11,008) · 3.
    ModelSpec m = llama_7b();
    m.transformer->intermediate = 11008;
    m.transformer->gated_mlp = true;
    m.transformer->dropout = false;
    Lora qv;
    qv.rank = 8;
    EXPECT_EQ(lora_layer_params(*m.transformer, qv) * 32, 4194304u);
    Lora all = qv;
    std::string bad;
    all.targets = *lora_targets_named("all", bad);
    EXPECT_EQ(lora_layer_params(*m.transformer, all) * 32, 19988480u);
    EXPECT_EQ(lora_target_list(*lora_targets_named("v,q,down", bad)), (std::vector<std::string>{"q", "v", "down"}));
    EXPECT_FALSE(lora_targets_named("q,x", bad));
    EXPECT_EQ(bad, "x");

    // Frozen projections keep no input: with adapters on q and v the MLP keeps neither its input
    // nor down's, s·e·(h + I) = 4096 · 2 · 15,104 = 123,731,968 less than full training's
    // 629,669,888 (see GatedMlpAndGroupedQueryAttention), and the two adapters' middles 2 · s·r·e
    // = 131,072 more: 506,068,992.
    TransformerShape shape = *m.transformer;
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::none, Attention::sdpa), 629669888u);
    EXPECT_EQ(transformer_layer_bytes(shape, Precision::bf16, Recompute::none, Attention::sdpa, Framework::pytorch, qv),
        506068992u);
    // Over 8-bit weights bitsandbytes' MatMul8bitLt keeps every input that needs a gradient: the
    // MLP's and down's inputs come back, 123,731,968 more; its 4-bit MatMul4Bit keeps none.
    Lora int8 = qv;
    int8.base_bits = 8;
    EXPECT_EQ(
        transformer_layer_bytes(shape, Precision::bf16, Recompute::none, Attention::sdpa, Framework::pytorch, int8),
        506068992u + 123731968u);
    Lora nf4 = qv;
    nf4.base_bits = 4;
    EXPECT_EQ(
        transformer_layer_bytes(shape, Precision::bf16, Recompute::none, Attention::sdpa, Framework::pytorch, nf4),
        506068992u);
    // Under eager attention the frozen output projection keeps no input over 16-bit weights, and
    // keeps it, s·h·e = 33,554,432, over 8-bit ones (sdpa keeps its output anyway).
    const auto eager = [&](const Lora& l) {
        return transformer_layer_bytes(
            shape, Precision::bf16, Recompute::selective, Attention::eager, Framework::pytorch, l);
    };
    EXPECT_EQ(eager(int8) - eager(qv), 123731968u + 33554432u);

    // QLoRA: 6,738,415,616 parameters, 32000 × 4096 = 131,072,000 of them embeddings (kept 16-bit:
    // 262,144,000 B); the 6,607,343,616 others in NF4: half a byte each, 3,303,671,808, and an fp32
    // scale per 64, 412,958,976. Frozen: 3,978,774,784. Adapters at bf16-pure AdamW: 2 + 2 + 4 bytes.
    TrainingSetup s = setup(Precision::bf16_pure, Optimizer::adamw);
    s.attention = Attention::sdpa;
    s.lora = qv;
    s.lora.base_bits = 4;
    const MemoryPlan plan = plan_memory(m, s);
    EXPECT_EQ(plan.states.frozen_weights, 3978774784u);
    EXPECT_EQ(plan.states.adapter_params, 4194304u);
    EXPECT_EQ(plan.states.weights, 3978774784u + 2 * 4194304u);
    EXPECT_EQ(plan.states.gradients, 2 * 4194304u);
    EXPECT_EQ(plan.states.optimizer, 4 * 4194304u);
    // The largest projection dequantized while it computes: 2 · 4096 · 11,008.
    EXPECT_EQ(plan.states.dequantized, 90177536u);
    // The upper estimate of a 4-bit base: bitsandbytes before 0.43.2 kept each 4-bit layer's
    // input, and LitGPT's QLoRA runs held up to +94 % above the count; 16- and 8-bit bases keep
    // the formula's +40 %.
    EXPECT_EQ(plan.uncertainty.activations, 1.0);
    EXPECT_NE(std::string(plan.uncertainty.activations_basis).find("bitsandbytes#1270"), std::string::npos);
    EXPECT_EQ(plan.uncertainty.states, 0.05);
    // 16-bit base: every weight at 2 bytes, nothing dequantized.
    s.lora.base_bits = 16;
    EXPECT_EQ(plan_memory(m, s).states.frozen_weights, 2 * 6738415616u);
    EXPECT_EQ(plan_memory(m, s).states.dequantized, 0u);
    EXPECT_EQ(plan_memory(m, s).uncertainty.activations, 0.40);
    s.lora.base_bits = 8;
    EXPECT_EQ(plan_memory(m, s).uncertainty.activations, 0.40);
    s.lora.base_bits = 16;
    // The formula line under LoRA with eager attention: the scores alone make the a·s² term,
    // 2 bytes each in 16-bit without dropout (it once took full training's layer for LoRA's).
    s.attention = Attention::eager;
    const std::string formula = plan_memory(m, s).activations.formula;
    EXPECT_NE(formula.find(" + 2·a·s² (eager attention)"), std::string::npos) << formula;
    s.attention = Attention::sdpa;
    // Refused: other bits, a rank above the hidden size, targets the model lacks, a CNN.
    s.lora.base_bits = 3;
    EXPECT_THROW(plan_memory(m, s), base::Error);
    s.lora.base_bits = 4;
    s.lora.rank = 5000;
    EXPECT_THROW(plan_memory(m, s), base::Error);
    s.lora.rank = 8;
    s.lora.targets = Lora::gate;
    EXPECT_THROW(plan_memory(bert_large(), s), base::Error); // BERT's MLP has no gate
    s.lora.targets = Lora::q;
    EXPECT_THROW(plan_memory(resnet50(), s), base::Error);
}

TEST(FitModel, TensorPipelineParallelismAndOffload)
{
    // Korthikanti et al., Table 2, for BERT-Large's layer in 16-bit with eager attention (s·h =
    // 524,288, 5·a·s/h = 40): t = 4 without sequence parallelism keeps s·h·(10 + 24/4 + 40/4) =
    // 26 · 524,288 = 13,631,488; with it, s·h·(34 + 40)/4 = 9,699,328.
    TrainingSetup s = setup(Precision::bf16, Optimizer::adam);
    s.tp = 4;
    EXPECT_EQ(plan_memory(bert_large(), s).activations.per_layer, 13631488u);
    s.sequence_parallel = true;
    EXPECT_EQ(plan_memory(bert_large(), s).activations.per_layer, 9699328u);
    // States split over tp × pp = 8 GPUs: 16 B × 335,141,888 / 8 = 670,283,776.
    s.pp = 2;
    EXPECT_EQ(plan_memory(bert_large(), s).states.total(), 670283776u);
    // The heads must split over tp.
    s.tp = 3;
    EXPECT_THROW(plan_memory(bert_large(), s), base::Error);

    // ZeRO-Offload: ZeRO-2 over 8 with the optimizer on the CPU: GPU keeps 2P of weights and 2P/8
    // of gradients; the 12P/8 of master weights and states are offloaded.
    ModelSpec m;
    m.params = 1000000000;
    m.layers = 10;
    m.activation_bytes = 1;
    TrainingSetup z = setup(Precision::bf16, Optimizer::adam, 2, 8);
    z.offload = Offload::optimizer;
    const StateMemory z2 = plan_memory(m, z).states;
    EXPECT_EQ(z2.weights, 2000000000u);
    EXPECT_EQ(z2.gradients, 250000000u);
    EXPECT_EQ(z2.optimizer, 0u);
    EXPECT_EQ(z2.offloaded, 1500000000u);
    // ZeRO-3 with everything offloaded: the layer being gathered (2 · 2 B · P / 10) stays.
    z.zero = 3;
    z.offload = Offload::all;
    const StateMemory z3 = plan_memory(m, z).states;
    EXPECT_EQ(z3.weights, 0u);
    EXPECT_EQ(z3.offloaded, 1500000000u + 250000000u);
    EXPECT_EQ(z3.zero3_gather, 400000000u);
    // Offload needs ZeRO, and the weights' offload ZeRO-3.
    z.zero = 2;
    EXPECT_THROW(plan_memory(m, z), base::Error);
    z.zero = 0;
    z.offload = Offload::optimizer;
    EXPECT_THROW(plan_memory(m, z), base::Error);
}

TEST(FitModel, ShapesTooLargeToCountAreRefused)
{
    // 10^5 layers of hidden 10^5 at sequence 10^6: far past 64-bit byte counts.
    ModelSpec m;
    m.name = "huge";
    m.params = 1000;
    m.layers = 100000;
    m.transformer = TransformerShape{100000, 100, 1000000, 0};
    try {
        plan_memory(m, setup(Precision::bf16, Optimizer::adam));
        FAIL() << "no error";
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("more than 10^18 bytes of activations per sample"), std::string::npos)
            << e.what();
    }
}

TEST(FitModel, PeakAtABatch)
{
    // bert-large, amp Adam, eager: states 6,032,553,984; per sample 1,776,119,808 (see below).
    const MemoryPlan plan = plan_memory(bert_large(), setup(Precision::amp, Optimizer::adam));
    const PeakMemory p = peak_at(plan, 3);
    EXPECT_EQ(p.batch, 3u);
    EXPECT_EQ(p.states, 6032553984u);
    EXPECT_EQ(p.activations, std::uint64_t{3} * 1776119808u);
    EXPECT_EQ(p.cuda_context, 512 * MiB);
    // No GPU given: Hopper's cuBLAS workspaces, 2 × (32 MiB + 1 MiB), inside the allocator.
    EXPECT_EQ(p.workspaces.total(), 66 * MiB);
    EXPECT_EQ(p.total(), 6032553984u + std::uint64_t{3} * 1776119808u + 578 * MiB);
    EXPECT_EQ(p.allocated(), 6032553984u + std::uint64_t{3} * 1776119808u + 66 * MiB);
}

TEST(FitModel, BertLargeAmpAdamOn16GiB)
{
    const MemoryPlan plan = plan_memory(bert_large(), setup(Precision::amp, Optimizer::adam));
    // States: 18 B × 335,141,888 = 6,032,553,984 (weights 6 P, gradients 4 P, optimizer 8 P).
    EXPECT_EQ(plan.states.weights, 2010851328u);
    EXPECT_EQ(plan.states.gradients, 1340567552u);
    EXPECT_EQ(plan.states.optimizer, 2681135104u);
    EXPECT_EQ(plan.states.total(), 6032553984u);
    // Activations: 24 layers × 66,060,288 = 1,585,446,912; output layer: the final norm's fp32
    // input and the head's 16-bit one, 6·s·h = 3,145,728, and the fp32 loss (log-probabilities
    // and two gradients) 12·s·V = 12 · 512 · 30,522 = 187,527,168: 190,672,896; per sample
    // 1,776,119,808.
    EXPECT_EQ(plan.activations.per_layer, 66060288u);
    EXPECT_EQ(plan.activations.layers_total, 1585446912u);
    EXPECT_EQ(plan.activations.rebuilt_layer, 0u);
    EXPECT_EQ(plan.activations.output_layer, 190672896u);
    EXPECT_EQ(plan.activations.per_sample, 1776119808u);

    const GpuFit fit = fit_gpu(plan, 16 * GiB);
    // 16 GiB = 17,179,869,184; margin floor(10 %) = 1,717,986,918; context 536,870,912;
    // workspaces 69,206,016 (no GPU given: Hopper's cuBLAS). The upper estimate (PyTorch's
    // formula: states +5 %, activations +40 %): states 6,032,553,984 + 301,627,699 =
    // 6,334,181,683; one sample 1,776,119,808 + 710,447,923 = 2,486,567,731. Left:
    // 17,179,869,184 − 536,870,912 − 69,206,016 − 1,717,986,918 − 6,334,181,683 =
    // 8,521,623,655; / 2,486,567,731 = 3.43 → 3.
    EXPECT_EQ(plan.uncertainty.states, 0.05);
    EXPECT_EQ(plan.uncertainty.activations, 0.40);
    EXPECT_EQ(fit.margin, 1717986918u);
    EXPECT_EQ(fit.cuda_context, 512 * MiB);
    EXPECT_EQ(fit.workspaces.total(), 69206016u);
    EXPECT_EQ(fit.states, 6334181683u);
    EXPECT_EQ(fit.available, 8521623655);
    EXPECT_EQ(fit.max_batch, 3u);
    // The central estimate: (8,521,623,655 + 301,627,699) / 1,776,119,808 = 4.97 → 4.
    EXPECT_EQ(fit.max_batch_central, 4u);
    // The peak at batch 3, central and upper.
    const PeakMemory peak = peak_at(plan, 3);
    EXPECT_EQ(peak.total(), 6032553984ULL + 3 * 1776119808ULL + 578 * MiB);
    EXPECT_EQ(peak.upper(), 6334181683ULL + 3 * 2486567731ULL + 578 * MiB); // 3 × one sample's upper
}

TEST(FitModel, RmsNormKeepsItsInputInFp32)
{
    // As Hugging Face, LitGPT and torchtune write it: x.float() saved by pow and the rsqrt product,
    // and while the weight trains, the normalised output its product saves.
    TransformerShape t{4096, 32, 1024, 0, 0, 11008, true, false};
    EXPECT_EQ(norm_bytes(t, Precision::bf16_pure), 2u); // LayerNorm: its 16-bit input
    EXPECT_EQ(norm_bytes(t, Precision::amp), 4u);
    t.rms_norm = true;
    EXPECT_EQ(norm_bytes(t, Precision::bf16_pure), 4u + 2u);
    EXPECT_EQ(norm_bytes(t, Precision::fp16), 4u + 2u);
    EXPECT_EQ(norm_bytes(t, Precision::fp32), 4u + 4u);
    EXPECT_EQ(norm_bytes(t, Precision::amp), 4u + 4u);
    Lora lora;
    lora.rank = 8;
    // The weight frozen: no output kept, only the fp32 input, whatever the precision.
    EXPECT_EQ(norm_bytes(t, Precision::bf16_pure, lora), 4u);
    EXPECT_EQ(norm_bytes(t, Precision::fp32, lora), 4u);
    EXPECT_EQ(norm_bytes(t, Precision::amp, lora), 4u);
    // The final norm before the head counts the same, and the head's input is kept only while the
    // head trains: bf16-pure, s·h = 4,194,304, vocabulary 32,000 (12·s·V = 393,216,000).
    t.vocab = 32000;
    TrainingSetup full = setup(Precision::bf16_pure, Optimizer::adamw);
    EXPECT_EQ(output_layer_bytes(t, 1024, full), (6ULL + 2) * 4194304 + 393216000);
    TrainingSetup adapted = full;
    adapted.lora = lora;
    EXPECT_EQ(output_layer_bytes(t, 1024, adapted), 4ULL * 4194304 + 393216000);
    // An 8-bit head, frozen, keeps its 16-bit input all the same: its matmul keeps it.
    adapted.lora.base_bits = 8;
    EXPECT_EQ(output_layer_bytes(t, 1024, adapted), (4ULL + 2) * 4194304 + 393216000);
    t.vocab = 0;
    // A decoder's cross-attention has its own norm: RMSNorm's 8 bytes in fp32 where LayerNorm's 4.
    TransformerShape encoder_decoder = t;
    encoder_decoder.rms_norm = false;
    EXPECT_EQ(cross_attention_bytes(t, 128, 512, Precision::fp32, Recompute::none, Attention::sdpa) -
            cross_attention_bytes(encoder_decoder, 128, 512, Precision::fp32, Recompute::none, Attention::sdpa),
        4ULL * 128 * 4096);
    // A layer's two norms: s·h = 4,194,304; bf16-pure, sdpa, full training, LayerNorm 2 · 2 · s·h,
    // RMSNorm 2 · 6 · s·h: 33,554,432 more.
    TransformerShape layer_norm = t;
    layer_norm.rms_norm = false;
    EXPECT_EQ(transformer_layer_bytes(t, Precision::bf16_pure, Recompute::none, Attention::sdpa) -
            transformer_layer_bytes(layer_norm, Precision::bf16_pure, Recompute::none, Attention::sdpa),
        8ULL * 4194304);
    // Full recompute keeps the layer's input alone, whichever the norm.
    EXPECT_EQ(transformer_layer_bytes(t, Precision::bf16_pure, Recompute::full, Attention::sdpa), 2ULL * 4194304);
}

TEST(FitModel, TheLossSetsWhatTheOutputLayerHolds)
{
    // Llama 3.2 3B's head at 4096 tokens: s·h = 12,582,912, s·V = 4096 · 128,256 = 525,336,576.
    TransformerShape t{3072, 24, 4096, 128256, 8, 8192, true, false};
    TrainingSetup s = setup(Precision::bf16_pure, Optimizer::adamw);
    // Its input 4·s·h = 50,331,648; the fp32 loss (log-probabilities, the NLL's gradient and
    // log_softmax's gradient, 4 bytes each) 12·s·V = 6,304,038,912.
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 6304038912ULL);
    // Chunked: the logits and the chunks, 6·s·V = 3,152,019,456 in 16-bit.
    s.loss = Loss::chunked;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 3152019456ULL);
    // Fused: the fp32 softmax and its gradient cast to 16-bit, 6·s·V; over 4 tensor-parallel GPUs
    // each holds a quarter, 788,004,864.
    s.loss = Loss::fused;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 3152019456ULL);
    s.tp = 4;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 788004864ULL);
    // The fp32 loss keeps the logits whole on every tensor-parallel GPU (Hugging Face, torchtune).
    s.loss = Loss::fp32;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 6304038912ULL);
    // fp32 training: the input 8·s·h = 100,663,296; chunked, fp32 logits and log-probabilities
    // 8·s·V = 4,202,692,608; fused, the softmax alone 4·s·V = 2,101,346,304.
    s = setup(Precision::fp32, Optimizer::adamw);
    s.loss = Loss::chunked;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 100663296ULL + 4202692608ULL);
    s.loss = Loss::fused;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 100663296ULL + 2101346304ULL);
    // TensorFlow keeps its own count whatever the loss: the logits and the softmax, 8·s·V in
    // fp32, and with amp 16-bit logits and an fp32 softmax, 6·s·V = 3,152,019,456 (input 4·s·h).
    s.framework = Framework::tensorflow;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 100663296ULL + 4202692608ULL);
    s.precision = Precision::amp;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 50331648ULL + 3152019456ULL);
    // Over fewer tokens (a decoder's), and nothing without a vocabulary.
    s = setup(Precision::bf16_pure, Optimizer::adamw);
    EXPECT_EQ(output_layer_bytes(t, 128, s), 4ULL * 128 * 3072 + 12ULL * 128 * 128256);
    t.vocab = 0;
    EXPECT_EQ(output_layer_bytes(t, 4096, s), 0u);
    // The plan counts it once per sample.
    ModelSpec m;
    m.params = 3212749824;
    m.layers = 28;
    m.transformer = TransformerShape{3072, 24, 4096, 128256, 8, 8192, true, false};
    EXPECT_EQ(plan_memory(m, s).activations.output_layer, 50331648ULL + 6304038912ULL);
}

TEST(FitModel, Fp32ActivationsAndNoVocabulary)
{
    ModelSpec m = bert_large();
    m.transformer->vocab = 0;
    const MemoryPlan plan = plan_memory(m, setup(Precision::fp32, Optimizer::sgd));
    // 24 × 72,351,744 = 1,736,441,856; no output layer without a vocabulary.
    EXPECT_EQ(plan.activations.per_sample, 1736441856u);
    EXPECT_EQ(plan.activations.output_layer, 0u);
    // States: 8 B × 335,141,888 = 2,681,135,104.
    EXPECT_EQ(plan.states.total(), 2681135104u);
    // Says how fp32 activations are counted, as an info finding.
    ASSERT_EQ(plan.findings.size(), 1u);
    EXPECT_EQ(plan.findings[0].code, "fit.fp32_activations");
    EXPECT_EQ(plan.findings[0].severity, base::Severity::info);
}

TEST(FitModel, FullRecomputeKeepsLayerInputsAndRebuildsOneLayer)
{
    const MemoryPlan plan = plan_memory(llama_7b(), setup(Precision::bf16, Optimizer::adamw, 0, 1, Recompute::full));
    // s·h = 4096 · 4096 = 16,777,216; a·s² = 32 · 16,777,216 = 536,870,912.
    // Kept: 2 · s·h = 33,554,432 per layer, × 32 = 1,073,741,824.
    EXPECT_EQ(plan.activations.per_layer, 33554432u);
    EXPECT_EQ(plan.activations.layers_total, 1073741824u);
    // Rebuilt once: the full layer 34 · 16,777,216 + 5 · 536,870,912 = 570,425,344 + 2,684,354,560
    // = 3,254,779,904, less what is kept, 33,554,432: 3,221,225,472.
    EXPECT_EQ(plan.activations.rebuilt_layer, 3221225472u);
    // Output layer: its input 4 · 4096 · 4096 = 67,108,864 and the fp32 loss 12 · 4096 · 32,000 =
    // 1,572,864,000: 1,639,972,864.
    EXPECT_EQ(plan.activations.output_layer, 1639972864u);
    EXPECT_EQ(plan.activations.per_sample, 5934940160u);
}

TEST(FitModel, SelectiveRecomputeRebuildsTheAttentionScores)
{
    const MemoryPlan plan =
        plan_memory(bert_large(), setup(Precision::bf16, Optimizer::adam, 0, 1, Recompute::selective));
    // Kept 34·s·h = 17,825,792 per layer (× 24 = 427,819,008); rebuilt 5·a·s² = 20,971,520.
    EXPECT_EQ(plan.activations.layers_total, 427819008u);
    EXPECT_EQ(plan.activations.rebuilt_layer, 20971520u);
    // Output layer: 4·s·h = 2,097,152 and the fp32 loss 12 · 512 · 30,522 = 187,527,168.
    EXPECT_EQ(plan.activations.per_sample, 427819008u + 20971520u + 189624320u);
}

TEST(FitModel, ZeroStagesFollowThePaper)
{
    // Ψ = 10^9 parameters, mixed-precision Adam (K = 12), N_d = 8.
    ModelSpec m;
    m.params = 1000000000;
    m.layers = 10;
    m.activation_bytes = 1;
    // Stage 0: 16Ψ = 16e9.
    EXPECT_EQ(plan_memory(m, setup(Precision::fp16, Optimizer::adam, 0, 8)).states.total(), 16000000000u);
    // P_os: 4Ψ + KΨ/N_d = 4e9 + 1.5e9.
    EXPECT_EQ(plan_memory(m, setup(Precision::fp16, Optimizer::adam, 1, 8)).states.total(), 5500000000u);
    // P_os+g: 2Ψ + (2 + K)Ψ/N_d = 2e9 + 1.75e9.
    EXPECT_EQ(plan_memory(m, setup(Precision::fp16, Optimizer::adam, 2, 8)).states.total(), 3750000000u);
    // P_os+g+p: (4 + K)Ψ/N_d = 2e9, plus one layer gathered: 2 · 2 B · Ψ / 10 layers = 4e8.
    const MemoryPlan z3 = plan_memory(m, setup(Precision::fp16, Optimizer::adam, 3, 8));
    EXPECT_EQ(z3.states.weights + z3.states.gradients + z3.states.optimizer, 2000000000u);
    EXPECT_EQ(z3.states.zero3_gather, 400000000u);
    // fp32 gathers 4 B weights and 4 B gradients: 8 B · Ψ / 10 = 8e8.
    EXPECT_EQ(plan_memory(m, setup(Precision::fp32, Optimizer::adam, 3, 8)).states.zero3_gather, 800000000u);
}

TEST(FitModel, ZeroShardsRoundUpAndSayWhatTheyCannotCount)
{
    ModelSpec m;
    m.params = 3;
    m.activation_bytes = 1;
    // fp32 momentum: optimizer 4 · 3 = 12 B over 5 GPUs: ceil(12 / 5) = 3.
    const MemoryPlan plan = plan_memory(m, setup(Precision::fp32, Optimizer::momentum, 1, 5));
    EXPECT_EQ(plan.states.optimizer, 3u);
    EXPECT_EQ(plan.states.weights, 12u);
    // ZeRO-3 without a layer count: the gather is not counted, and a note says so.
    const MemoryPlan z3 = plan_memory(m, setup(Precision::fp32, Optimizer::momentum, 3, 5));
    EXPECT_EQ(z3.states.zero3_gather, 0u);
    ASSERT_FALSE(z3.findings.empty());
    EXPECT_EQ(z3.findings.front().code, "fit.zero3_gather_not_counted");
    EXPECT_NE(z3.findings.front().message.find("layer count is unknown"), std::string::npos);
    EXPECT_EQ(z3.findings.front().remedy, "give --layers");
    // ZeRO over one GPU shards nothing, and says so.
    const MemoryPlan one = plan_memory(m, setup(Precision::fp32, Optimizer::momentum, 2, 1));
    EXPECT_EQ(one.states.total(), 36u);
    ASSERT_FALSE(one.findings.empty());
    EXPECT_EQ(one.findings.back().code, "fit.zero_over_one_gpu");
    EXPECT_EQ(one.findings.back().severity, base::Severity::warn);
    EXPECT_NE(one.findings.back().message.find("shards nothing"), std::string::npos);
}

TEST(FitModel, MeasuredCnnActivationsGetTheTransientShare)
{
    // fp32: 85,878,374 + round(0.2 · 85,878,374 = 17,175,674.8) = 85,878,374 + 17,175,675 = 103,054,049.
    const MemoryPlan fp32 = plan_memory(resnet50(), setup(Precision::fp32, Optimizer::momentum));
    EXPECT_EQ(fp32.activations.measured, 85878374u);
    EXPECT_EQ(fp32.activations.transient, 17175675u);
    EXPECT_EQ(fp32.activations.per_sample, 103054049u);
    // 16-bit: 43,725,619 + round(8,745,123.8) = 52,470,743.
    EXPECT_EQ(plan_memory(resnet50(), setup(Precision::amp, Optimizer::momentum)).activations.per_sample, 52470743u);
    // Without a 16-bit measurement, half the fp32 one: 42,939,187 + round(8,587,837.4) = 51,527,024.
    ModelSpec m = resnet50();
    m.measured_16bit.reset();
    EXPECT_EQ(plan_memory(m, setup(Precision::bf16, Optimizer::momentum)).activations.per_sample, 51527024u);
    // Recompute is not modeled for measured activations: a note, the same bytes.
    const MemoryPlan rc = plan_memory(resnet50(), setup(Precision::fp32, Optimizer::momentum, 0, 1, Recompute::full));
    EXPECT_EQ(rc.activations.per_sample, 103054049u);
    ASSERT_FALSE(rc.findings.empty());
    EXPECT_EQ(rc.findings.back().code, "fit.recompute_not_counted");
    // The transient share is what nvidia-smi shows beyond the saved tensors (the allocator's cached
    // blocks): in the peak, not in what max_memory_allocated() shows. At batch 10, fp32 momentum
    // (12 × 25,557,032 = 306,684,384 B of states), no GPU named (66 MiB of cuBLAS workspaces):
    // allocated 306,684,384 + 858,783,740 + 69,206,016; the peak adds 171,756,750 and the context.
    const PeakMemory p = peak_at(fp32, 10);
    EXPECT_EQ(p.cached, 171756750u);
    EXPECT_EQ(p.allocated(), 306684384u + 858783740u + 69206016u);
    EXPECT_EQ(p.total(), p.allocated() + 171756750u + 512 * MiB);
    // The upper: states 306,684,384 + 5 % = 322,018,603; 10 × (103,054,049 + 10 %) = 1,133,594,540;
    // less the cached 171,756,750, with the workspaces: 1,353,062,409.
    EXPECT_EQ(p.allocated_upper(), 1353062409u);
    // A transformer's count has no such share: what it counts is allocated.
    const PeakMemory t = peak_at(plan_memory(bert_large(), setup(Precision::fp32, Optimizer::adam)), 2);
    EXPECT_EQ(t.cached, 0u);
    EXPECT_EQ(t.allocated(), t.states + t.activations + t.workspaces.allocated());
}

TEST(FitModel, ResNet50OnAV100)
{
    // V100 16 GB as NVML reports it: 16160 MiB = 16,944,988,160 B. fp32 momentum: 12 B ×
    // 25,557,032 = 306,684,384, +5 % = 322,018,603. Margin floor(1,694,498,816) = 1,694,498,816.
    // Workspaces at compute capability 7.0: 2 × (8,519,680 + 1,048,576) = 19,136,512.
    // Left: 16,944,988,160 − 536,870,912 − 19,136,512 − 1,694,498,816 − 322,018,603
    // = 14,372,463,317; / (103,054,049 + 10 % = 113,359,454) = 126.8 → 126.
    Overheads v100;
    v100.gpu.compute_capability = ComputeCapability{7, 0};
    const GpuFit fit = fit_gpu(plan_memory(resnet50(), setup(Precision::fp32, Optimizer::momentum)), 16160 * MiB, v100);
    EXPECT_EQ(fit.workspaces.total(), 19136512u);
    EXPECT_EQ(fit.available, 14372463317);
    EXPECT_EQ(fit.max_batch, 126u);
    // Central: (14,372,463,317 + 15,334,219) / 103,054,049 = 139.6 → 139.
    EXPECT_EQ(fit.max_batch_central, 139u);
}

TEST(FitModel, GivenActivationBytesAreUsedAsTheyAre)
{
    ModelSpec m = bert_large();
    m.activation_bytes = 1000 * MiB;
    const MemoryPlan plan = plan_memory(m, setup(Precision::fp32, Optimizer::adam));
    EXPECT_EQ(plan.activations.per_sample, 1000 * MiB);
    EXPECT_EQ(plan.activations.source, "given");
}

TEST(FitModel, NothingFitsWhenTheStatesDoNotFit)
{
    // llama-7b, bf16 AdamW: 16 × 6,738,415,616 = 107,814,649,856 B of states on a 24 GB GPU.
    const GpuFit fit = fit_gpu(plan_memory(llama_7b(), setup(Precision::bf16, Optimizer::adamw)), 24000000000u);
    EXPECT_LT(fit.available, 0);
    EXPECT_EQ(fit.max_batch, 0u);
}

TEST(FitModel, SuggestionsForLlama7bOn24GB)
{
    const auto changes = suggest_changes(llama_7b(), setup(Precision::bf16, Optimizer::adamw), 24000000000u);
    // Alone: selective and full recompute, the loss in chunks (no ZeRO with dp 1, nothing lower
    // than bf16), and the two that apply together: none fits. Then ZeRO-3 with full recompute over
    // the fewest GPUs, at the upper estimate (states +5 %, a sample's 5,934,940,160 +40 % =
    // 8,308,916,224). Over several GPUs the workspaces add NCCL's buffers: with no GPU known,
    // NVLink's 24 channels, 693,633,024, and Hopper's cuBLAS, 69,206,016. With 24e9 − 536,870,912
    // − 762,839,040 − 2.4e9 = 20,300,290,048 per GPU, less one sample: 11,991,373,824 ≥ 1.05 ·
    // (16 P / dp + the gathered layer, 4 B · P / 32 = 842,301,952) → 107,814,649,856 / dp ≤
    // 10,578,054,071 → dp ≥ 10.19 → 11. At dp 11: (20,300,290,048 − 1.05 · 10,643,633,757) /
    // 8,308,916,224 = 1.10 → batch 1.
    ASSERT_EQ(changes.size(), 5u);
    EXPECT_EQ(changes[0].change, "--recompute selective");
    EXPECT_EQ(changes[0].max_batch, 0u);
    EXPECT_EQ(changes[1].change, "--recompute full");
    EXPECT_EQ(changes[1].max_batch, 0u);
    EXPECT_EQ(changes[2].change, "--loss chunked");
    EXPECT_EQ(changes[2].setup.loss, Loss::chunked);
    EXPECT_EQ(changes[2].max_batch, 0u);
    EXPECT_EQ(changes[3].change, "--recompute full --loss chunked");
    EXPECT_EQ(changes[3].max_batch, 0u);
    EXPECT_EQ(changes[4].change, "--zero 3 --dp 11 --recompute full");
    EXPECT_EQ(changes[4].setup.dp, 11u);
    EXPECT_EQ(changes[4].max_batch, 1u);
}

TEST(FitModel, SuggestionsStopAtTheFirstThatFits)
{
    // bert-large fp32 Adam on 6 GiB: states 16 × P = 5,362,270,208 leave nothing.
    // --precision bf16 keeps 16 B/parameter; ZeRO-2 over 4 GPUs: 2P + 14P/4 = 1,843,280,384.
    const auto changes = suggest_changes(bert_large(), setup(Precision::fp32, Optimizer::adam, 0, 4), 6 * GiB);
    bool some = false;
    for (const auto& c : changes) {
        some = some || c.max_batch > 0;
        EXPECT_EQ(c.change.find("--dp"), std::string::npos) << c.change; // no dp search when one change fits
    }
    EXPECT_TRUE(some);
    // 6 GiB − 512 MiB − 644,245,094 − the workspaces over 4 GPUs (no GPU known: Hopper's cuBLAS
    // 69,206,016 and NCCL's 693,633,024 over NVLink) = 4,498,495,898. ZeRO-2 over 4: 4P + 12P/4 =
    // 7P = 2,345,993,216, leaving 2,152,502,682. ZeRO-3 over 4: 16P/4 = 1,340,567,552 plus the
    // layer gathered, 8 · P / 24 = 111,713,963. fp32 per sample: 24 × 72,351,744 + 8 · 512 · 1024
    // + 12 · 512 · 30,522 = 1,736,441,856 + 191,721,472 = 1,928,163,328, at the upper estimate
    // 2,699,428,659; with the states' +5 %, ZeRO-3 leaves 2,973,600,307: batch 1.
    const auto zero3 =
        std::find_if(changes.begin(), changes.end(), [](const Suggestion& c) { return c.change == "--zero 3"; });
    ASSERT_NE(zero3, changes.end());
    EXPECT_EQ(zero3->max_batch, 1u);
    const auto zero1 =
        std::find_if(changes.begin(), changes.end(), [](const Suggestion& c) { return c.change == "--zero 1"; });
    ASSERT_NE(zero1, changes.end());
    EXPECT_EQ(zero1->max_batch, 0u); // DDP's buckets stay: 4P + 4P + 8P/4 + 4P = 14P, more than the room
}

TEST(FitModel, LinearScalingForSgd)
{
    // k = 1024 / 256 = 4; lr = 0.1 × 4 = 0.4.
    const LrAdvice lr = advise_lr(Optimizer::momentum, 1024, 0.1, 256);
    EXPECT_TRUE(lr.linear);
    EXPECT_DOUBLE_EQ(*lr.k, 4.0);
    EXPECT_DOUBLE_EQ(*lr.lr, 0.4);
    EXPECT_EQ(lr.warmup_epochs, 5u);
    EXPECT_TRUE(lr.notes.empty());
}

TEST(FitModel, SquareRootScalingForAdam)
{
    // k = 256 / 32 = 8; lr = 1e-4 × √8 = 2.8284e-4.
    const LrAdvice lr = advise_lr(Optimizer::adamw, 256, 1e-4, 32);
    EXPECT_FALSE(lr.linear);
    EXPECT_DOUBLE_EQ(*lr.k, 8.0);
    EXPECT_NEAR(*lr.lr, 2.8284271247e-4, 1e-12);
}

TEST(FitModel, LrAdviceWithoutBaseValuesAndAtLargeBatches)
{
    const LrAdvice none = advise_lr(Optimizer::sgd, 512);
    EXPECT_FALSE(none.k);
    EXPECT_FALSE(none.lr);
    // A base batch alone gives k, not a learning rate.
    const LrAdvice k = advise_lr(Optimizer::sgd, 512, std::nullopt, 256);
    EXPECT_DOUBLE_EQ(*k.k, 2.0);
    EXPECT_FALSE(k.lr);
    EXPECT_FALSE(advise_lr(Optimizer::sgd, 16384).notes.empty()); // LARS beyond 8k
    EXPECT_FALSE(advise_lr(Optimizer::adam, 16384).notes.empty()); // LAMB
}

TEST(FitModel, ParsesParameterCounts)
{
    EXPECT_EQ(parse_param_count("7B", "--params"), 7000000000u);
    EXPECT_EQ(parse_param_count("7b", "--params"), 7000000000u);
    EXPECT_EQ(parse_param_count("7G", "--params"), 7000000000u);
    EXPECT_EQ(parse_param_count("350M", "--params"), 350000000u);
    EXPECT_EQ(parse_param_count("1.5e9", "--params"), 1500000000u);
    EXPECT_EQ(parse_param_count("125k", "--params"), 125000u);
    EXPECT_EQ(parse_param_count("1.3T", "--params"), 1300000000000u);
    EXPECT_EQ(parse_param_count("6738415616", "--params"), 6738415616u);
    EXPECT_EQ(parse_param_count("2.5", "--params"), 3u); // rounded
    for (const char* bad : {"", "B", "-1", "+1", "1e", "abc", "7Q", "inf", "nan", "0", "0.4", "1e16", "7 B", "e9"}) {
        EXPECT_THROW(parse_param_count(bad, "--params"), base::Error) << bad;
    }
}

TEST(FitModel, FormatsParameterCounts)
{
    EXPECT_EQ(format_param_count(335141888), "335M");
    EXPECT_EQ(format_param_count(6738415616), "6.74B");
    EXPECT_EQ(format_param_count(25557032), "25.6M");
    EXPECT_EQ(format_param_count(124439808), "124M");
    EXPECT_EQ(format_param_count(999), "999");
    EXPECT_EQ(format_param_count(1000), "1k");
    EXPECT_EQ(format_param_count(999999), "1M");
}

TEST(FitModel, RefusesWhatItCannotCount)
{
    ModelSpec none;
    none.params = 1000;
    EXPECT_THROW(plan_memory(none, setup(Precision::fp32, Optimizer::sgd)), base::Error);
    ModelSpec no_params = bert_large();
    no_params.params = 0;
    EXPECT_THROW(plan_memory(no_params, setup(Precision::fp32, Optimizer::sgd)), base::Error);
    EXPECT_THROW(plan_memory(bert_large(), setup(Precision::fp32, Optimizer::sgd, 4, 8)), base::Error);
    EXPECT_THROW(plan_memory(bert_large(), setup(Precision::fp32, Optimizer::sgd, 1, 0)), base::Error);
    ModelSpec no_layers = bert_large();
    no_layers.layers = 0;
    EXPECT_THROW(plan_memory(no_layers, setup(Precision::fp32, Optimizer::sgd)), base::Error);
}

TEST(FitModel, TheMaxBatchIsWhereTheUpperEstimateFits)
{
    // google-research/bert, TensorFlow 1.11 on a 12 GB Titan X (12189 MiB), fine-tuning with Adam
    // in fp32: BERT-Large runs batch 1 at sequence 320 and nothing at 384. The counts alone
    // (states 20 B × 335,141,888 = 6,702,837,760; 24 × (104·s·h + 12·a·s²) per sample, 1.55 GiB
    // at 384) leave room for batch 1 at 384; the upper estimate (states +25 %, activations
    // +40 %) does not.
    ModelSpec m = bert_large();
    m.transformer->vocab = 0;
    TrainingSetup s = setup(Precision::fp32, Optimizer::adam);
    s.framework = Framework::tensorflow;
    const std::uint64_t titan_x = 12189 * MiB;
    Overheads pascal; // TensorFlow keeps 500 MiB from its allocator at compute capability 6.1
    pascal.gpu.compute_capability = ComputeCapability{6, 1};
    for (const auto& [seq, upper, central] : {std::tuple{320U, 1U, 2U}, std::tuple{384U, 0U, 2U}}) {
        m.transformer->seq = seq;
        const MemoryPlan plan = plan_memory(m, s);
        EXPECT_EQ(plan.uncertainty.states, 0.25);
        EXPECT_EQ(plan.uncertainty.activations, 0.40);
        const GpuFit fit = fit_gpu(plan, titan_x, pascal);
        EXPECT_EQ(fit.workspaces.total(), 500 * MiB);
        EXPECT_EQ(fit.max_batch, upper) << "seq " << seq;
        EXPECT_EQ(fit.max_batch_central, central) << "seq " << seq;
    }
    // The upper estimate never allows more than the central one, whatever the GPU.
    m.transformer->seq = 128;
    const MemoryPlan plan = plan_memory(m, s);
    for (std::uint64_t gib = 1; gib <= 200; gib += 7) {
        const GpuFit fit = fit_gpu(plan, gib * GiB);
        EXPECT_LE(fit.max_batch, fit.max_batch_central) << gib << " GiB";
    }
    // Activations as the user measured them carry no activation uncertainty.
    ModelSpec given = bert_large();
    given.activation_bytes = 100 * MiB;
    const MemoryPlan g = plan_memory(given, setup(Precision::fp32, Optimizer::adam));
    EXPECT_EQ(g.uncertainty.activations, 0.0);
    EXPECT_EQ(fit_gpu(g, 40 * GiB).states, g.states.total() + g.states.total() / 20);
}

TEST(FitModel, GradientAccumulationAddsABufferWhereTheGradientsAreNarrower)
{
    // One micro-batch: no buffer, whatever the setup.
    TrainingSetup s = setup(Precision::bf16, Optimizer::adamw);
    EXPECT_EQ(accumulation_bytes(s), 0u);
    s.grad_accum = 4;
    // bf16 gradients add up in fp32 (DeepSpeed's BF16_Optimizer, Megatron's main_grad).
    EXPECT_EQ(accumulation_bytes(s), 4u);
    // PyTorch adds into the .grad it keeps anyway.
    for (Precision p : {Precision::fp32, Precision::amp, Precision::fp16, Precision::bf16_pure, Precision::fp16_pure}) {
        s.precision = p;
        EXPECT_EQ(accumulation_bytes(s), 0u) << to_string(p);
    }
    // TensorFlow keeps an fp32 variable per weight.
    s.precision = Precision::fp32;
    s.framework = Framework::tensorflow;
    EXPECT_EQ(accumulation_bytes(s), 4u);

    // llama-7b, bf16 AdamW, 4 micro-batches, ZeRO-2 over 4 GPUs: 4 B × 6,738,415,616 / 4 =
    // 6,738,415,616 bytes, on top of the 16 B per parameter sharded as before.
    TrainingSetup z = setup(Precision::bf16, Optimizer::adamw, 2, 4, Recompute::full);
    const MemoryPlan one = plan_memory(llama_7b(), z);
    z.grad_accum = 4;
    const MemoryPlan four = plan_memory(llama_7b(), z);
    EXPECT_EQ(one.states.accumulation, 0u);
    EXPECT_EQ(four.states.accumulation, 6738415616u);
    EXPECT_EQ(four.states.total(), one.states.total() + 6738415616u);
    // ZeRO-1 does not shard it.
    z.zero = 1;
    EXPECT_EQ(plan_memory(llama_7b(), z).states.accumulation, 4 * 6738415616ULL);
    // With LoRA only the adapters train: rank 8 on q and v, 32 layers × 2 × (4096·8 + 8·4096)
    // = 4,194,304 parameters, 16,777,216 bytes.
    z.zero = 0;
    z.dp = 1;
    z.lora.rank = 8;
    EXPECT_EQ(plan_memory(llama_7b(), z).states.accumulation, 16777216u);
    z.grad_accum = 0;
    EXPECT_THROW(plan_memory(llama_7b(), z), base::Error);
}

TEST(FitModel, DdpBucketsCopyTheGradients)
{
    // One GPU: no DDP, no buckets.
    TrainingSetup s = setup(Precision::fp32, Optimizer::adamw);
    EXPECT_EQ(bucket_bytes(s), 0u);
    // Over 2: torch's DDP copies each fp32 gradient into its bucket.
    s.dp = 2;
    EXPECT_EQ(bucket_bytes(s), 4u);
    s.precision = Precision::amp; // autocast keeps fp32 gradients
    EXPECT_EQ(bucket_bytes(s), 4u);
    for (Precision p : {Precision::bf16_pure, Precision::fp16_pure}) {
        s.precision = p;
        EXPECT_EQ(bucket_bytes(s), 2u) << to_string(p);
    }
    // DeepSpeed's and Megatron's mixed precision reduce from their own gradient buffers.
    for (Precision p : {Precision::bf16, Precision::fp16}) {
        s.precision = p;
        EXPECT_EQ(bucket_bytes(s), 0u) << to_string(p);
    }
    s.precision = Precision::fp32;
    // ZeRO-1 as torch's ZeroRedundancyOptimizer keeps the DDP model and its buckets.
    s.zero = 1;
    EXPECT_EQ(bucket_bytes(s), 4u);
    s.zero = 0;
    // Not torch's DDP: ZeRO-2 and -3 (FSDP), tensor or pipeline parallelism, TensorFlow; or the
    // views asked for.
    for (auto change : std::initializer_list<void (*)(TrainingSetup&)>{[](TrainingSetup& t) { t.zero = 2; },
             [](TrainingSetup& t) { t.zero = 3; }, [](TrainingSetup& t) { t.tp = 2; },
             [](TrainingSetup& t) { t.pp = 2; }, [](TrainingSetup& t) { t.framework = Framework::tensorflow; },
             [](TrainingSetup& t) { t.bucket_view = true; }}) {
        TrainingSetup t = s;
        change(t);
        EXPECT_EQ(bucket_bytes(t), 0u);
    }
    // With the views DDP still runs, its buckets being the gradients.
    TrainingSetup viewed_ddp = s;
    viewed_ddp.bucket_view = true;
    EXPECT_TRUE(has_ddp_buckets(viewed_ddp));
    viewed_ddp.zero = 2;
    EXPECT_FALSE(has_ddp_buckets(viewed_ddp));

    // bert-large, fp32 AdamW over 4 GPUs: 4 B × 335,141,888 = 1,340,567,552 bytes on top of the
    // 16 B per parameter; the views take them away again.
    TrainingSetup four = setup(Precision::fp32, Optimizer::adamw, 0, 4);
    const MemoryPlan copied = plan_memory(bert_large(), four);
    EXPECT_EQ(copied.states.buckets, 1340567552u);
    EXPECT_EQ(copied.states.total(), 20 * 335141888ULL);
    four.bucket_view = true;
    EXPECT_EQ(plan_memory(bert_large(), four).states.total(), 16 * 335141888ULL);
    // The recipe's model of tests/data/fit_published.tsv: 80,040,000 fp32 parameters, whose DDP
    // wrapping took 656 − 335 = 321 MB: its buckets, 320,160,000 bytes here.
    ModelSpec linears;
    linears.name = "20 linears";
    linears.params = 80040000;
    linears.activation_bytes = 176000;
    EXPECT_EQ(plan_memory(linears, setup(Precision::fp32, Optimizer::adam, 0, 2)).states.buckets, 320160000u);
    EXPECT_EQ(plan_memory(linears, setup(Precision::fp32, Optimizer::adam, 1, 2)).states.buckets, 320160000u);
    // With LoRA only the adapters' gradients go through the buckets: llama-7b, rank 8 on q and v,
    // 4,194,304 parameters in bf16-pure, 2 B each.
    TrainingSetup lora = setup(Precision::bf16_pure, Optimizer::adamw, 0, 8);
    lora.lora.rank = 8;
    EXPECT_EQ(plan_memory(llama_7b(), lora).states.buckets, 2 * 4194304u);

    // When nothing fits, the views are among the changes tried. bert-large fp32 AdamW over 4 GPUs
    // of 11 GB: 9.9e9 − 1,299,709,952 = 8,600,290,048 left after the margin, context (536,870,912)
    // and workspaces (no GPU known: Hopper's cuBLAS 69,206,016 and NVLink's NCCL 693,633,024); a
    // sample's upper estimate is 2,699,428,659 (SuggestionsStopAtTheFirstThatFits).
    // With the buckets the states' upper estimate, 1.05 · 20P = 7,037,979,648, leaves no sample;
    // with the views, 1.05 · 16P = 5,630,383,718 leaves one.
    const TrainingSetup ddp = setup(Precision::fp32, Optimizer::adamw, 0, 4);
    EXPECT_EQ(fit_gpu(plan_memory(bert_large(), ddp), 11000000000u).max_batch, 0u);
    const auto changes = suggest_changes(bert_large(), ddp, 11000000000u);
    const auto view =
        std::find_if(changes.begin(), changes.end(), [](const Suggestion& c) { return c.change == "--bucket-view"; });
    ASSERT_NE(view, changes.end());
    EXPECT_TRUE(view->setup.bucket_view);
    EXPECT_EQ(view->max_batch, 1u);

    // With --bucket-view given, a change that leaves no DDP buckets drops it, and says so; ZeRO-1
    // keeps it. bert-large fp32 AdamW over 4 GPUs of 6 GiB: nothing fits even with the views.
    TrainingSetup viewed = ddp;
    viewed.bucket_view = true;
    bool zero1 = false;
    for (const auto& c : suggest_changes(bert_large(), viewed, 6 * GiB)) {
        TrainingSetup copy = c.setup;
        copy.bucket_view = false;
        EXPECT_EQ(c.setup.bucket_view, bucket_bytes(copy) > 0) << c.change;
        EXPECT_EQ(c.change.find("without --bucket-view") != std::string::npos, !c.setup.bucket_view) << c.change;
        zero1 = zero1 || (c.change == "--zero 1" && c.setup.bucket_view);
    }
    EXPECT_TRUE(zero1);
}

TEST(FitModel, EncoderDecoderLayersAndTheCrossAttention)
{
    // t5-base's shape: 12 encoder layers at s = 512, 12 decoder layers at 128, h = 768, a = 12,
    // MLP 3072, dropout, vocabulary 32128; fp32, eager attention.
    ModelSpec m;
    m.name = "t5-base";
    m.params = 222903552;
    m.layers = 24;
    m.transformer = TransformerShape{768, 12, 512, 32128, 0, 3072};
    m.transformer->decoder_layers = 12;
    m.transformer->target_seq = 128;
    const TrainingSetup s = setup(Precision::fp32, Optimizer::adamw);
    // An encoder layer as any layer at s = 512: QKV input, Q, output input 3·s·h·4 = 4,718,592;
    // K and V 3,145,728; mask 393,216; MLP 4·s·(h + 2·3072) + mask = 14,548,992; norms 3,145,728;
    // scores 12 · 512² · 9 = 28,311,552: 54,263,808.
    // Cross-attention at t = 128 over 512: query input, Q, output input 3·t·h·4 = 1,179,648; K and
    // V over the source 2 · 512 · 768 · 4 = 3,145,728; mask 98,304; norm 393,216; scores
    // 12 · 128 · 512 · 9 = 7,077,888: 11,894,784. The decoder layer adds its self-attention layer
    // at 128 (8,257,536): 20,152,320.
    EXPECT_EQ(
        cross_attention_bytes(*m.transformer, 128, 512, Precision::fp32, Recompute::none, Attention::eager), 11894784u);
    const MemoryPlan plan = plan_memory(m, s);
    EXPECT_EQ(plan.activations.per_layer, 54263808u);
    EXPECT_EQ(plan.activations.decoder_layers, 12u);
    EXPECT_EQ(plan.activations.decoder_per_layer, 20152320u);
    // The encoder's output, 512 · 768 · 4, kept once; the output layer over the 128 target tokens,
    // 8 · 128 · 768 + 12 · 128 · 32128 = 50,135,040.
    EXPECT_EQ(plan.activations.encoder_output, 1572864u);
    EXPECT_EQ(plan.activations.output_layer, 50135040u);
    EXPECT_EQ(plan.activations.layers_total, 12 * 54263808ULL + 12 * 20152320ULL);
    EXPECT_EQ(plan.activations.per_sample, 12 * 54263808ULL + 12 * 20152320ULL + 1572864 + 50135040);

    // sdpa keeps the softmax statistics instead of the scores: 4 · 12 · 128 in the cross-attention.
    EXPECT_EQ(cross_attention_bytes(*m.transformer, 128, 512, Precision::fp32, Recompute::none, Attention::sdpa),
        11894784u - 7077888u + 4 * 12 * 128);
    // Full recompute: each layer keeps its input, the encoder's output is kept once, and the
    // largest layer is rebuilt during its backward (the encoder's, 54,263,808 − 1,572,864).
    TrainingSetup full = s;
    full.recompute = Recompute::full;
    const MemoryPlan r = plan_memory(m, full);
    EXPECT_EQ(r.activations.per_layer, 512 * 768 * 4u);
    EXPECT_EQ(r.activations.decoder_per_layer, 128 * 768 * 4u);
    EXPECT_EQ(r.activations.rebuilt_layer, 54263808u - 1572864u);

    // A target length whose counts would not fit in 64 bits is refused like a long sequence.
    ModelSpec huge = m;
    huge.transformer->target_seq = 4000000000U;
    EXPECT_THROW(plan_memory(huge, s), base::Error);
    // No encoder layer left, TensorFlow and LoRA are refused.
    ModelSpec all_decoder = m;
    all_decoder.transformer->decoder_layers = 24;
    EXPECT_THROW(plan_memory(all_decoder, s), base::Error);
    TrainingSetup tf = s;
    tf.framework = Framework::tensorflow;
    EXPECT_THROW(plan_memory(m, tf), base::Error);
    TrainingSetup lora = s;
    lora.lora.rank = 8;
    EXPECT_THROW(plan_memory(m, lora), base::Error);
}
