#include "doctor/fit/report.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "doctor/fit/codes.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

namespace doctor::fit {

namespace {

using base::format_bytes;

bool all_equal(const std::vector<double>& values)
{
    return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
}

// Whether --loss changes the count: a PyTorch transformer's output layer over a vocabulary.
bool counts_loss(const FitRequest& q)
{
    return q.setup.framework == Framework::pytorch && counts_vocabulary(q.model);
}

// What the output layer's row counts, by how the loss runs.
std::string output_layer_text(const TrainingSetup& s)
{
    if (s.framework == Framework::tensorflow) {
        return "its input, the logits and the softmax";
    }
    switch (s.loss) {
    case Loss::fp32:
        return "its input; the fp32 loss's log-probabilities and two gradients, 12·s·V";
    case Loss::chunked:
        return "its input, the logits and the chunked loss's";
    case Loss::fused:
        return s.tp > 1
            ? fmt::format("its input and the fused loss's softmax and gradient, 1/{} of the vocabulary", s.tp)
            : std::string("its input and the fused loss's softmax and gradient");
    }
    return "its input";
}

// Numbers as people read them: 0.1, 0.000283, 2.5, 1.333.
std::string number(double value)
{
    return fmt::format("{:.4g}", value);
}

// Consecutive identical rows become one, led by the range of GPUs they stand for ("0-63").
std::vector<std::vector<std::string>> grouped(const std::vector<std::vector<std::string>>& rows)
{
    std::vector<std::vector<std::string>> out;
    for (std::size_t i = 0; i < rows.size();) {
        std::size_t j = i + 1;
        while (j < rows.size() && rows[j] == rows[i]) {
            ++j;
        }
        out.push_back(rows[i]);
        out.back().insert(out.back().begin(), j - i == 1 ? std::to_string(i) : fmt::format("{}-{}", i, j - 1));
        i = j;
    }
    return out;
}

std::string gpu_label(const FitReport& r, std::size_t i)
{
    const auto& name = r.request.gpus[i].name;
    return name.empty() ? fmt::format("GPU {}", i) : fmt::format("GPU {} ({})", i, name);
}

// The fewest micro-batches that divide `global` evenly into shares of at most `room` samples.
std::uint64_t micro_batches_for(unsigned global, std::uint64_t room)
{
    std::uint64_t n = (global + room - 1) / room;
    while (global % n != 0) {
        ++n;
    }
    return n;
}

// "the model states need X, and Y are left after overhead and margin", or the same for one sample.
std::string why_nothing_fits(const MemoryPlan& plan, const GpuFit& f)
{
    if (f.available <= 0) {
        return fmt::format("the model states need up to {}, and {} are left after overhead and margin",
            format_bytes(f.states),
            format_bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, f.available + f.states))));
    }
    return fmt::format("one sample's activations need up to {}, and {} are left after the model states",
        format_bytes(plan.uncertainty.upper_activations(plan.activations.per_sample)),
        format_bytes(static_cast<std::uint64_t>(f.available)));
}

bool sixteen_bit_states(Precision p)
{
    return p != Precision::fp32 && p != Precision::amp;
}

bool master_weights(Precision p)
{
    return p == Precision::fp16 || p == Precision::bf16;
}

const char* weight_words(Precision p)
{
    if (p == Precision::amp) {
        return "fp32 and autocast's 16-bit copy";
    }
    return sixteen_bit_states(p) ? "16-bit" : "fp32";
}

std::string optimizer_words(Precision p, Optimizer o)
{
    std::string states;
    switch (o) {
    case Optimizer::momentum:
        states = "momentum";
        break;
    case Optimizer::adam:
    case Optimizer::adamw:
    case Optimizer::lamb:
        states = "m and v";
        break;
    case Optimizer::adam8bit:
        states = "m and v in 8 bits";
        break;
    case Optimizer::adafactor:
        states = "factored second moments (negligible)";
        break;
    case Optimizer::sgd:
        break;
    }
    if (master_weights(p)) {
        return states.empty() ? "fp32 master weights" : "fp32 master weights, " + states;
    }
    if (o == Optimizer::adam8bit || o == Optimizer::adafactor) {
        return states;
    }
    return states.empty() ? "no state" : states + (sixteen_bit_states(p) ? ", 16-bit" : ", fp32");
}

std::string left_text(const GpuFit& fit)
{
    if (fit.available >= 0) {
        return format_bytes(static_cast<std::uint64_t>(fit.available));
    }
    return fmt::format("none (short {})", format_bytes(static_cast<std::uint64_t>(-fit.available)));
}

std::string shape_text(const ModelSpec& m)
{
    std::vector<std::string> parts{fmt::format("{} parameters", format_param_count(m.params))};
    if (m.transformer) {
        const TransformerShape& t = *m.transformer;
        const std::string heads = fmt::format("{} heads{}", t.heads,
            t.kv_heads > 0 && t.kv_heads != t.heads ? fmt::format(" ({} key/value)", t.kv_heads) : "");
        if (t.decoder_layers > 0) {
            parts.push_back(fmt::format("{} encoder layers at sequence {} and {} decoder layers at {}, hidden {}, {}",
                m.layers - t.decoder_layers, t.seq, t.decoder_layers, t.output_seq(), t.hidden, heads));
        } else {
            parts.push_back(fmt::format("{} layers, hidden {}, {}, sequence {}", m.layers, t.hidden, heads, t.seq));
        }
        parts.push_back(fmt::format(
            "{} MLP {}", t.gated_mlp ? "gated" : "plain", t.intermediate > 0 ? t.intermediate : 4 * t.hidden));
        if (t.rms_norm) {
            parts.push_back("RMSNorm");
        }
        if (!t.dropout) {
            parts.push_back("no dropout");
        }
        if (m.transformer->vocab > 0) {
            parts.push_back(fmt::format("vocabulary {}", m.transformer->vocab));
        }
    } else if (m.layers > 0) {
        parts.push_back(fmt::format("{} layers", m.layers));
    }
    if (m.image_size > 0 && !m.transformer) {
        parts.push_back(fmt::format("images {0}×{0}", m.image_size));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

std::string zero_text(const TrainingSetup& s)
{
    std::string out =
        s.zero == 0 ? "no ZeRO" : fmt::format("ZeRO-{} over {} GPU{}", s.zero, s.dp, s.dp == 1 ? "" : "s");
    if (s.offload != Offload::none) {
        out +=
            fmt::format(", {} offloaded to the CPU", s.offload == Offload::all ? "weights and optimizer" : "optimizer");
    }
    if (s.tp > 1) {
        out += fmt::format(", tensor parallel {}{}", s.tp, s.sequence_parallel ? " with sequence parallelism" : "");
    }
    if (s.pp > 1) {
        out += fmt::format(", {} pipeline stages", s.pp);
    }
    return out;
}

void render_lr(const LrAdvice& lr, Optimizer optimizer, std::string& out)
{
    const char* rule = lr.linear ? "linear scaling with gradual warmup (Goyal et al. 2017)"
                                 : "square-root scaling (Malladi et al. 2022)";
    out += fmt::format("Learning rate for {}: {}\n", to_string(optimizer), rule);
    if (lr.k) {
        const std::string k = fmt::format("k = {} / {} = {}", lr.global_batch, *lr.base_batch, number(*lr.k));
        if (lr.lr) {
            out += fmt::format("  {}; lr = {} × {} = {}\n", k, number(*lr.base_lr),
                lr.linear ? number(*lr.k) : fmt::format("√{}", number(*lr.k)), number(*lr.lr));
        } else {
            out += fmt::format("  {}; lr = base lr × {}\n", k,
                lr.linear ? number(*lr.k) : fmt::format("√{} = {}", number(*lr.k), number(std::sqrt(*lr.k))));
        }
    } else {
        out += fmt::format("  lr = base lr × {} with k = {} / base batch; give --base-lr and --base-batch (the batch "
                           "that learning rate was tuned for) for the numbers\n",
            lr.linear ? "k" : "√k", lr.global_batch);
    }
    if (lr.linear) {
        if (lr.k && *lr.k <= 1) {
            out += "  no warmup needed for k <= 1\n";
        } else if (lr.lr) {
            out += fmt::format("  warm up: start at {} and raise it linearly to {} over the first {} epochs\n",
                number(*lr.base_lr), number(*lr.lr), lr.warmup_epochs);
        } else {
            out += fmt::format(
                "  warm up: start at the base lr and raise it linearly to the scaled one over the first {} epochs\n",
                lr.warmup_epochs);
        }
    } else {
        out += "  a short linear warmup (a few % of the steps) helps too\n";
    }
    for (const auto& note : lr.notes) {
        out += fmt::format("  {}\n", note);
    }
    out += fmt::format("  compare against a run with the learning rate unscaled{}: the rule is a starting point\n",
        lr.base_lr ? fmt::format(" ({})", number(*lr.base_lr)) : "");
}

// Whether the job's GPUs are joined by NVLink: NCCL runs the same channels on every rank, as
// many as the job's links allow, so NVLink's only where every GPU has it (unknown where one is
// unknown and none lacks it).
std::optional<bool> job_nvlink(const std::vector<FitGpu>& gpus)
{
    std::optional<bool> all = true;
    for (const auto& g : gpus) {
        if (g.traits.nvlink == false) {
            return false;
        }
        if (!g.traits.nvlink) {
            all.reset();
        }
    }
    return all;
}

// The request's overheads on one of its GPUs: the workspaces are counted for that GPU, with the
// job's links.
Overheads overheads_on(const FitRequest& request, const FitGpu& gpu, std::optional<bool> nvlink)
{
    Overheads o = request.overheads;
    o.gpu = gpu.traits;
    o.gpu.nvlink = nvlink;
    return o;
}

nlohmann::json workspace_json(const Workspaces& w)
{
    return {{"bytes", w.total()}, {"given", w.given.has_value()}, {"cublas_bytes", w.cublas}, {"nccl_bytes", w.nccl},
        {"nccl_communicators", w.nccl_communicators}, {"nccl_channels", w.nccl_channels},
        {"tensorflow_reserve_bytes", w.tensorflow_reserve}, {"allocated_bytes", w.allocated()}, {"assumed", w.assumed}};
}

} // namespace

FitReport analyse_fit(const FitRequest& request)
{
    if (request.gpus.empty()) {
        throw base::Error("fit: no GPU to fit on; give --gpu-mem SIZE or --gpus");
    }
    FitReport r;
    r.request = request;
    r.plan = plan_memory(request.model, request.setup, request.overheads);

    r.findings = r.plan.findings;
    r.findings.insert(r.findings.end(), request.findings.begin(), request.findings.end());

    r.nvlink = job_nvlink(request.gpus);
    std::vector<unsigned> caps;
    std::vector<double> speeds;
    for (const auto& gpu : request.gpus) {
        const Overheads overheads = overheads_on(request, gpu, r.nvlink);
        r.fits.push_back(fit_gpu(r.plan, gpu.memory, overheads));
        if (request.batch) {
            // Each GPU against its own workspaces; the peak shown is the GPU's with the most.
            const PeakMemory peak = peak_at(r.plan, *request.batch, overheads);
            r.spare_at_batch.push_back(
                static_cast<std::int64_t>(gpu.memory - r.fits.back().margin) - static_cast<std::int64_t>(peak.upper()));
            if (!r.at_batch || peak.total() > r.at_batch->total()) {
                r.at_batch = peak;
            }
        }
        caps.push_back(r.fits.back().max_batch);
        speeds.push_back(gpu.speed);
    }
    r.max_batch_per_gpu = *std::min_element(caps.begin(), caps.end());
    r.max_batch_per_gpu_central = std::min_element(r.fits.begin(), r.fits.end(), [](const GpuFit& a, const GpuFit& b) {
        return a.max_batch_central < b.max_batch_central;
    })->max_batch_central;
    const std::uint64_t room = std::accumulate(caps.begin(), caps.end(), std::uint64_t{0});
    const unsigned accum = request.setup.grad_accum;
    if (request.global_batch) {
        r.global_batch = *request.global_batch;
        r.global_batch_from = "--global-batch";
        if (r.global_batch % accum != 0) {
            throw base::Error(fmt::format("--global-batch {} is not a multiple of --grad-accum {}: each of the {} "
                                          "micro-batches of a step carries the same share",
                r.global_batch, accum, accum));
        }
        r.micro_batch = r.global_batch / accum;
    } else if (accum > 1 && room > UINT_MAX / accum) {
        throw base::Error(fmt::format("--grad-accum {}: a global batch of more than 2^32 samples", accum));
    }

    if (r.max_batch_per_gpu == 0) {
        // Suggestions for the GPU with the least memory among those where nothing fits.
        std::size_t worst = 0;
        for (std::size_t i = 0; i < caps.size(); ++i) {
            if (caps[i] == 0 && (caps[worst] != 0 || request.gpus[i].memory < request.gpus[worst].memory)) {
                worst = i;
            }
        }
        r.failing_gpu = worst;
        r.findings.push_back(fit_finding("fit.nothing_fits", fmt::format("gpu {}", worst),
            fmt::format("nothing fits, not even batch 1, on {}: {}", gpu_label(r, worst),
                why_nothing_fits(r.plan, r.fits[worst]))));
        r.suggestions = suggest_changes(request.model, request.setup, request.gpus[worst].memory,
            overheads_on(request, request.gpus[worst], r.nvlink));
    } else if (request.global_batch) {
        if (r.micro_batch > room) {
            const std::uint64_t steps = micro_batches_for(r.global_batch, room);
            r.findings.push_back(fit_finding("fit.batch_over_one_step", "global batch",
                accum == 1 ? fmt::format("a global batch of {} is more than these GPUs hold in one step ({}): "
                                         "accumulate gradients over {} steps, or lower it",
                                 r.global_batch, room, steps)
                           : fmt::format("a global batch of {} in {} micro-batches of {} is more than these GPUs hold "
                                         "in one ({}): accumulate over {} (--grad-accum {}), or lower it",
                                 r.global_batch, accum, r.micro_batch, room, steps, steps)));
        } else if (request.gpus.size() > 1) {
            r.split = base::split_batch(r.micro_batch, speeds, caps);
        }
    } else if (request.gpus.size() == 1) {
        r.micro_batch = caps.front();
        r.global_batch_from = "max batch";
    } else {
        // The largest global batch whose share by speed, B·s_i/Σs, is within every GPU's max batch.
        const double total_speed = std::accumulate(speeds.begin(), speeds.end(), 0.0);
        double balanced = static_cast<double>(room);
        for (std::size_t i = 0; i < caps.size(); ++i) {
            balanced = std::min(balanced, std::floor(caps[i] * total_speed / speeds[i] + 1e-9));
        }
        r.micro_batch = static_cast<unsigned>(std::max(1.0, balanced));
        r.global_batch_from = all_equal(speeds) && std::equal(caps.begin() + 1, caps.end(), caps.begin())
            ? "max batch"
            : "balanced by speed";
        r.split = base::split_batch(r.micro_batch, speeds, caps);
    }
    if (!request.global_batch) {
        r.global_batch = r.micro_batch * accum; // 0 when nothing fits
    }

    if (request.gpus.size() > 1 && request.model.layers > 0 && (request.layers_given || !all_equal(speeds))) {
        r.pipeline_layers = base::split_layers(request.model.layers, speeds);
    }
    if (r.global_batch > 0) {
        r.lr = advise_lr(request.setup.optimizer, r.global_batch, request.base_lr, request.base_batch);
    }
    return r;
}

namespace {

// One line of a breakdown: what, how much, why.
void add_row(std::string& out, const std::string& label, std::uint64_t bytes, const std::string& detail)
{
    out += fmt::format("  {:<14}{:>11}  {}\n", label, format_bytes(bytes), detail);
}

// ", ÷ 8 (ZeRO-2)" where ZeRO from this stage on shards the state over the data-parallel GPUs.
std::string sharded(const TrainingSetup& s, unsigned from_stage)
{
    return s.zero >= from_stage && s.dp > 1 ? fmt::format(", ÷ {} (ZeRO-{})", s.dp, s.zero) : std::string();
}

// The model, its shape and how it trains.
void render_setup(const FitReport& r, std::string& out)
{
    const FitRequest& q = r.request;
    const ModelSpec& m = q.model;
    const TrainingSetup& s = q.setup;
    out += fmt::format("{}{}\n", m.name, m.description.empty() ? "" : ": " + m.description);
    out += fmt::format("  {}\n", shape_text(m));
    out += fmt::format("  {}, {}, {}, recompute {}{}\n\n", to_string(s.precision), to_string(s.optimizer), zero_text(s),
        to_string(s.recompute),
        fmt::format("{}{}{}{}",
            m.transformer && !m.activation_bytes ? fmt::format(", {} attention", to_string(s.attention)) : "",
            counts_loss(q) ? fmt::format(", {} loss", to_string(s.loss)) : "",
            s.framework == Framework::tensorflow ? ", TensorFlow" : "",
            s.lora.rank > 0 ? fmt::format(", LoRA rank {} on {}, frozen weights {}-bit", s.lora.rank,
                                  fmt::join(lora_target_list(s.lora.targets), ","), s.lora.base_bits)
                            : ""));
}

// The model states per GPU, in the order memory is spent.
void render_states(const FitReport& r, std::string& out)
{
    const TrainingSetup& s = r.request.setup;
    const StateMemory& st = r.plan.states;
    out += fmt::format("Model states per GPU: {} ({} bytes per {}parameter{})\n", format_bytes(st.total()),
        st.per_param.total(), st.adapter_params > 0 ? "trained " : "",
        st.buckets > 0 ? fmt::format(", and {} for DDP's buckets", bucket_bytes(s)) : "");
    if (st.adapter_params > 0) {
        add_row(out, "weights", st.weights,
            fmt::format("frozen {} ({}-bit{}) + {} adapter parameters at {} B{}", format_bytes(st.frozen_weights),
                s.lora.base_bits, s.lora.base_bits == 4 ? " NF4" : "", format_param_count(st.adapter_params),
                st.per_param.weights, sharded(s, 3)));
    } else {
        add_row(out, "weights", st.weights,
            fmt::format("{} B/parameter, {}{}", st.per_param.weights, weight_words(s.precision), sharded(s, 3)));
    }
    add_row(out, "gradients", st.gradients,
        fmt::format("{} B/parameter, {}{}{}", st.per_param.gradients,
            sixteen_bit_states(s.precision) ? "16-bit" : "fp32",
            s.framework == Framework::tensorflow ? ", and the clipped copy (fp32)" : "", sharded(s, 2)));
    add_row(out, "optimizer", st.optimizer,
        fmt::format(
            "{} B/parameter, {}{}", st.per_param.optimizer, optimizer_words(s.precision, s.optimizer), sharded(s, 1)));
    if (st.zero3_gather > 0) {
        add_row(out, "ZeRO-3 gather", st.zero3_gather, "one layer's weights and gradients, gathered");
    }
    if (st.offloaded > 0) {
        add_row(out, "on the CPU", st.offloaded, "offloaded by ZeRO-Offload (host memory, not counted on the GPU)");
    }
    if (st.dequantized > 0) {
        add_row(out, "dequantized", st.dequantized, "the largest projection in 16-bit while it computes");
    }
    if (st.accumulation > 0) {
        add_row(out, "accumulation", st.accumulation,
            fmt::format("{} B/trained parameter, the fp32 buffer {} micro-batches' gradients add up in{}",
                accumulation_bytes(s), s.grad_accum, sharded(s, 2)));
    }
    if (st.buckets > 0) {
        add_row(out, "DDP buckets", st.buckets,
            fmt::format("{} B/trained parameter, PyTorch DDP's all-reduce buckets over {} GPUs, a copy of the "
                        "gradients (--bucket-view: gradient_as_bucket_view=True)",
                bucket_bytes(s), s.dp));
    }
}

void render_activations(const FitReport& r, std::string& out)
{
    const FitRequest& q = r.request;
    const ModelSpec& m = q.model;
    const TrainingSetup& s = q.setup;
    const ActivationBytes& act = r.plan.activations;
    out += fmt::format("Activations per sample: {} ({})\n", format_bytes(act.per_sample), act.source);
    if (act.decoder_layers > 0) {
        const unsigned encoder_layers = m.layers - act.decoder_layers;
        add_row(out, "encoder", act.per_layer * encoder_layers,
            fmt::format("{} × {}, at s = {}", encoder_layers, format_bytes(act.per_layer), m.transformer->seq));
        add_row(out, "decoder", act.decoder_per_layer * act.decoder_layers,
            fmt::format("{} × {}, self- and cross-attention at s = {}", act.decoder_layers,
                format_bytes(act.decoder_per_layer), m.transformer->output_seq()));
        add_row(out, "encoder output", act.encoder_output, "the input of every cross-attention's K and V");
    } else if (act.layers_total > 0) {
        add_row(out, "layers", act.layers_total,
            fmt::format("{} × {}, {}", m.layers, format_bytes(act.per_layer), act.formula));
    }
    if (act.rebuilt_layer > 0) {
        add_row(out, "recomputed", act.rebuilt_layer, "the rest of one layer, rebuilt during its backward");
    }
    if (act.output_layer > 0) {
        add_row(out, "output layer", act.output_layer, output_layer_text(s));
    }
    if (act.measured > 0) {
        add_row(out, "measured", act.measured,
            fmt::format("{}{}", s.precision == Precision::fp32 ? "fp32" : "16-bit",
                m.image_size > 0 ? fmt::format(", {0}×{0}, saved for backward", m.image_size) : ""));
        add_row(out, "transient", act.transient,
            fmt::format("{:g} % more in nvidia-smi: the allocator's cached blocks, cuDNN's workspaces (not in "
                        "max_memory_allocated)",
                q.overheads.cnn_transient * 100));
    }
    if (act.source == "given") {
        add_row(out, "given", act.per_sample, "--activation-bytes-per-sample");
    }
}

// The CUDA context and workspaces, the estimate's uncertainty and the memory at --batch.
void render_overheads(const FitReport& r, std::string& out)
{
    const FitRequest& q = r.request;
    const TrainingSetup& s = q.setup;
    out += fmt::format(
        "Overhead per GPU: CUDA context {}, the workspaces below; margin {:g} % of its memory, for fragmentation\n",
        format_bytes(q.overheads.cuda_context), q.overheads.margin_fraction * 100);
    // One row per kind of GPU: the workspaces follow its architecture and the job's links; one
    // row for all where they were given.
    std::vector<GpuTraits> shown;
    for (std::size_t i = 0; i < q.gpus.size(); ++i) {
        GpuTraits traits = q.overheads.workspace ? GpuTraits{} : q.gpus[i].traits;
        traits.nvlink = r.nvlink;
        if (std::find(shown.begin(), shown.end(), traits) == shown.end()) {
            add_row(out, "workspaces", r.fits[i].workspaces.total(), describe(r.fits[i].workspaces, traits));
            shown.push_back(traits);
        }
    }
    for (const auto& c : q.contexts_measured) {
        add_row(out, "context", c.bytes,
            fmt::format("measured on GPU {} ({}): used {} → {}, less {} {} pool", c.index, c.gpu,
                format_bytes(c.before), format_bytes(c.peak), format_bytes(c.reserved), to_string(s.framework)));
    }
    const Uncertainty& u = r.plan.uncertainty;
    out += fmt::format("Upper estimate, which the max batch fits: states +{:g} % ({}), activations +{:g} % ({})\n\n",
        u.states * 100, u.states_basis, u.activations * 100, u.activations_basis);
    if (r.at_batch) {
        const PeakMemory& p = *r.at_batch;
        out +=
            fmt::format("At batch {}: about {} per GPU, up to {} (states {} + activations {} + context and workspaces "
                        "{}), what nvidia-smi would show; torch.cuda.max_memory_allocated() shows about {} (no "
                        "context, no NCCL{})\n",
                p.batch, format_bytes(p.total()), format_bytes(p.upper()), format_bytes(p.states),
                format_bytes(p.activations), format_bytes(p.cuda_context + p.workspaces.total()),
                format_bytes(p.allocated()), p.cached > 0 ? ", no cached blocks" : "");
        for (std::size_t i = 0; i < q.gpus.size(); ++i) {
            const std::int64_t spare = r.spare_at_batch[i];
            out += fmt::format("  {}: {}\n", gpu_label(r, i),
                spare >= 0
                    ? fmt::format("fits at the upper estimate, {} to spare after the margin", format_bytes(spare))
                    : fmt::format("may not fit: the upper estimate is {} over its memory less the margin",
                          format_bytes(static_cast<std::uint64_t>(-spare))));
        }
        out += '\n';
    }
}

// One row per GPU (or per run of equal GPUs).
void render_gpu_table(const FitReport& r, std::string& out)
{
    const FitRequest& q = r.request;
    const bool several = q.gpus.size() > 1;
    std::vector<std::vector<std::string>> rows = {
        {"GPU", "name", "memory", "from", "margin", "left for activations", "max batch"}};
    if (several) {
        rows.front().insert(rows.front().begin() + 4, "speed");
    }
    std::vector<std::vector<std::string>> per_gpu;
    for (std::size_t i = 0; i < q.gpus.size(); ++i) {
        const auto& g = q.gpus[i];
        const auto& f = r.fits[i];
        per_gpu.push_back({g.name.empty() ? "-" : g.name, format_bytes(g.memory), g.memory_from, format_bytes(f.margin),
            left_text(f), std::to_string(f.max_batch)});
        if (several) {
            per_gpu.back().insert(per_gpu.back().begin() + 3, number(g.speed));
        }
    }
    for (auto& cells : grouped(per_gpu)) {
        rows.push_back(std::move(cells));
    }
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& cells : rows) {
        for (std::size_t c = 0; c < cells.size(); ++c) {
            width[c] = std::max(width[c], cells[c].size());
        }
    }
    for (const auto& cells : rows) {
        std::string line = " ";
        for (std::size_t c = 0; c < cells.size(); ++c) {
            line += c + 1 == cells.size() ? " " + cells[c] : fmt::format(" {:<{}} ", cells[c], width[c]);
        }
        out += line + "\n";
    }
    out += "\n";
}

void render_max_batch(const FitReport& r, std::string& out)
{
    const bool several = r.request.gpus.size() > 1;
    if (r.failing_gpu) {
        const std::size_t w = *r.failing_gpu;
        const GpuFit& f = r.fits[w];
        out += fmt::format("Max batch per GPU: 0, nothing fits, not even batch 1, on {}: ", gpu_label(r, w));
        out += why_nothing_fits(r.plan, f) + "\n";
        if (!r.suggestions.empty()) {
            out += fmt::format("What would fit on {}:\n", gpu_label(r, w));
            std::size_t longest = 0;
            for (const auto& sg : r.suggestions) {
                longest = std::max(longest, sg.change.size());
            }
            for (const auto& sg : r.suggestions) {
                out += fmt::format("  {:<{}}  {}\n", sg.change, longest,
                    sg.max_batch > 0 ? fmt::format("max batch {}", sg.max_batch) : "still nothing fits");
            }
        }
        const bool any = std::any_of(
            r.suggestions.begin(), r.suggestions.end(), [](const Suggestion& sg) { return sg.max_batch > 0; });
        if (!any) {
            out += "Nothing tried here fits: use GPUs with more memory, shorten the sequence or image, or split the "
                   "model (tensor or pipeline parallelism)\n";
        }
    } else {
        out += fmt::format("Max batch per GPU: {}{}{}\n", r.max_batch_per_gpu,
            several &&
                    std::any_of(r.fits.begin(), r.fits.end(),
                        [&](const GpuFit& f) { return f.max_batch != r.max_batch_per_gpu; })
                ? " (on the smallest GPU; each GPU's is in the table)"
                : "",
            r.max_batch_per_gpu_central != r.max_batch_per_gpu
                ? fmt::format(
                      ", where the upper estimate fits; {} at the central estimate", r.max_batch_per_gpu_central)
                : "");
    }
}

// The global batch, its split over unequal GPUs and the pipeline's split of the layers.
void render_global_batch(const FitReport& r, std::string& out)
{
    const FitRequest& q = r.request;
    const TrainingSetup& s = q.setup;
    const bool several = q.gpus.size() > 1;
    if (r.global_batch > 0) {
        std::string how;
        if (r.global_batch_from == "--global-batch") {
            how = "as given";
        } else if (r.global_batch_from == "balanced by speed") {
            how = "the largest whose shares by speed fit every GPU";
        } else {
            how = fmt::format("{} GPU{} × {}", q.gpus.size(), several ? "s" : "", r.max_batch_per_gpu);
        }
        if (s.grad_accum > 1) {
            how += fmt::format(", {} micro-batches of {} per step", s.grad_accum, r.micro_batch);
        }
        out += fmt::format("Global batch: {} ({})\n", r.global_batch, how);
    }
    if (r.split) {
        const auto& split = *r.split;
        out += fmt::format("Split of {} over {} GPUs by speed, b_i = B·s_i/Σs capped by each GPU's max batch{}:\n",
            r.micro_batch, q.gpus.size(), s.grad_accum > 1 ? ", in each micro-batch" : "");
        std::size_t name_width = 1;
        for (const auto& g : q.gpus) {
            name_width = std::max(name_width, g.name.size());
        }
        std::vector<std::vector<std::string>> shares;
        for (std::size_t i = 0; i < split.per_gpu.size(); ++i) {
            shares.push_back({q.gpus[i].name.empty() ? "-" : q.gpus[i].name, number(q.gpus[i].speed),
                std::to_string(split.per_gpu[i]), fmt::format("{:.3f}", split.loss_weight[i])});
        }
        const auto lines = grouped(shares);
        std::size_t index_width = 3;
        for (const auto& cells : lines) {
            index_width = std::max(index_width, cells[0].size());
        }
        for (const auto& cells : lines) {
            out += fmt::format("  GPU {:<{}} {:<{}}  speed {:<6} batch {:<6} loss weight {}\n", cells[0], index_width,
                cells[1], name_width, cells[2], cells[3], cells[4]);
        }
        for (const auto& note : split.notes) {
            out += fmt::format("  {}\n", note);
        }
        if (!std::all_of(
                split.loss_weight.begin(), split.loss_weight.end(), [](double w) { return std::abs(w - 1) < 1e-12; })) {
            out += "  each rank multiplies its mean loss by its weight, N·b_i/B, so that DDP's average over ranks "
                   "is the average over all samples (gpurun --global-batch exports GPURUN_LOCAL_BATCH and "
                   "GPURUN_LOSS_WEIGHT)\n";
        }
    }
    if (!r.pipeline_layers.empty()) {
        std::vector<std::vector<std::string>> layers;
        for (unsigned count : r.pipeline_layers) {
            layers.push_back({std::to_string(count)});
        }
        std::vector<std::string> parts;
        for (const auto& cells : grouped(layers)) {
            parts.push_back(fmt::format("GPU {} {}", cells[0], cells[1]));
        }
        out += fmt::format("Pipeline split of {} layers by speed: {}; contiguous stages, re-measure stage times and "
                           "check each stage's memory\n",
            q.model.layers, fmt::join(parts, ", "));
    }
}

} // namespace

std::string render_fit_text(const FitReport& r, bool color)
{
    std::string out;
    render_setup(r, out);
    render_states(r, out);
    render_activations(r, out);
    render_overheads(r, out);
    render_gpu_table(r, out);
    render_max_batch(r, out);
    render_global_batch(r, out);
    if (r.lr) {
        out += "\n";
        render_lr(*r.lr, r.request.setup.optimizer, out);
    }
    // The nothing-fits finding is the "Max batch per GPU" line above; the others are listed here.
    std::string listed;
    for (const auto& f : r.findings) {
        if (f.code != "fit.nothing_fits") {
            listed += base::render_text(f, color);
        }
    }
    if (!listed.empty()) {
        out += "\nFindings:\n" + listed;
    }
    return out;
}

namespace {

using nlohmann::json;

json model_json(const ModelSpec& m)
{
    json model = {{"name", m.name}, {"description", m.description}, {"params", m.params},
        {"layers", m.layers > 0 ? json(m.layers) : json(nullptr)}};
    if (m.transformer) {
        model["hidden"] = m.transformer->hidden;
        model["heads"] = m.transformer->heads;
        model["seq"] = m.transformer->seq;
        model["vocab"] = m.transformer->vocab > 0 ? json(m.transformer->vocab) : json(nullptr);
        model["kv_heads"] = m.transformer->kv_heads > 0 ? m.transformer->kv_heads : m.transformer->heads;
        model["intermediate"] =
            m.transformer->intermediate > 0 ? m.transformer->intermediate : 4 * m.transformer->hidden;
        model["gated_mlp"] = m.transformer->gated_mlp;
        model["norm"] = m.transformer->rms_norm ? "rms" : "layer";
        model["dropout"] = m.transformer->dropout;
        model["decoder_layers"] = m.transformer->decoder_layers;
        model["target_seq"] = m.transformer->decoder_layers > 0 ? json(m.transformer->output_seq()) : json(nullptr);
    }
    if (m.image_size > 0) {
        model["image_size"] = m.image_size;
    }

    return model;
}

json training_json(const FitRequest& q)
{
    json doc;
    doc["training"] = {{"precision", to_string(q.setup.precision)}, {"optimizer", to_string(q.setup.optimizer)},
        {"zero", q.setup.zero}, {"dp", q.setup.dp}, {"recompute", to_string(q.setup.recompute)},
        {"attention", to_string(q.setup.attention)}, {"framework", to_string(q.setup.framework)},
        {"loss", counts_loss(q) ? nlohmann::json(to_string(q.setup.loss)) : nlohmann::json(nullptr)}};
    doc["training"]["tp"] = q.setup.tp;
    doc["training"]["pp"] = q.setup.pp;
    doc["training"]["sequence_parallel"] = q.setup.sequence_parallel;
    doc["training"]["bucket_view"] = q.setup.bucket_view;
    doc["training"]["offload"] = to_string(q.setup.offload);
    doc["training"]["grad_accum"] = q.setup.grad_accum;
    if (q.setup.lora.rank > 0) {
        doc["training"]["lora"] = {{"rank", q.setup.lora.rank}, {"base_bits", q.setup.lora.base_bits},
            {"targets", lora_target_list(q.setup.lora.targets)}};
    }
    return doc["training"];
}

// Where the memory goes: the states, the activations per sample, the overheads.
json breakdown_json(const FitReport& r)
{
    const FitRequest& q = r.request;
    const StateMemory& st = r.plan.states;
    const ActivationBytes& act = r.plan.activations;
    json doc;
    doc["breakdown"] = {{"states",
                            {{"bytes", st.total()},
                                {"bytes_per_param",
                                    {{"weights", st.per_param.weights}, {"gradients", st.per_param.gradients},
                                        {"optimizer", st.per_param.optimizer}, {"total", st.per_param.total()}}},
                                {"weights_bytes", st.weights}, {"gradients_bytes", st.gradients},
                                {"optimizer_bytes", st.optimizer}, {"zero3_gather_bytes", st.zero3_gather},
                                {"dequantized_bytes", st.dequantized}, {"frozen_weights_bytes", st.frozen_weights},
                                {"adapter_params", st.adapter_params}, {"offloaded_bytes", st.offloaded},
                                {"accumulation_bytes", st.accumulation}, {"buckets_bytes", st.buckets}}},
        {"activations_per_sample",
            {{"bytes", act.per_sample}, {"source", act.source}, {"formula", act.formula},
                {"per_layer_bytes", act.per_layer}, {"layers_bytes", act.layers_total},
                {"recomputed_bytes", act.rebuilt_layer}, {"output_layer_bytes", act.output_layer},
                {"decoder_per_layer_bytes", act.decoder_per_layer}, {"encoder_output_bytes", act.encoder_output},
                {"measured_bytes", act.measured}, {"transient_bytes", act.transient}}},
        {"cuda_context_bytes", q.overheads.cuda_context},
        {"workspace_bytes",
            std::max_element(r.fits.begin(), r.fits.end(),
                [](const GpuFit& a, const GpuFit& b) { return a.workspaces.total() < b.workspaces.total(); })
                ->workspaces.total()},
        {"nccl_nvlink", r.nvlink ? json(*r.nvlink) : json(nullptr)}, {"margin_fraction", q.overheads.margin_fraction},
        {"uncertainty",
            {{"states", r.plan.uncertainty.states}, {"activations", r.plan.uncertainty.activations},
                {"basis", r.plan.uncertainty.basis()}}}};
    nlohmann::json measured = nullptr;
    if (!q.contexts_measured.empty()) {
        measured = json::array();
        for (const auto& c : q.contexts_measured) {
            measured.push_back({{"gpu", c.index}, {"name", c.gpu}, {"bytes", c.bytes}, {"used_before_bytes", c.before},
                {"used_peak_bytes", c.peak}, {"reserved_bytes", c.reserved}});
        }
    }
    doc["breakdown"]["cuda_context_measured"] = measured;
    return doc["breakdown"];
}

json gpus_json(const FitReport& r)
{
    const FitRequest& q = r.request;
    json gpus = json::array();
    for (std::size_t i = 0; i < q.gpus.size(); ++i) {
        const auto& g = q.gpus[i];
        const auto& f = r.fits[i];
        gpus.push_back({{"index", i}, {"name", g.name.empty() ? json(nullptr) : json(g.name)},
            {"memory_bytes", g.memory}, {"memory_from", g.memory_from}, {"speed", g.speed}, {"margin_bytes", f.margin},
            {"available_bytes", f.available}, {"max_batch", f.max_batch}, {"max_batch_central", f.max_batch_central},
            {"compute_capability",
                g.traits.compute_capability ? json(to_string(*g.traits.compute_capability)) : json(nullptr)},
            {"nvlink", g.traits.nvlink ? json(*g.traits.nvlink) : json(nullptr)},
            {"workspace", workspace_json(f.workspaces)}});
    }
    return gpus;
}

// The memory at --batch, and whether each GPU holds it.
json at_batch_json(const FitReport& r)
{
    const PeakMemory& p = *r.at_batch;
    json fits = json::array();
    for (std::size_t i = 0; i < r.request.gpus.size(); ++i) {
        const std::int64_t spare = r.spare_at_batch[i];
        fits.push_back({{"index", i}, {"fits", spare >= 0}, {"spare_bytes", spare}});
    }
    return {{"batch", p.batch}, {"peak_bytes", p.total()}, {"allocated_bytes", p.allocated()},
        {"peak_upper_bytes", p.upper()}, {"allocated_upper_bytes", p.allocated_upper()}, {"states_bytes", p.states},
        {"activations_bytes", p.activations}, {"cached_bytes", p.cached}, {"cuda_context_bytes", p.cuda_context},
        {"workspace_bytes", p.workspaces.total()}, {"gpus", fits}};
}

} // namespace

json render_fit_json(const FitReport& r)
{
    json doc;
    doc["model"] = model_json(r.request.model);
    doc["training"] = training_json(r.request);
    doc["breakdown"] = breakdown_json(r);
    doc["gpus"] = gpus_json(r);
    if (r.at_batch) {
        doc["at_batch"] = at_batch_json(r);
    }
    doc["max_batch_per_gpu"] = r.max_batch_per_gpu;
    doc["max_batch_per_gpu_central"] = r.max_batch_per_gpu_central;
    doc["fits"] = r.max_batch_per_gpu > 0;
    doc["global_batch"] = r.global_batch > 0 ? json(r.global_batch) : json(nullptr);
    doc["global_batch_from"] = r.global_batch > 0 ? json(r.global_batch_from) : json(nullptr);
    doc["micro_batch"] = r.micro_batch > 0 ? json(r.micro_batch) : json(nullptr);
    if (r.split) {
        doc["per_gpu_batch"] = r.split->per_gpu;
        doc["loss_weight"] = r.split->loss_weight;
        doc["split_notes"] = r.split->notes;
    }
    if (!r.pipeline_layers.empty()) {
        doc["pipeline_layers"] = r.pipeline_layers;
    }
    if (r.lr) {
        const auto& lr = *r.lr;
        auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
        doc["learning_rate"] = {{"rule", lr.linear ? "linear" : "sqrt"}, {"global_batch", lr.global_batch},
            {"base_batch", opt(lr.base_batch)}, {"base_lr", opt(lr.base_lr)}, {"k", opt(lr.k)}, {"lr", opt(lr.lr)},
            {"warmup_epochs", lr.linear ? json(lr.warmup_epochs) : json(nullptr)}, {"notes", lr.notes}};
    } else {
        doc["learning_rate"] = nullptr;
    }
    if (r.failing_gpu) {
        json suggestions = json::array();
        for (const auto& sg : r.suggestions) {
            suggestions.push_back({{"change", sg.change}, {"precision", to_string(sg.setup.precision)},
                {"zero", sg.setup.zero}, {"dp", sg.setup.dp}, {"recompute", to_string(sg.setup.recompute)},
                {"loss", to_string(sg.setup.loss)}, {"bucket_view", sg.setup.bucket_view},
                {"max_batch_per_gpu", sg.max_batch}});
        }
        doc["suggestions"] = {{"gpu", *r.failing_gpu}, {"changes", suggestions}};
    }
    doc["notes"] = messages(r.findings);
    doc["findings"] = nlohmann::json::array();
    for (const auto& f : r.findings) {
        doc["findings"].push_back(base::to_json(f));
    }
    return doc;
}

} // namespace doctor::fit
