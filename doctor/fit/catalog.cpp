#include "doctor/fit/catalog.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/spelling.hpp"
#include "base/text.hpp"
#include "doctor/engine/toml_table.hpp"
#include "doctor/fit/hf_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <toml++/toml.h>

namespace doctor::fit {

namespace {

// The shipped share/gpukit/models.toml, compiled in (see doctor/CMakeLists.txt).
#include "share/models_toml.inc"

// The presets' Hugging Face configs, share/gpukit/models/*.json, by file name.
struct EmbeddedConfig {
    const char* name;
    const char* text;
};
// Ends with {nullptr, nullptr}, so that the array is well formed with no config shipped.
constexpr EmbeddedConfig model_configs[] = {
#include "share/model_configs.inc"
    {nullptr, nullptr}};

using base::Error;

using Entry = engine::TomlEntry;

/// A parameter count: a whole number, a float ("1.5e9") or a string ("350M").
std::optional<std::uint64_t> params(const Entry& e, const char* key)
{
    const auto* node = e.node(key);
    if (node == nullptr) {
        return std::nullopt;
    }
    if (node->is_string()) {
        return parse_param_count(*node->value<std::string>(), e.where(key));
    }
    if (node->is_integer() && *node->value<std::int64_t>() > 0) {
        return static_cast<std::uint64_t>(*node->value<std::int64_t>());
    }
    if (node->is_floating_point()) {
        return parse_param_count(fmt::format("{}", *node->value<double>()), e.where(key));
    }
    throw e.wrong(key, "a parameter count such as 350000000 or \"350M\"");
}

/// A byte count: a whole number of bytes or a size string ("950MiB").
std::optional<std::uint64_t> bytes(const Entry& e, const char* key)
{
    const auto* node = e.node(key);
    if (node == nullptr) {
        return std::nullopt;
    }
    if (node->is_string()) {
        return base::parse_byte_size(*node->value<std::string>(), e.where(key));
    }
    if (node->is_integer() && *node->value<std::int64_t>() > 0) {
        return static_cast<std::uint64_t>(*node->value<std::int64_t>());
    }
    throw e.wrong(key, "a number of bytes above 0 or a size such as \"950MiB\"");
}

std::uint64_t mib_to_bytes(double mib)
{
    return static_cast<std::uint64_t>(std::llround(mib * 1048576.0));
}

const std::vector<std::string> model_keys = {"description", "config", "params", "layers", "hidden", "heads", "seq",
    "vocab", "kv_heads", "intermediate", "gated_mlp", "rms_norm", "dropout", "image_size", "activation_mib_fp32",
    "activation_mib_16bit", "activation_bytes_per_sample"};

// The text of a config an entry names: beside the file that names it when `directory` is given,
// else (or when there is none there) a shipped one.
std::string config_text(const Entry& e, const std::string& name, const std::optional<std::filesystem::path>& directory)
{
    if (directory) {
        const std::filesystem::path path = *directory / name;
        std::error_code ec;
        if (std::filesystem::exists(path, ec)) {
            return base::read_input_file(path.string(), fmt::format("{}: [{}]: config", e.origin(), e.name()));
        }
    }
    if (const char* shipped = ModelCatalog::builtin_config(name)) {
        return shipped;
    }
    throw Error(fmt::format("{}: [{}]: config \"{}\": no such file{}", e.origin(), e.name(), name,
        directory ? fmt::format(" in {} and no shipped config of that name", directory->string()) : ""));
}

ModelSpec read_model(const Entry& e, const std::optional<std::filesystem::path>& directory)
{
    if (const auto config = e.text("config")) {
        // The shape and the parameter count come from the config; only the length may be set.
        for (const char* key : {"params", "layers", "hidden", "heads", "vocab", "kv_heads", "intermediate", "gated_mlp",
                 "rms_norm", "dropout", "image_size", "activation_mib_fp32", "activation_mib_16bit",
                 "activation_bytes_per_sample"}) {
            if (e.has(key)) {
                throw e.wrong(key, fmt::format("left out: config \"{}\" gives the model", *config));
            }
        }
        ModelSpec m = model_from_config(config_text(e, *config, directory), *config, e.count("seq").value_or(0));
        m.name = e.name();
        m.description = e.text("description").value_or(m.description);
        return m;
    }
    ModelSpec m;
    m.name = e.name();
    m.description = e.text("description").value_or("");
    const auto params = fit::params(e, "params");
    if (!params) {
        throw Error(
            fmt::format("{}: [{}]: no params; give the parameter count, e.g. params = \"350M\"", e.origin(), e.name()));
    }
    m.params = *params;
    m.layers = e.count("layers").value_or(0);
    const auto hidden = e.count("hidden");
    const auto heads = e.count("heads");
    const auto seq = e.count("seq");
    if (hidden || heads || seq) {
        if (m.layers == 0 || !hidden || !heads || !seq) {
            throw Error(fmt::format(
                "{}: [{}]: a transformer needs layers, hidden, heads and seq together", e.origin(), e.name()));
        }
        TransformerShape& t = m.transformer.emplace();
        t.hidden = *hidden;
        t.heads = *heads;
        t.seq = *seq;
        t.vocab = e.count("vocab").value_or(0);
        t.kv_heads = e.count("kv_heads").value_or(0);
        t.intermediate = e.count("intermediate").value_or(0);
        t.gated_mlp = e.flag("gated_mlp").value_or(false);
        t.rms_norm = e.flag("rms_norm").value_or(false);
        t.dropout = e.flag("dropout").value_or(true);
    } else {
        for (const char* key : {"vocab", "kv_heads", "intermediate", "gated_mlp", "rms_norm", "dropout"}) {
            if (e.has(key)) {
                throw e.wrong(key, "given with a transformer shape (layers, hidden, heads, seq)");
            }
        }
    }
    if (auto mib = e.positive("activation_mib_fp32")) {
        m.measured_fp32 = mib_to_bytes(*mib);
    }
    if (auto mib = e.positive("activation_mib_16bit")) {
        m.measured_16bit = mib_to_bytes(*mib);
    }
    m.image_size = e.count("image_size").value_or(0);
    m.activation_bytes = bytes(e, "activation_bytes_per_sample");
    if (!m.transformer && !m.measured_fp32 && !m.measured_16bit && !m.activation_bytes) {
        throw Error(fmt::format("{}: [{}]: no way to count activations; give a transformer shape (layers, hidden, "
                                "heads, seq), activation_mib_fp32 or activation_bytes_per_sample",
            e.origin(), e.name()));
    }
    return m;
}

} // namespace

ModelCatalog ModelCatalog::builtin()
{
    ModelCatalog catalog;
    catalog.merge(models_toml, "built-in models.toml", std::nullopt);
    return catalog;
}

const char* ModelCatalog::builtin_config(const std::string& name)
{
    for (const auto& c : model_configs) {
        if (c.name != nullptr && name == c.name) {
            return c.text;
        }
    }
    return nullptr;
}

const char* ModelCatalog::builtin_toml()
{
    return models_toml;
}

void ModelCatalog::merge_toml(const std::string& text, const std::string& origin)
{
    merge(text, origin, std::filesystem::path(origin).parent_path());
}

void ModelCatalog::merge(
    const std::string& text, const std::string& origin, const std::optional<std::filesystem::path>& directory)
{
    const toml::table doc = engine::parse_toml(text, origin);
    for (const auto& [key, node] : engine::in_file_order(doc)) {
        const auto* table = node->as_table();
        if (table == nullptr) {
            throw Error(
                fmt::format("{}:{}: '{}' must be a [model] table", origin, node->source().begin.line, key.str()));
        }
        ModelSpec model = read_model(Entry(*table, origin, std::string(key.str()), model_keys), directory);
        auto same = std::find_if(m_models.begin(), m_models.end(),
            [&](const ModelSpec& m) { return base::lower_case(m.name) == base::lower_case(model.name); });
        if (same != m_models.end()) {
            *same = std::move(model);
        } else {
            m_models.push_back(std::move(model));
        }
    }
}

const ModelSpec& ModelCatalog::find(const std::string& name) const
{
    std::vector<std::string> names;
    for (const auto& m : m_models) {
        if (base::lower_case(m.name) == base::lower_case(name)) {
            return m;
        }
        names.push_back(base::lower_case(m.name));
    }
    const std::string hint = base::closest_match(base::lower_case(name), names);
    throw Error(fmt::format("--model {}: no such preset{}; 'gpudoctor fit --list' shows them, --models FILE adds "
                            "yours, or give --params and the shape",
        name, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

} // namespace doctor::fit
