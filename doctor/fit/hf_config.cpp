#include "doctor/fit/hf_config.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace doctor::fit {

namespace {

using base::Error;
using Json = nlohmann::json;

/// How an architecture builds its layers, as far as the parameter count and the activations go.
struct Architecture {
    const char* model_type;
    bool learned_positions; ///< a position embedding table (GPT-2, BERT, OPT); not rotary
    bool biases; ///< biases on the attention and MLP projections
    bool layer_norm; ///< LayerNorm (weight and bias); otherwise RMSNorm (weight only)
    bool gated_mlp; ///< gate, up and down projections (SwiGLU, GeGLU)
    bool bert; ///< token-type embeddings, an embedding LayerNorm, a pooler, no final norm
};

// From each architecture's modeling_*.py in Hugging Face Transformers.
constexpr std::array<Architecture, 12> architectures{{
    {"llama", false, false, false, true, false},
    {"mistral", false, false, false, true, false},
    {"qwen2", false, false, false, true, false}, // q, k and v have biases: added below
    {"qwen3", false, false, false, true, false},
    {"gemma", false, false, false, true, false},
    {"gemma2", false, false, false, true, false},
    {"phi3", false, false, false, true, false},
    {"gpt2", true, true, true, false, false},
    {"gpt_neox", false, true, true, false, false},
    {"opt", true, true, true, false, false},
    {"bert", true, true, true, false, true},
    {"roberta", true, true, true, false, true},
}};

class Config {
public:
    Config(const Json& doc, const std::string& origin) : m_doc(doc), m_origin(origin) { }

    /// The first of `keys` present: a whole number ≥ 1 (≥ 0 when `zero_ok`), or nullopt.
    std::optional<std::uint64_t> count(std::initializer_list<const char*> keys, bool zero_ok = false) const
    {
        for (const char* key : keys) {
            const auto it = m_doc.find(key);
            if (it == m_doc.end() || it->is_null()) {
                continue;
            }
            if (!it->is_number_integer() || it->get<std::int64_t>() < (zero_ok ? 0 : 1) ||
                it->get<std::int64_t>() > 100000000) {
                throw Error(fmt::format("{}: {} is {}; expected a whole number from {} to 100000000", m_origin, key,
                    it->dump(), zero_ok ? 0 : 1));
            }
            return it->get<std::uint64_t>();
        }
        return std::nullopt;
    }

    std::uint64_t required(std::initializer_list<const char*> keys, const char* what) const
    {
        if (auto v = count(keys)) {
            return *v;
        }
        std::vector<std::string> names(keys.begin(), keys.end());
        throw Error(fmt::format(
            "{}: no {} ({}); is this a transformer's config.json?", m_origin, what, fmt::join(names, ", ")));
    }

    std::optional<bool> flag(const char* key) const
    {
        const auto it = m_doc.find(key);
        if (it == m_doc.end() || it->is_null()) {
            return std::nullopt;
        }
        if (!it->is_boolean()) {
            throw Error(fmt::format("{}: {} is {}; expected true or false", m_origin, key, it->dump()));
        }
        return it->get<bool>();
    }

    std::string text(const char* key) const
    {
        const auto it = m_doc.find(key);
        return it != m_doc.end() && it->is_string() ? it->get<std::string>() : std::string();
    }

    bool has(const char* key) const { return m_doc.contains(key); }

    /// Any dropout probability above 0 among `keys`.
    bool any_positive(std::initializer_list<const char*> keys) const
    {
        return std::any_of(keys.begin(), keys.end(), [&](const char* key) {
            const auto it = m_doc.find(key);
            return it != m_doc.end() && it->is_number() && it->get<double>() > 0;
        });
    }

private:
    const Json& m_doc;
    const std::string& m_origin;
};

/// An architecture not in the table, from the keys its config has.
Architecture inferred(const Config& c)
{
    const std::string act = c.text("hidden_act") + c.text("activation_function") + c.text("hidden_activation");
    Architecture a{"", false, false, true, false, false};
    a.learned_positions = c.has("n_positions");
    a.biases = c.flag("attention_bias").value_or(false) || c.flag("mlp_bias").value_or(false);
    a.layer_norm = !c.has("rms_norm_eps");
    a.gated_mlp = act.find("silu") != std::string::npos || act.find("swiglu") != std::string::npos ||
        act.find("geglu") != std::string::npos;
    return a;
}

/// The largest parameter count a config may describe: beyond it there is no real model (and the
/// arithmetic could wrap).
void check_size(long double rough, const std::string& origin)
{
    if (rough > 1e15L) {
        throw Error(
            fmt::format("{}: these sizes make more than 10^15 parameters; is this a model's config.json?", origin));
    }
}

/// The sequence: `seq` when given, else the config's `positions` (0: none).
unsigned sequence(unsigned seq, std::uint64_t positions, const std::string& origin)
{
    const unsigned s = seq != 0 ? seq : static_cast<unsigned>(positions);
    if (s == 0) {
        throw Error(fmt::format("{}: no max_position_embeddings to take the sequence from; give --seq", origin));
    }
    return s;
}

/// The shape T5 and BART share: d_model wide, `heads` heads (no grouped key/value heads), an MLP
/// `inner` wide, `encoder` layers and then `decoder` layers with cross-attention. The sequence is
/// `positions` (0 when the config has none).
ModelSpec two_stacks(const Config& c, std::uint64_t encoder, std::uint64_t decoder, std::uint64_t heads,
    std::uint64_t inner, std::uint64_t positions)
{
    ModelSpec m;
    m.layers = static_cast<unsigned>(encoder + decoder);
    TransformerShape& t = m.transformer.emplace();
    t.hidden = static_cast<unsigned>(c.required({"d_model"}, "d_model"));
    t.heads = static_cast<unsigned>(heads);
    t.kv_heads = static_cast<unsigned>(heads);
    t.intermediate = static_cast<unsigned>(inner);
    t.vocab = static_cast<unsigned>(c.required({"vocab_size"}, "vocabulary size"));
    t.dropout = c.any_positive({"dropout_rate", "dropout", "attention_dropout", "activation_dropout"});
    t.decoder_layers = static_cast<unsigned>(decoder);
    t.seq = static_cast<unsigned>(positions);
    return m;
}

/// T5 (t5, mt5), from modeling_t5.py: no biases, RMS norms (weight only), relative position
/// biases (buckets × heads, once per stack), shared embeddings, an output layer of its own unless
/// tied; its attention is eager (the position bias is added to the scores).
ModelSpec t5_model(const Config& c, const std::string& origin)
{
    const std::uint64_t h = c.required({"d_model"}, "d_model");
    const std::uint64_t vocab = c.required({"vocab_size"}, "vocabulary size");
    const std::uint64_t encoder = c.required({"num_layers"}, "encoder layer count");
    const std::uint64_t decoder = c.count({"num_decoder_layers"}).value_or(encoder);
    const std::uint64_t heads = c.required({"num_heads"}, "attention head count");
    const std::uint64_t d_kv = c.required({"d_kv"}, "d_kv (the width of each head)");
    if (heads * d_kv != h) {
        throw Error(fmt::format("{}: its attention is {} heads × d_kv {} = {} wide, not d_model {}; the formula "
                                "counts attention as wide as the model: give --activation-bytes-per-sample",
            origin, heads, d_kv, heads * d_kv, h));
    }
    const std::uint64_t inner = c.required({"d_ff"}, "d_ff (the MLP's inner size)");
    const bool gated = c.text("feed_forward_proj").rfind("gated-", 0) == 0;
    const bool tied = c.flag("tie_word_embeddings").value_or(true);
    const std::uint64_t buckets = c.count({"relative_attention_num_buckets"}).value_or(32);
    check_size(
        static_cast<long double>(encoder + decoder) * (8.0L * h * h + 3.0L * h * inner) + 2.0L * vocab * h, origin);
    ModelSpec m = two_stacks(c, encoder, decoder, heads, inner, c.count({"n_positions"}).value_or(0));
    const std::uint64_t attention = 4 * h * h;
    const std::uint64_t mlp = (gated ? 3 : 2) * h * inner;
    m.embedding_params = vocab * h * (tied ? 1 : 2);
    m.params = encoder * (attention + mlp + 2 * h) + decoder * (2 * attention + mlp + 3 * h) + 2 * h +
        2 * buckets * heads + m.embedding_params; // final norms, position biases, embeddings
    m.transformer->gated_mlp = gated;
    m.transformer->rms_norm = true; // T5LayerNorm: a scale, no mean, no bias
    m.attention = Attention::eager;
    return m;
}

/// BART (bart, mbart), from modeling_bart.py and modeling_mbart.py: biases, LayerNorm, learned
/// positions for each stack (max_position_embeddings + 2 rows), an embedding LayerNorm for each,
/// the output layer tied; mBART adds a final LayerNorm to each stack.
ModelSpec bart_model(const Config& c, const std::string& type, const std::string& origin)
{
    const std::uint64_t h = c.required({"d_model"}, "d_model");
    const std::uint64_t vocab = c.required({"vocab_size"}, "vocabulary size");
    const std::uint64_t encoder = c.required({"encoder_layers"}, "encoder layer count");
    const std::uint64_t decoder = c.required({"decoder_layers"}, "decoder layer count");
    const std::uint64_t heads = c.required({"encoder_attention_heads"}, "attention head count");
    const std::uint64_t inner = c.required({"encoder_ffn_dim"}, "encoder_ffn_dim (the MLP's inner size)");
    if (c.count({"decoder_attention_heads"}).value_or(heads) != heads ||
        c.count({"decoder_ffn_dim"}).value_or(inner) != inner) {
        throw Error(fmt::format("{}: the decoder's heads or MLP differ from the encoder's; the formula counts both "
                                "stacks with one shape",
            origin));
    }
    if (h % heads != 0) {
        throw Error(fmt::format("{}: d_model {} is not a multiple of its {} attention heads", origin, h, heads));
    }
    const std::uint64_t positions = c.required({"max_position_embeddings"}, "max_position_embeddings");
    check_size(static_cast<long double>(encoder + decoder) * (8.0L * h * h + 2.0L * h * inner) + vocab * h +
            2.0L * positions * h,
        origin);
    ModelSpec m = two_stacks(c, encoder, decoder, heads, inner, positions);
    const std::uint64_t attention = 4 * (h * h + h);
    const std::uint64_t mlp = 2 * h * inner + inner + h;
    const std::uint64_t norm = 2 * h;
    m.embedding_params = vocab * h + 2 * (positions + 2) * h;
    m.params = encoder * (attention + mlp + 2 * norm) + decoder * (2 * attention + mlp + 3 * norm) +
        m.embedding_params + 2 * norm + (type == "mbart" ? 2 * norm : 0);
    return m;
}

/// An encoder-decoder model of the T5 or BART family, with its sequence: `seq` when given.
ModelSpec encoder_decoder(const Config& c, const std::string& type, const std::string& origin, unsigned seq)
{
    ModelSpec m = type == "t5" || type == "mt5" ? t5_model(c, origin) : bart_model(c, type, origin);
    m.name = origin;
    TransformerShape& t = *m.transformer;
    t.seq = sequence(seq, t.seq, origin);
    m.description =
        fmt::format("{} from {}, {} encoder and {} decoder layers, seq {}{}", type, origin, m.layers - t.decoder_layers,
            t.decoder_layers, t.seq, seq != 0 ? "" : " (--seq and --target-seq for the lengths you train at)");
    return m;
}

} // namespace

ModelSpec model_from_config(const std::string& text, const std::string& origin, unsigned seq)
{
    Json doc;
    try {
        doc = Json::parse(text);
    } catch (const Json::exception& e) {
        // parse_error, and out_of_range for a number beyond a double ("5e632").
        throw Error(fmt::format("{}: not JSON ({}); give a Hugging Face config.json", origin, e.what()));
    }
    if (!doc.is_object()) {
        throw Error(fmt::format("{}: not a JSON object; give a Hugging Face config.json", origin));
    }
    const Config c(doc, origin);
    const std::string type = c.text("model_type");
    if (type == "t5" || type == "mt5" || type == "bart" || type == "mbart") {
        return encoder_decoder(c, type, origin, seq);
    }
    if (c.flag("is_encoder_decoder").value_or(false) || c.has("num_decoder_layers") || c.has("decoder_layers")) {
        throw Error(fmt::format("{}: {} is an encoder-decoder model that --config does not know (it knows t5, mt5, "
                                "bart and mbart): give --params, --layers, --decoder-layers, --hidden, --heads, --seq "
                                "and --target-seq, or --activation-bytes-per-sample as measured",
            origin, type.empty() ? "this" : type));
    }
    const auto known = std::find_if(
        architectures.begin(), architectures.end(), [&](const Architecture& a) { return type == a.model_type; });
    const Architecture arch = known != architectures.end() ? *known : inferred(c);

    const std::uint64_t h = c.required({"hidden_size", "n_embd", "d_model"}, "hidden size");
    const std::uint64_t layers = c.required({"num_hidden_layers", "n_layer", "num_layers"}, "layer count");
    const std::uint64_t heads = c.required({"num_attention_heads", "n_head", "num_heads"}, "attention head count");
    const std::uint64_t vocab = c.required({"vocab_size"}, "vocabulary size");
    std::uint64_t kv = c.count({"num_key_value_heads", "num_kv_heads", "n_head_kv"}).value_or(heads);
    if (c.flag("multi_query").value_or(false)) {
        kv = 1;
    }
    if (h % heads != 0 && !c.has("head_dim")) {
        throw Error(fmt::format("{}: hidden size {} is not a multiple of its {} attention heads", origin, h, heads));
    }
    if (kv > heads || heads % kv != 0) {
        throw Error(fmt::format(
            "{}: {} key/value heads for {} attention heads; expected a divisor of the heads", origin, kv, heads));
    }
    const std::uint64_t head_dim = c.count({"head_dim"}).value_or(h / heads);
    const std::uint64_t inner = c.count({"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"}).value_or(4 * h);
    const std::uint64_t positions =
        c.count({"max_position_embeddings", "n_positions", "n_ctx", "seq_length"}).value_or(0);
    const bool tied = c.flag("tie_word_embeddings").value_or(true); // Transformers' default

    // Parameters, layer by layer as the modules hold them.
    const std::uint64_t q = heads * head_dim;
    const std::uint64_t kv_dim = kv * head_dim;
    std::uint64_t attention = h * q + 2 * h * kv_dim + q * h;
    std::uint64_t mlp = (arch.gated_mlp ? 3 : 2) * h * inner;
    if (arch.biases) {
        attention += q + 2 * kv_dim + h;
        mlp += (arch.gated_mlp ? 2 : 1) * inner + h;
    } else if (type == "qwen2") {
        attention += q + 2 * kv_dim;
    }
    const std::uint64_t norm = arch.layer_norm ? 2 * h : h;
    std::uint64_t params = layers * (attention + mlp + 2 * norm);
    params += vocab * h * (tied ? 1 : 2);
    if (arch.learned_positions) {
        if (positions == 0) {
            throw Error(
                fmt::format("{}: no max_position_embeddings (or n_positions) for its position embeddings", origin));
        }
        params += (positions + (type == "opt" ? 2 : 0)) * h;
    }
    if (arch.bert) {
        params += c.count({"type_vocab_size"}, true).value_or(2) * h + norm + h * h + h; // types, LayerNorm, pooler
    } else {
        params += norm; // the final norm
    }

    check_size(
        static_cast<long double>(layers) * (static_cast<long double>(h) * (2 * q + 2 * kv_dim) + 3.0L * h * inner) +
            2.0L * vocab * h + static_cast<long double>(positions) * h,
        origin);
    ModelSpec m;
    m.name = origin;
    m.params = params;
    m.embedding_params = vocab * h * (tied ? 1 : 2) + (arch.learned_positions ? positions * h : 0);
    m.layers = static_cast<unsigned>(layers);
    TransformerShape& t = m.transformer.emplace();
    t.hidden = static_cast<unsigned>(h);
    t.heads = static_cast<unsigned>(heads);
    t.kv_heads = static_cast<unsigned>(kv);
    t.intermediate = static_cast<unsigned>(inner);
    t.gated_mlp = arch.gated_mlp;
    t.rms_norm = !arch.layer_norm;
    t.vocab = static_cast<unsigned>(vocab);
    t.dropout = c.any_positive({"attention_probs_dropout_prob", "hidden_dropout_prob", "attn_pdrop", "resid_pdrop",
        "attention_dropout", "hidden_dropout", "dropout"});
    t.seq = sequence(seq, positions, origin);
    m.description = fmt::format("{} from {}{}, seq {}{}", type.empty() ? std::string("a model") : type, origin,
        known != architectures.end() ? "" : " (architecture inferred from its keys)", t.seq,
        seq != 0 ? "" : " (max_position_embeddings; --seq for the length you train at)");
    return m;
}

} // namespace doctor::fit
