#include "doctor/fit/cli.hpp"
#include "doctor/cli/subcommand_args.hpp"

#include "base/batch_split.hpp"
#include "base/byte_size.hpp"
#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/nvml.hpp"
#include "base/pci_address.hpp"
#include "base/process.hpp"
#include "base/python.hpp"
#include "base/spelling.hpp"
#include "base/usage/sampler.hpp"
#include "doctor/fit/catalog.hpp"
#include "doctor/fit/codes.hpp"
#include "doctor/fit/cuda_context.hpp"
#include "doctor/fit/gpu_memory.hpp"
#include "doctor/fit/hf_config.hpp"
#include "doctor/fit/model.hpp"
#include "doctor/fit/report.hpp"
#include "doctor/fit/search.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>
#include <utility>

namespace doctor::fit {

namespace {

using base::Error;

struct FitOptions {
    std::string model;
    std::string params;
    unsigned layers = 0;
    unsigned hidden = 0;
    unsigned heads = 0;
    unsigned seq = 0;
    unsigned vocab = 0;
    unsigned kv_heads = 0;
    unsigned intermediate = 0;
    std::string mlp;
    std::string norm;
    std::string config;
    unsigned image = 0;
    unsigned batch = 0;
    std::string attention;
    std::string loss;
    std::string framework = "pytorch";
    unsigned tp = 1;
    unsigned pp = 1;
    bool sequence_parallel = false;
    bool bucket_view = false;
    std::string offload = "none";
    unsigned lora_rank = 0;
    std::string lora_targets = "q,v";
    unsigned base_bits = 16;
    std::string activation_bytes;
    std::string precision;
    std::string optimizer;
    unsigned zero = 0;
    unsigned dp = 0;
    std::string recompute = "none";
    std::string gpu_mem;
    std::string cuda_context;
    std::string workspace;
    std::string gpus; ///< this node's GPUs: NVML indexes, bus ids or UUIDs
    std::string gpu_models; ///< names from the GPU table
    unsigned gpu_count = 0;
    std::string speeds;
    unsigned global_batch = 0;
    unsigned grad_accum = 1;
    unsigned decoder_layers = 0;
    unsigned target_seq = 0;
    double base_lr = 0;
    unsigned base_batch = 0;
    std::string models_file;
    bool json = false;
    bool list = false;
    bool search = false;
    unsigned min = 1;
    unsigned max = 4096;
    double trial_timeout = 600;
    double margin = 0;
    bool exact = false;
};

template <typename T>
T named(const std::string& option, const std::string& value, std::optional<T> (*lookup)(std::string_view),
    const std::vector<std::string>& names)
{
    if (auto v = lookup(value)) {
        return *v;
    }
    const std::string hint = base::closest_match(value, names);
    throw Error(fmt::format("{} {}: expected {}{}", option, value, fmt::join(names, ", "),
        hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

bool is_count(const std::string& text)
{
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// How a GPU of this node is named: an NVML index, a UUID or a bus id; not a model name.
bool names_local_gpu(const std::string& text)
{
    return is_count(text) || text.starts_with("GPU-") || text.starts_with("MIG-") || base::PciAddress::parse(text);
}

// What NVML says of a GPU that its workspaces depend on; unknown where NVML does not say.
GpuTraits nvml_traits(const base::Nvml& nvml, base::nvml_abi::Device device)
{
    const auto& api = nvml.api();
    GpuTraits traits;
    int major = 0;
    int minor = 0;
    if (api.cuda_compute_capability != nullptr &&
        api.cuda_compute_capability(device, &major, &minor) == base::nvml_abi::success && major > 0 && minor >= 0) {
        traits.compute_capability = ComputeCapability{static_cast<unsigned>(major), static_cast<unsigned>(minor)};
    }
    // NVLink: any link up.
    if (const auto links = base::active_nvlinks(api, device)) {
        traits.nvlink = !links->empty();
    }
    return traits;
}

// The GPUs NVML sees (those `selectors` name, or all), with their free memory; every NVML call
// under fit's deadline, as the sampler's.
std::vector<FitGpu> nvml_gpus(const std::vector<std::string>& selectors, std::vector<base::Finding>& notes)
{
    const base::CallDeadline deadline = nvml_deadline();
    std::optional<base::Nvml> nvml;
    std::vector<base::NvmlGpu> found;
    try {
        nvml.emplace(base::Nvml::load());
        found = nvml->gpus();
        if (found.empty()) {
            throw Error("NVML sees no GPU");
        }
        if (nvml->api().memory == nullptr) {
            throw Error("this NVML has no nvmlDeviceGetMemoryInfo");
        }
    } catch (const Error& e) {
        // NVML needed and missing: gpudoctor could not run (3), not a usage error.
        throw base::Unavailable(
            fmt::format("{}: cannot read free GPU memory from NVML ({}); give --gpu-mem SIZE (e.g. 16GiB, 80GB) or "
                        "--gpu-model NAMES",
                selectors.empty() ? std::string("--gpu-mem auto")
                                  : "--gpus " + fmt::format("{}", fmt::join(selectors, ",")),
                e.what()));
    }
    // Every GPU, or those named (a GPU not here: a usage error), in NVML's order.
    const auto chosen = base::usage::select_gpus(found, selectors, "--gpus");
    std::vector<FitGpu> out;
    for (const auto& g : found) {
        if (std::none_of(
                chosen.begin(), chosen.end(), [&](const base::usage::MonitoredGpu& c) { return c.index == g.index; })) {
            continue;
        }
        const base::nvml_abi::Device device = nvml->handle(g.index);
        base::nvml_abi::Memory memory{};
        const auto rc = nvml->api().memory(device, &memory);
        if (rc != base::nvml_abi::success) {
            throw base::Unavailable(
                fmt::format("nvmlDeviceGetMemoryInfo of GPU {} failed: {}", g.index, nvml->describe(rc)));
        }
        if (memory.free == 0) {
            throw base::Unavailable(fmt::format("GPU {} has no free memory", g.index));
        }
        out.push_back({g.name.empty() ? "GPU" : g.name, memory.free,
            selectors.empty() ? std::string("nvml free") : fmt::format("nvml free, GPU {}", g.index), 1.0, g.index,
            nvml_traits(*nvml, device)});
        if (!g.mig_uuids.empty()) {
            notes.push_back(fit_finding("fit.mig_instance", fmt::format("gpu {}", g.index),
                fmt::format(
                    "GPU {} is split into MIG instances: a job on one has less memory than the GPU's", g.index)));
        }
    }
    return out;
}

// --cuda-context measure: on this node's GPUs, with the training jobs' interpreter. The largest
// of the models' contexts stands for all (they are usually one model).
std::vector<ContextMeasurement> measure_contexts(const FitRequest& q)
{
    std::vector<unsigned> indexes;
    for (const auto& g : q.gpus) {
        if (!g.nvml_index) {
            throw Error("--cuda-context measure measures on this node's GPUs, and --gpu-model or --gpu-mem SIZE name "
                        "none: leave those out (the GPUs NVML sees, or --gpus LIST), or give --cuda-context SIZE");
        }
        indexes.push_back(*g.nvml_index);
    }
    const base::Interpreter python = base::find_python(base::environment());
    if (python.file.empty()) {
        throw base::Unavailable(fmt::format("--cuda-context measure: {}", python.error));
    }
    return measure_cuda_contexts(q.setup.framework, indexes, python.file, std::chrono::seconds(120));
}

std::vector<FitGpu> resolve_gpus(const FitOptions& o, const GpuTable& table, std::vector<base::Finding>& notes)
{
    const bool auto_memory = o.gpu_mem.empty() || o.gpu_mem == "auto";
    std::optional<std::uint64_t> size;
    if (!auto_memory) {
        size = base::parse_byte_size(o.gpu_mem, "--gpu-mem");
    }
    if ((o.gpus.empty() ? 0 : 1) + (o.gpu_models.empty() ? 0 : 1) + (o.gpu_count == 0 ? 0 : 1) > 1) {
        throw Error("--gpus, --gpu-model and --gpu-count each say which GPUs to fit: give one of them");
    }
    std::vector<FitGpu> gpus;
    if (!o.gpu_models.empty()) {
        if (o.gpu_mem == "auto") {
            throw Error("--gpu-mem auto with --gpu-model: the GPU table gives each GPU's memory; give --gpu-mem SIZE "
                        "to override it, or --gpus LIST to fit this node's GPUs");
        }
        for (const auto& name : base::split_commas(o.gpu_models)) {
            if (name.empty()) {
                throw Error(fmt::format(
                    "--gpu-model {}: an empty name; give names from the GPU table, like K80,V100,V100", o.gpu_models));
            }
            const GpuModel& spec = table.find(name);
            gpus.push_back({spec.name, size ? *size : spec.memory, size ? "--gpu-mem" : "gpu table", spec.speed,
                std::nullopt, spec.traits});
            const bool said =
                std::any_of(notes.begin(), notes.end(), [&](const base::Finding& f) { return f.message == spec.note; });
            if (!spec.note.empty() && !said) {
                notes.push_back(fit_finding("fit.gpu_table_note", spec.name, spec.note));
            }
        }
    } else if (o.gpu_count > 0) {
        if (o.gpu_count > 100000) {
            throw Error(fmt::format("--gpu-count {}: expected a number of GPUs from 1 to 100000", o.gpu_count));
        }
        FitGpu each{"", size.value_or(0), "--gpu-mem", 1.0, std::nullopt, {}};
        if (!size) {
            const auto seen = nvml_gpus({}, notes);
            each = *std::min_element(
                seen.begin(), seen.end(), [](const FitGpu& a, const FitGpu& b) { return a.memory < b.memory; });
            if (seen.size() != o.gpu_count || seen.size() > 1) {
                each.memory_from = "nvml free, smallest";
            }
            if (seen.size() != o.gpu_count) {
                notes.push_back(fit_finding("fit.gpu_count_not_here", "gpus",
                    fmt::format("--gpu-count {} but NVML sees {} GPU{} here: each of the {} is taken to have the "
                                "least free memory seen here",
                        o.gpu_count, seen.size(), seen.size() == 1 ? "" : "s", o.gpu_count)));
            }
        }
        gpus.assign(o.gpu_count, each);
    } else if (!o.gpus.empty()) {
        const auto selectors = base::split_commas(o.gpus);
        for (const auto& s : selectors) {
            if (!names_local_gpu(s)) {
                throw Error(fmt::format("--gpus {}: '{}' is not a GPU of this node (an NVML index, bus id or UUID); "
                                        "GPU models go to --gpu-model, a number of GPUs to --gpu-count",
                    o.gpus, s));
            }
        }
        gpus = nvml_gpus(selectors, notes);
        if (size) {
            for (auto& g : gpus) {
                g.memory = *size;
                g.memory_from = "--gpu-mem";
            }
        }
    } else if (size) {
        gpus.push_back({"", *size, "--gpu-mem", 1.0, std::nullopt, {}});
    } else {
        gpus = nvml_gpus({}, notes);
    }
    if (o.gpu_models.empty() && o.speeds.empty()) {
        for (std::size_t i = 1; i < gpus.size(); ++i) {
            if (gpus[i].name != gpus.front().name) {
                notes.push_back(
                    fit_finding("fit.gpus_differ", "gpus", "this node's GPUs differ and are taken to be equally fast"));
                break;
            }
        }
    }
    if (!o.speeds.empty()) {
        const auto speeds = base::parse_speeds(o.speeds, "--speeds");
        if (speeds.size() != gpus.size()) {
            throw Error(fmt::format("--speeds {}: {} speed{} for {} GPU{}; give one per GPU", o.speeds, speeds.size(),
                speeds.size() == 1 ? "" : "s", gpus.size(), gpus.size() == 1 ? "" : "s"));
        }
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            gpus[i].speed = speeds[i];
        }
    }
    return gpus;
}

ModelSpec resolve_model(const FitOptions& o, const CLI::App& app, const ModelCatalog& catalog)
{
    auto given = [&](const char* option) { return app.count(option) > 0; };
    for (const char* option : {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--kv-heads", "--intermediate",
             "--image", "--target-seq"}) {
        if (given(option) && app.get_option(option)->as<unsigned>() == 0) {
            throw Error(fmt::format("{} 0: expected 1 or more", option));
        }
    }
    if (!o.model.empty() && !o.config.empty()) {
        throw Error("--model and --config each name the model: give one of them");
    }
    ModelSpec m;
    m.description = "from the command line";
    if (!o.model.empty()) {
        m = catalog.find(o.model);
    }
    if (!o.config.empty()) {
        m = model_from_config(base::read_input_file(o.config, "--config"), o.config, given("--seq") ? o.seq : 0);
    }
    const bool named = !o.model.empty() || !o.config.empty();
    if (!o.params.empty()) {
        m.params = parse_param_count(o.params, "--params");
    }
    // An encoder-decoder model's layers are the encoder's and the decoder's; --layers gives the
    // encoder's, --decoder-layers the decoder's.
    const unsigned decoder_layers = m.transformer ? m.transformer->decoder_layers : 0;
    if (given("--layers")) {
        m.layers = o.layers + decoder_layers;
    }
    // A custom model's --layers starts a transformer shape too, unless its activations are given.
    const bool shape = given("--hidden") || given("--heads") || given("--seq") ||
        (!named && given("--layers") && o.activation_bytes.empty());
    if (shape && !m.transformer) {
        if (named) {
            throw Error(fmt::format("--model {} is not a transformer: --hidden, --heads and --seq do not apply; give "
                                    "--activation-bytes-per-sample to override its activations",
                m.name));
        }
        std::vector<std::string> missing;
        for (const char* option : {"--layers", "--hidden", "--heads", "--seq"}) {
            if (!given(option)) {
                missing.push_back(option);
            }
        }
        if (!missing.empty()) {
            throw Error(fmt::format("a transformer shape needs --layers, --hidden, --heads and --seq together; add {}",
                fmt::join(missing, ", ")));
        }
        m.transformer = TransformerShape{};
    }
    if (m.transformer) {
        TransformerShape& t = *m.transformer;
        const std::array<std::pair<const char*, unsigned TransformerShape::*>, 6> overrides{
            {{"--hidden", &TransformerShape::hidden}, {"--heads", &TransformerShape::heads},
                {"--seq", &TransformerShape::seq}, {"--vocab", &TransformerShape::vocab},
                {"--kv-heads", &TransformerShape::kv_heads}, {"--intermediate", &TransformerShape::intermediate}}};
        for (const auto& [option, member] : overrides) {
            if (given(option)) {
                t.*member = app.get_option(option)->as<unsigned>();
            }
        }
        if (given("--decoder-layers")) {
            m.layers = m.layers - t.decoder_layers + o.decoder_layers;
            t.decoder_layers = o.decoder_layers;
        }
        if (given("--target-seq")) {
            if (t.decoder_layers == 0) {
                throw Error("--target-seq is the decoder's length in an encoder-decoder model: add --decoder-layers "
                            "N, or give a T5 or BART --config");
            }
            t.target_seq = o.target_seq;
        }
        if (!o.mlp.empty()) {
            if (o.mlp != "plain" && o.mlp != "gated") {
                throw Error(
                    fmt::format("--mlp {}: expected plain (GPT, BERT) or gated (SwiGLU: Llama, Mistral)", o.mlp));
            }
            t.gated_mlp = o.mlp == "gated";
        }
        if (!o.norm.empty()) {
            if (o.norm != "layer" && o.norm != "rms") {
                throw Error(fmt::format("--norm {}: expected layer (GPT-2, BERT) or rms (Llama, Mistral, T5)", o.norm));
            }
            t.rms_norm = o.norm == "rms";
        }
    } else {
        for (const char* option :
            {"--vocab", "--kv-heads", "--intermediate", "--mlp", "--norm", "--decoder-layers", "--target-seq"}) {
            if (given(option)) {
                throw Error(fmt::format("{} needs a transformer shape (--layers, --hidden, --heads, --seq, a "
                                        "transformer --model or --config)",
                    option));
            }
        }
    }
    if (given("--image")) {
        if (!m.measured_fp32 && !m.measured_16bit) {
            throw Error("--image scales a CNN preset's measured activations: give a CNN --model (see --list)");
        }
        // Convolutional feature maps, and so the activations, grow with the image's area.
        const double area = std::pow(static_cast<double>(o.image) / m.image_size, 2);
        for (auto* measured : {&m.measured_fp32, &m.measured_16bit}) {
            if (*measured) {
                **measured = static_cast<std::uint64_t>(std::llround(static_cast<double>(**measured) * area));
            }
        }
        m.description += fmt::format(" (activations scaled from {0}×{0} to {1}×{1})", m.image_size, o.image);
        m.image_size = o.image;
    }
    if (!o.activation_bytes.empty()) {
        m.activation_bytes = base::parse_byte_size(o.activation_bytes, "--activation-bytes-per-sample");
    }
    if (!named && !m.transformer && !m.activation_bytes) {
        throw Error("--params alone says nothing of the activations: give the transformer shape (--layers, --hidden, "
                    "--heads, --seq) or --activation-bytes-per-sample");
    }
    return m;
}

void print_list(const ModelCatalog& models, const GpuTable& gpus, bool json)
{
    if (json) {
        nlohmann::json doc = {{"models", nlohmann::json::array()}, {"gpus", nlohmann::json::array()}};
        for (const auto& m : models.models()) {
            nlohmann::json j = {{"name", m.name}, {"description", m.description}, {"params", m.params}};
            if (m.layers > 0) {
                j["layers"] = m.layers;
            }
            if (m.transformer) {
                j["hidden"] = m.transformer->hidden;
                j["heads"] = m.transformer->heads;
                j["seq"] = m.transformer->seq;
                j["vocab"] = m.transformer->vocab;
                j["kv_heads"] = m.transformer->kv_heads > 0 ? m.transformer->kv_heads : m.transformer->heads;
                j["intermediate"] =
                    m.transformer->intermediate > 0 ? m.transformer->intermediate : 4 * m.transformer->hidden;
                j["gated_mlp"] = m.transformer->gated_mlp;
                j["norm"] = m.transformer->rms_norm ? "rms" : "layer";
                j["dropout"] = m.transformer->dropout;
                j["decoder_layers"] = m.transformer->decoder_layers;
                if (m.attention) {
                    j["attention"] = to_string(*m.attention);
                }
            }
            if (m.measured_fp32) {
                j["activation_bytes_fp32"] = *m.measured_fp32;
            }
            if (m.measured_16bit) {
                j["activation_bytes_16bit"] = *m.measured_16bit;
            }
            if (m.activation_bytes) {
                j["activation_bytes_per_sample"] = *m.activation_bytes;
            }
            doc["models"].push_back(j);
        }
        for (const auto& g : gpus.models()) {
            doc["gpus"].push_back({{"name", g.name}, {"aliases", g.aliases}, {"memory_bytes", g.memory},
                {"speed", g.speed}, {"note", g.note}, {"compute_capability", to_string(*g.traits.compute_capability)},
                {"nvlink", g.traits.nvlink ? nlohmann::json(*g.traits.nvlink) : nlohmann::json(nullptr)}});
        }
        std::cout << doc.dump(2) << '\n';
        return;
    }
    std::cout << "Model presets (--model NAME; --models FILE adds yours):\n";
    for (const auto& m : models.models()) {
        std::string shape = fmt::format("{} parameters", format_param_count(m.params));
        if (m.transformer) {
            const unsigned decoder = m.transformer->decoder_layers;
            shape += fmt::format(", {} layers, hidden {}, {} heads, seq {}",
                decoder > 0 ? fmt::format("{} + {}", m.layers - decoder, decoder) : std::to_string(m.layers),
                m.transformer->hidden, m.transformer->heads, m.transformer->seq);
        } else if (m.measured_fp32) {
            shape += fmt::format(", {} per image fp32", base::format_bytes(*m.measured_fp32));
        } else if (m.activation_bytes) {
            shape += fmt::format(", {} per sample", base::format_bytes(*m.activation_bytes));
        }
        std::cout << fmt::format("  {:<22} {}\n  {:<22} {}\n", m.name, m.description, "", shape);
    }
    std::cout << "\nGPU table (--gpu-model NAME,...; speed relative to a V100, rough; --speeds overrides; compute "
                 "capability; NVLink where the model always or never has it):\n";
    std::size_t width = 0;
    for (const auto& g : gpus.models()) {
        width = std::max(width, g.name.size());
    }
    for (const auto& g : gpus.models()) {
        const auto& t = g.traits;
        std::string line = fmt::format("  {:<{}} {:>10}  speed {:<4} cc {:<5} {:<10} {}", g.name, width,
            base::format_bytes(g.memory), fmt::format("{:g}", g.speed), to_string(*t.compute_capability),
            !t.nvlink       ? ""
                : *t.nvlink ? "NVLink"
                            : "no NVLink",
            fmt::join(g.aliases, ", "));
        line.erase(line.find_last_not_of(' ') + 1);
        std::cout << line << '\n';
    }
}

// The search's own input errors, said before anything runs (the analytic part's measurement too).
void check_search(const FitOptions& o, const std::vector<std::string>& command, const CLI::App& app)
{
    for (const char* option : {"--fail-on", "--junit", "--prometheus", "--quiet"}) {
        if (app.count(option) > 0) {
            throw Error(fmt::format("{} judges the analytic fit; the search's answer is its trials: leave out "
                                    "--search or {}",
                option, option));
        }
    }
    if (!(o.trial_timeout > 0 && o.trial_timeout <= 86400)) {
        throw Error(
            fmt::format("--trial-timeout {}: expected seconds, more than 0 and at most 86400", o.trial_timeout));
    }
    if (std::none_of(command.begin(), command.end(),
            [](const std::string& a) { return a.find("{batch}") != std::string::npos; })) {
        throw Error("--search: no argument of the command holds {batch}; put it where the command takes its batch "
                    "size, e.g. -- python train.py --batch-size {batch}");
    }
}

int run_search(const FitOptions& o, const std::vector<std::string>& command, std::optional<FitReport> report)
{
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(o.trial_timeout * 1000));
    const bool progress = isatty(STDERR_FILENO) != 0 && !o.json;
    auto run = [&](unsigned batch) {
        if (progress) {
            fmt::print(stderr, "batch {:>6}  running...", batch);
            std::fflush(stderr);
        }
        return run_trial(command, batch, timeout);
    };
    auto on_trial = [&](const Trial& trial) {
        if (progress) {
            fmt::print(stderr, "\r\x1b[K{}\n", render_trial_text(trial));
        }
    };
    if (report && !o.json) {
        std::cout << render_fit_text(*report) << '\n';
        std::cout.flush();
    }
    const SearchResult result = search_batch(o.min, o.max, o.margin, run, on_trial, o.exact);
    if (o.json) {
        nlohmann::json doc = report ? render_fit_json(*report) : nlohmann::json::object();
        const nlohmann::json search = render_search_json(result);
        for (const auto& [key, value] : search.items()) {
            doc[key] = value;
        }
        std::cout << doc.dump(2) << '\n';
    } else {
        std::cout << "Search by trial: " << fmt::format("{}", fmt::join(command, " ")) << '\n'
                  << render_search_text(result);
    }
    const bool cut_short = !result.trials.empty() && result.trials.back().verdict != TrialVerdict::fits &&
        result.trials.back().verdict != TrialVerdict::oom;
    return cut_short ? 1 : 0;
}

// The model's options: a preset, a config.json or its shape.
void add_model_options(CLI::App& app, FitOptions& o)
{
    app.add_option("--model", o.model, "A preset (see --list)")->type_name("NAME");
    app.add_option("--params", o.params, "Parameter count: 7B, 350M, 1.5e9 (overrides the preset's)")->type_name("N");
    base::add_number(app, "--layers", o.layers, "Transformer layers (and pipeline stages' layers)", "L");
    base::add_number(app, "--hidden", o.hidden, "Hidden size", "H");
    base::add_number(app, "--heads", o.heads, "Attention heads", "A");
    base::add_number(app, "--seq", o.seq, "Tokens per sample", "S");
    base::add_number(app, "--vocab", o.vocab, "Vocabulary size (counts the output layer and loss)", "V");
    base::add_number(app, "--kv-heads", o.kv_heads, "Key/value heads (grouped-query attention; default: --heads)", "N");
    base::add_number(app, "--intermediate", o.intermediate, "The MLP's inner size (default 4 × hidden)", "N");
    base::add_number(app, "--decoder-layers", o.decoder_layers,
        "Encoder-decoder (T5, BART): the decoder's layers, with cross-attention; --layers counts the encoder's", "N");
    base::add_number(
        app, "--target-seq", o.target_seq, "Encoder-decoder: the decoder's tokens per sample (default --seq)", "S");
    app.add_option("--mlp", o.mlp, "plain (GPT, BERT) or gated (SwiGLU: Llama, Mistral)")->type_name("KIND");
    app.add_option("--norm", o.norm, "layer (LayerNorm: GPT-2, BERT) or rms (RMSNorm: Llama, Mistral, T5)")
        ->type_name("KIND");
    app.add_option("--config", o.config, "The model from its Hugging Face config.json")->type_name("FILE");
    base::add_number(app, "--image", o.image, "Image side for a CNN preset (default its own, e.g. 224)", "N");
    app.add_option("--attention", o.attention,
           "eager (stores the s×s scores), sdpa (default: PyTorch ≥ 2.0) or flash (FlashAttention)")
        ->type_name("A");
    app.add_option("--loss", o.loss,
           "The loss over the vocabulary: fp32 (default: the logits cast to fp32, as Hugging Face), chunked "
           "(LitGPT, torchtune's chunked losses) or fused (Megatron)")
        ->type_name("L");
}

// How it trains: the per-GPU batch, parallelism, LoRA, precision, optimizer, ZeRO, recomputation.
void add_training_options(CLI::App& app, FitOptions& o)
{
    base::add_number(app, "--batch", o.batch, "Also the memory at this per-GPU batch, with its parts", "N");
    base::add_number(app, "--tp", o.tp, "Tensor-parallel GPUs per layer (Megatron; default 1)", "T");
    app.add_flag("--sequence-parallel", o.sequence_parallel, "With --tp: the sequence split too (Megatron's -sp)");
    base::add_number(app, "--pp", o.pp, "Pipeline stages (default 1)", "P");
    app.add_option("--offload", o.offload, "ZeRO-Offload: none (default), optimizer (ZeRO 1-3) or all (ZeRO-3)")
        ->type_name("WHAT");
    base::add_number(app, "--lora-rank", o.lora_rank, "LoRA: the adapters' rank; the model's weights are frozen", "R");
    app.add_option("--lora-targets", o.lora_targets,
           "LoRA: the projections with adapters: q,k,v,o,gate,up,down or all (default q,v)")
        ->type_name("LIST");
    base::add_number(
        app, "--base-bits", o.base_bits, "LoRA: the frozen weights' bits: 16 (default), 8 or 4 (QLoRA)", "N");
    app.add_option("--framework", o.framework,
           "pytorch (default) or tensorflow (float dropout masks, composite GELU, a clipped gradient copy)")
        ->type_name("F");
    app.add_option("--activation-bytes-per-sample", o.activation_bytes,
           "Peak activation memory per sample as measured (e.g. 950MiB); used as given")
        ->type_name("B");
    app.add_option("--precision", o.precision,
           "fp32, fp16 or bf16 (16-bit with fp32 masters), amp (autocast), fp16-pure or bf16-pure (no fp32 copies)")
        ->type_name("P");
    app.add_option("--optimizer", o.optimizer, "sgd, momentum, adam, adamw, adam8bit (bitsandbytes), adafactor or lamb")
        ->type_name("O");
    base::add_number(app, "--zero", o.zero, "ZeRO stage: 0 (default), 1, 2 or 3", "N");
    base::add_number(app, "--dp", o.dp,
        "Data-parallel GPUs ZeRO shards over (default: the number of GPUs; without ZeRO or with ZeRO-1, PyTorch's "
        "DDP)",
        "N");
    app.add_flag("--bucket-view", o.bucket_view,
        "DDP with gradient_as_bucket_view=True: the all-reduce buckets are the gradients, not a copy");
    app.add_option("--recompute", o.recompute, "Activation recomputation: none (default), selective, full")
        ->type_name("R");
}

// The GPUs and what takes their memory besides the model.
void add_gpu_options(CLI::App& app, FitOptions& o)
{
    app.add_option("--cuda-context", o.cuda_context,
           "The CUDA context and framework kernels per GPU, as measured (default 512MiB; nvidia-smi after "
           "torch.cuda.init() shows it), or measure: start the framework on one GPU of each model here and read NVML")
        ->type_name("SIZE|measure");
    app.add_option("--workspace", o.workspace,
           "The workspaces per GPU as measured (e.g. 2GiB with NCCL's NVLS buffers), instead of the count from the "
           "GPU's compute capability and NVLink: cuBLAS, NCCL, TensorFlow's reserve")
        ->type_name("SIZE");
    app.add_option("--gpu-mem", o.gpu_mem,
           "Memory per GPU (16GiB, 80GB, 40000MiB) or auto: free memory from NVML "
           "(the default without GPU names)")
        ->type_name("SIZE|auto");
    app.add_option(
           "--gpus", o.gpus, "This node's GPUs: NVML indexes, bus ids or UUIDs (default: all, with --gpu-mem auto)")
        ->type_name("LIST");
    app.add_option("--gpu-model", o.gpu_models, "GPUs by model, from the GPU table: K80,V100,V100")->type_name("LIST");
    base::add_number(
        app, "--gpu-count", o.gpu_count, "A number of GPUs like this node's (or of --gpu-mem SIZE each)", "N");
    app.add_option("--speeds", o.speeds, "Relative speeds, one per GPU: 1,2,2 (over the table's)")->type_name("LIST");
}

// The global batch and its learning rate.
void add_global_batch_options(CLI::App& app, FitOptions& o)
{
    base::add_number(app, "--global-batch", o.global_batch, "Split this global batch over the GPUs", "B");
    base::add_number(app, "--grad-accum", o.grad_accum,
        "Gradient accumulation: micro-batches per optimizer step (default 1); the global batch is per step", "N");
    base::add_number(app, "--base-lr", o.base_lr, "The learning rate tuned for --base-batch", "X");
    base::add_number(app, "--base-batch", o.base_batch, "The global batch --base-lr was tuned for", "B");
}

// The search by trial's bounds (--search itself is added with the modes).
void add_search_options(CLI::App& app, FitOptions& o)
{
    base::add_number(app, "--min", o.min, "Search: first batch tried (default 1)", "N");
    base::add_number(app, "--max", o.max, "Search: largest batch tried (default 4096)", "N");
    base::add_number(app, "--trial-timeout", o.trial_timeout, "Search: seconds each trial may run (default 600)", "S");
    base::add_number(app, "--margin", o.margin, "Search: share taken off the result, 0 to <1 (default 0)", "F");
    app.add_flag("--exact", o.exact,
        "Search: bisect to the last batch that fits, beyond the ceil(log2(max/min)) + 2 trial budget");
}

// Which of the two answers (the analytic fit, the search by trial, or both) the options ask for,
// and the options that make sense in neither.
void check_modes(const FitOptions& o, const CLI::App& app, const cli::CommandLine& line, bool analytic)
{
    const std::vector<std::string>& command = line.command;
    if (line.dashes && !o.search) {
        throw Error("fit: a command after -- is run only with --search; add --search");
    }
    if (o.search && command.empty()) {
        throw Error("fit --search: no command; give it after --, with {batch} where the batch size goes: gpudoctor "
                    "fit --search -- python train.py --batch-size {batch}");
    }
    if (o.search && command.front().find("{batch}") == std::string::npos) {
        // A program that is not there fails every trial the same way: say so before the first.
        const char* path = std::getenv("PATH");
        if (!base::find_executable(command.front(), path)) {
            throw Error(fmt::format("fit --search: program not found: '{}' is not {}", command.front(),
                command.front().find('/') != std::string::npos ? "an executable file" : "an executable in PATH"));
        }
    }
    if (!analytic && !o.search) {
        throw Error("fit: name the model (--model NAME, or --params N and its shape) or search by trial (--search -- "
                    "CMD ARGS...); see gpudoctor fit --help");
    }
    if (!o.search) {
        for (const char* option : {"--min", "--max", "--trial-timeout", "--margin", "--exact"}) {
            if (app.count(option) > 0) {
                throw Error(fmt::format("{} is for the search by trial: add --search -- CMD ARGS...", option));
            }
        }
    } else {
        check_search(o, command, app);
    }
}

// The options only the analytic fit reads, given without a model.
void refuse_analytic_options(const CLI::App& app)
{
    for (const char* option : {"--precision", "--optimizer", "--gpu-mem", "--gpus", "--gpu-model", "--gpu-count",
             "--fail-on", "--junit", "--prometheus", "--quiet", "--speeds", "--global-batch", "--base-lr",
             "--base-batch", "--layers", "--hidden", "--heads", "--seq", "--vocab", "--zero", "--dp", "--recompute",
             "--activation-bytes-per-sample", "--kv-heads", "--intermediate", "--mlp", "--norm", "--image",
             "--attention", "--loss", "--batch", "--framework", "--lora-rank", "--lora-targets", "--base-bits", "--tp",
             "--pp", "--sequence-parallel", "--bucket-view", "--offload", "--cuda-context", "--workspace",
             "--grad-accum", "--decoder-layers", "--target-seq"}) {
        if (app.count(option) > 0) {
            throw Error(
                fmt::format("{} is for the analytic fit: give --model or --params too, or leave it out", option));
        }
    }
}

// How the model trains: --precision .. --lora-targets into q.setup.
void request_setup(const FitOptions& o, const CLI::App& app, FitRequest& q)
{
    q.setup.precision = named<Precision>("--precision", o.precision, precision_named, precision_names());
    q.setup.optimizer = named<Optimizer>("--optimizer", o.optimizer, optimizer_named, optimizer_names());
    q.setup.recompute = named<Recompute>("--recompute", o.recompute, recompute_named, recompute_names());
    q.setup.framework = named<Framework>("--framework", o.framework, framework_named, framework_names());
    // PyTorch 2 runs scaled_dot_product_attention, unless the model's implementation has only
    // eager attention (T5); TensorFlow stores the scores.
    const std::string attention = !o.attention.empty() ? o.attention
        : q.setup.framework == Framework::tensorflow   ? "eager"
        : q.model.attention                            ? to_string(*q.model.attention)
                                                       : "sdpa";
    q.setup.attention = named<Attention>("--attention", attention, attention_named, attention_names());
    if (!o.loss.empty() && q.setup.framework == Framework::tensorflow) {
        throw Error("--loss is how PyTorch code runs its cross-entropy; TensorFlow's output layer is counted as "
                    "its graph keeps it: leave --loss out");
    }
    q.setup.loss = named<Loss>("--loss", o.loss.empty() ? "fp32" : o.loss, loss_named, loss_names());
    if (!o.loss.empty() && !counts_vocabulary(q.model)) {
        throw Error(fmt::format("--loss: {} has no vocabulary to count a loss over; give --vocab with a "
                                "transformer's shape, or leave --loss out",
            q.model.name));
    }
    if (o.sequence_parallel && o.tp < 2) {
        throw Error("--sequence-parallel splits the sequence over the tensor-parallel GPUs: add --tp 2 or more");
    }
    q.setup.tp = o.tp;
    q.setup.pp = o.pp;
    q.setup.sequence_parallel = o.sequence_parallel;
    q.setup.offload = named<Offload>("--offload", o.offload, offload_named, offload_names());
    q.setup.grad_accum = o.grad_accum; // plan_memory refuses 0
    if (app.count("--lora-rank") > 0) {
        if (o.lora_rank == 0) {
            throw Error("--lora-rank 0: expected the adapters' rank, 1 or more (PEFT's default is 8)");
        }
        q.setup.lora.rank = o.lora_rank;
        q.setup.lora.base_bits = o.base_bits;
        std::string bad;
        const auto targets = lora_targets_named(o.lora_targets, bad);
        if (!targets) {
            throw Error(fmt::format("--lora-targets {}: '{}' is not a projection; expected q, k, v, o, gate, up, "
                                    "down (commas between) or all",
                o.lora_targets, bad));
        }
        q.setup.lora.targets = *targets;
    } else {
        for (const char* option : {"--lora-targets", "--base-bits"}) {
            if (app.count(option) > 0) {
                throw Error(fmt::format("{} is for LoRA: add --lora-rank R", option));
            }
        }
    }
}

// The global batch and the learning rate's base.
void request_global_batch(const FitOptions& o, const CLI::App& app, FitRequest& q)
{
    if (app.count("--global-batch") > 0) {
        if (o.global_batch == 0) {
            throw Error("--global-batch 0: expected 1 or more samples");
        }
        q.global_batch = o.global_batch;
    }
    if (app.count("--base-lr") > 0) {
        // At most 1e6: scaled by up to 2^32 (the global batch over 1) it stays a finite number.
        if (!(o.base_lr > 0 && o.base_lr <= 1e6)) {
            throw Error(fmt::format("--base-lr {}: expected a learning rate above 0 and at most 1e6", o.base_lr));
        }
        if (app.count("--base-batch") == 0) {
            throw Error("--base-lr needs --base-batch: the global batch that learning rate was tuned for");
        }
        q.base_lr = o.base_lr;
    }
    if (app.count("--base-batch") > 0) {
        if (o.base_batch == 0) {
            throw Error("--base-batch 0: expected the batch the base learning rate was tuned for, 1 or more");
        }
        q.base_batch = o.base_batch;
    }
}

FitRequest analytic_request(
    const FitOptions& o, const CLI::App& app, const ModelCatalog& catalog, const GpuTable& table)
{
    if (o.precision.empty() || o.optimizer.empty()) {
        throw Error(fmt::format("fit: give {}; the memory per parameter depends on them",
            o.precision.empty() && o.optimizer.empty()
                ? fmt::format("--precision ({}) and --optimizer ({})", fmt::join(precision_names(), ", "),
                      fmt::join(optimizer_names(), ", "))
                : o.precision.empty() ? fmt::format("--precision ({})", fmt::join(precision_names(), ", "))
                                      : fmt::format("--optimizer ({})", fmt::join(optimizer_names(), ", "))));
    }
    FitRequest q;
    q.model = resolve_model(o, app, catalog);
    q.layers_given = app.count("--layers") > 0;
    request_setup(o, app, q);
    if (app.count("--batch") > 0) {
        if (o.batch == 0) {
            throw Error("--batch 0: expected a per-GPU batch of 1 or more samples");
        }
        q.batch = o.batch;
    }
    if (o.zero > 3) {
        throw Error(fmt::format("--zero {}: expected a ZeRO stage, 0 to 3", o.zero));
    }
    q.setup.zero = o.zero;
    if (app.count("--dp") > 0 && o.dp == 0) {
        throw Error("--dp 0: expected the number of data-parallel GPUs, 1 or more");
    }
    const bool measure_context = o.cuda_context == "measure";
    if (!o.cuda_context.empty() && !measure_context) {
        q.overheads.cuda_context = base::parse_byte_size(o.cuda_context, "--cuda-context");
    }
    if (app.count("--workspace") > 0) {
        q.overheads.workspace = base::parse_byte_size(o.workspace, "--workspace");
    }
    q.gpus = resolve_gpus(o, table, q.findings);
    q.setup.dp = app.count("--dp") > 0 ? o.dp : static_cast<unsigned>(q.gpus.size());
    if (o.bucket_view && !has_ddp_buckets(q.setup)) {
        throw Error("--bucket-view is PyTorch DDP's gradient_as_bucket_view=True; this setup has no DDP buckets "
                    "(they need PyTorch over 2 or more data-parallel GPUs, no ZeRO or ZeRO-1, no --offload, --tp "
                    "or --pp, and fp32, amp or a pure 16-bit precision): leave --bucket-view out");
    }
    q.setup.bucket_view = o.bucket_view;
    request_global_batch(o, app, q);
    if (measure_context) {
        // Every input error (exit 2) before a measurement that takes seconds: the analysis is
        // pure and quick, and runs again with the context measured.
        analyse_fit(q);
        q.contexts_measured = measure_contexts(q);
        q.overheads.cuda_context = std::max_element(q.contexts_measured.begin(), q.contexts_measured.end(),
            [](const ContextMeasurement& a, const ContextMeasurement& b) {
                return a.bytes < b.bytes;
            })->bytes;
    }
    return q;
}

} // namespace

int run_fit(const cli::Subcommand& self, int argc, char** argv)
{
    // Everything after the first "--" is the command to search with.
    cli::CommandLine line = cli::split_at_dashes(argc, argv);
    CLI::App app("The largest per-GPU batch that fits, by formula or by trial; the learning rate for the global "
                 "batch; the split over unequal GPUs.",
        "gpudoctor fit");
    FitOptions o;
    add_model_options(app, o);
    add_training_options(app, o);
    add_gpu_options(app, o);
    add_global_batch_options(app, o);
    app.add_option("--models", o.models_file, "More presets (TOML, as share/gpukit/models.toml)")->type_name("FILE");
    app.add_flag("--json", o.json, "Print the answer as JSON");
    bool no_color = false;
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    engine::JudgingOptions judging;
    cli::add_judging_options(app, judging, true);
    app.add_flag("--list", o.list, "List the model presets and the GPU table");
    app.add_flag("--search", o.search, "Find the batch by running the command after -- (one argument holds {batch})");
    add_search_options(app, o);
    app.footer("Usage: gpudoctor fit --model NAME|--config config.json --precision P --optimizer O [--batch N] "
               "[--gpu-mem SIZE] [--gpus LIST|--gpu-model LIST|--gpu-count N]\n"
               "       gpudoctor fit --search [--min N --max N] -- CMD ARGS... ({batch} in one argument)\n"
               "Exit status: 0 an answer, 1 nothing fits (a finding at the --fail-on level) or the search stopped on "
               "a failed trial, 2 usage or input error, 3 NVML needed and missing, or --cuda-context measure could "
               "not measure. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, line, self.name)) {
        return 0;
    }
    if (app.count("--gpu-count") > 0 && o.gpu_count == 0) {
        throw Error("--gpu-count 0: expected a number of GPUs from 1 to 100000");
    }

    ModelCatalog catalog = ModelCatalog::builtin();
    if (!o.models_file.empty()) {
        catalog.merge_toml(base::read_input_file(o.models_file, "--models"), o.models_file);
    }
    const GpuTable& table = GpuTable::builtin();
    if (o.list) {
        print_list(catalog, table, o.json);
        return 0;
    }
    const bool analytic = !o.model.empty() || !o.params.empty() || !o.config.empty();
    check_modes(o, app, line, analytic);
    const base::Severity fail_on = base::parse_fail_on(judging.fail_on);
    std::optional<FitReport> report;
    if (analytic) {
        report = analyse_fit(analytic_request(o, app, catalog, table));
    } else {
        refuse_analytic_options(app);
    }
    if (o.search) {
        return run_search(o, line.command, report);
    }
    // The extra files first: one that cannot be written is exit 2, before the report is printed.
    const engine::Verdict verdict = engine::findings_verdict("fit", report->findings, fail_on);
    engine::write_verdict_files(judging.files, verdict, nullptr);
    const bool color = cli::use_color(no_color);
    if (o.json) {
        std::cout << render_fit_json(*report).dump(2) << '\n';
    } else if (judging.quiet) {
        std::cout << engine::render_problems(verdict, color);
    } else {
        std::cout << render_fit_text(*report, color);
    }
    return verdict.exit_code();
}

} // namespace doctor::fit
