#include "doctor/fit/catalog.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/spelling.hpp"
#include "doctor/fit/hf_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <toml++/toml.h>

namespace doctor::fit {

namespace {

// The shipped share/gpukit/models.toml and gpus.toml, compiled in (see doctor/CMakeLists.txt).
#include "doctor/gpus_toml.inc"
#include "doctor/models_toml.inc"

// The presets' Hugging Face configs, share/gpukit/models/*.json, by file name.
struct EmbeddedConfig {
    const char* name;
    const char* text;
};
// Ends with {nullptr, nullptr}, so that the array is well formed with no config shipped.
constexpr EmbeddedConfig model_configs[] = {
#include "doctor/model_configs.inc"
    {nullptr, nullptr}};

using base::Error;

std::string lower(std::string_view text)
{
    std::string out(text);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

toml::table parse(const std::string& text, const std::string& origin)
{
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        throw Error(fmt::format("{}:{}:{}: {}", origin, where.line, where.column, e.description()));
    }
}

// The top-level entries in the order the file has them (toml::table sorts its keys).
std::vector<std::pair<toml::key, const toml::node*>> in_file_order(const toml::table& doc)
{
    std::vector<std::pair<toml::key, const toml::node*>> out;
    for (const auto& [key, node] : doc) {
        out.emplace_back(key, &node);
    }
    std::stable_sort(out.begin(), out.end(),
        [](const auto& a, const auto& b) { return a.second->source().begin.line < b.second->source().begin.line; });
    return out;
}

// Reads one [entry] of a catalog file, with errors that say where.
class Entry {
public:
    Entry(const toml::table& table, std::string origin, std::string name, const std::vector<std::string>& known)
        : m_table(table), m_origin(std::move(origin)), m_name(std::move(name))
    {
        for (const auto& [key, value] : table) {
            const std::string k(key.str());
            if (std::find(known.begin(), known.end(), k) == known.end()) {
                if (value.is_table()) {
                    // [llama-3.1-8b] is the table "1-8b" inside [llama-3]: TOML splits names at dots.
                    throw Error(fmt::format("{}:{}: [{}.{}]: a name with a dot is a table inside [{}]; quote the "
                                            "name: [\"{}.{}\"]",
                        m_origin, value.source().begin.line, m_name, k, m_name, m_name, k));
                }
                const std::string hint = base::closest_match(k, known);
                throw Error(fmt::format("{}:{}: [{}]: unknown key '{}'{}; known keys: {}", m_origin,
                    value.source().begin.line, m_name, k, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint),
                    fmt::format("{}", fmt::join(known, ", "))));
            }
        }
    }

    bool has(const char* key) const { return m_table.contains(key); }

    Error wrong(const char* key, const std::string& what) const
    {
        const auto* node = m_table.get(key);
        return Error(fmt::format("{}:{}: [{}]: {} must be {}", m_origin,
            node != nullptr ? node->source().begin.line : m_table.source().begin.line, m_name, key, what));
    }

    std::optional<std::string> text(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        if (!node->is_string()) {
            throw wrong(key, "a string");
        }
        return node->value<std::string>();
    }

    std::optional<unsigned> count(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        const auto v = node->is_integer() ? node->value<std::int64_t>() : std::nullopt;
        if (!v || *v < 1 || *v > 100000000) {
            throw wrong(key, "a whole number, 1 or more");
        }
        return static_cast<unsigned>(*v);
    }

    std::optional<bool> flag(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        if (!node->is_boolean()) {
            throw wrong(key, "true or false");
        }
        return *node->value<bool>();
    }

    std::optional<double> positive(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        const auto v = node->is_number() ? node->value<double>() : std::nullopt;
        if (!v || !std::isfinite(*v) || !(*v > 0)) {
            throw wrong(key, "a number above 0");
        }
        return v;
    }

    std::vector<std::string> strings(const char* key) const
    {
        std::vector<std::string> out;
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return out;
        }
        const auto* array = node->as_array();
        if (array == nullptr) {
            throw wrong(key, "an array of strings");
        }
        for (const auto& item : *array) {
            if (!item.is_string()) {
                throw wrong(key, "an array of strings");
            }
            out.push_back(*item.value<std::string>());
        }
        return out;
    }

    /// A parameter count: a whole number, a float ("1.5e9") or a string ("350M").
    std::optional<std::uint64_t> params(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        const std::string where = fmt::format("{}:{}: [{}]: {}", m_origin, node->source().begin.line, m_name, key);
        if (node->is_string()) {
            return parse_param_count(*node->value<std::string>(), where);
        }
        if (node->is_integer() && *node->value<std::int64_t>() > 0) {
            return static_cast<std::uint64_t>(*node->value<std::int64_t>());
        }
        if (node->is_floating_point()) {
            return parse_param_count(fmt::format("{}", *node->value<double>()), where);
        }
        throw wrong(key, "a parameter count such as 350000000 or \"350M\"");
    }

    /// A byte count: a whole number of bytes or a size string ("950MiB").
    std::optional<std::uint64_t> bytes(const char* key) const
    {
        const auto* node = m_table.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        const std::string where = fmt::format("{}:{}: [{}]: {}", m_origin, node->source().begin.line, m_name, key);
        if (node->is_string()) {
            return base::parse_byte_size(*node->value<std::string>(), where);
        }
        if (node->is_integer() && *node->value<std::int64_t>() > 0) {
            return static_cast<std::uint64_t>(*node->value<std::int64_t>());
        }
        throw wrong(key, "a number of bytes above 0 or a size such as \"950MiB\"");
    }

    const std::string& origin() const { return m_origin; }
    const std::string& name() const { return m_name; }

private:
    const toml::table& m_table;
    std::string m_origin;
    std::string m_name;
};

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
    const auto params = e.params("params");
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
    m.activation_bytes = e.bytes("activation_bytes_per_sample");
    if (!m.transformer && !m.measured_fp32 && !m.measured_16bit && !m.activation_bytes) {
        throw Error(fmt::format("{}: [{}]: no way to count activations; give a transformer shape (layers, hidden, "
                                "heads, seq), activation_mib_fp32 or activation_bytes_per_sample",
            e.origin(), e.name()));
    }
    return m;
}

// GPU names compare without case, spaces, '-', '_' and a leading vendor or brand word.
std::string gpu_key(std::string_view name)
{
    std::string l = lower(name);
    for (const char* prefix : {"nvidia ", "tesla "}) {
        if (l.rfind(prefix, 0) == 0) {
            l.erase(0, std::char_traits<char>::length(prefix));
        }
    }
    std::string out;
    for (char c : l) {
        if (c != ' ' && c != '-' && c != '_') {
            out += c;
        }
    }
    return out;
}

std::string gpu_family(const std::string& name)
{
    return gpu_key(name.substr(0, name.find('-')));
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
    const toml::table doc = parse(text, origin);
    for (const auto& [key, node] : in_file_order(doc)) {
        const auto* table = node->as_table();
        if (table == nullptr) {
            throw Error(
                fmt::format("{}:{}: '{}' must be a [model] table", origin, node->source().begin.line, key.str()));
        }
        ModelSpec model = read_model(Entry(*table, origin, std::string(key.str()), model_keys), directory);
        auto same = std::find_if(
            m_models.begin(), m_models.end(), [&](const ModelSpec& m) { return lower(m.name) == lower(model.name); });
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
        if (lower(m.name) == lower(name)) {
            return m;
        }
        names.push_back(lower(m.name));
    }
    const std::string hint = base::closest_match(lower(name), names);
    throw Error(fmt::format("--model {}: no such preset{}; 'gpudoctor fit --list' shows them, --models FILE adds "
                            "yours, or give --params and the shape",
        name, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

GpuTable GpuTable::builtin()
{
    return from_toml(gpus_toml, "built-in gpus.toml");
}

const char* GpuTable::builtin_toml()
{
    return gpus_toml;
}

GpuTable GpuTable::from_toml(const std::string& text, const std::string& origin)
{
    static const std::vector<std::string> keys = {
        "aliases", "memory_gib", "speed", "note", "compute_capability", "nvlink"};
    GpuTable out;
    const toml::table doc = parse(text, origin);
    for (const auto& [key, node] : in_file_order(doc)) {
        const auto* table = node->as_table();
        if (table == nullptr) {
            throw Error(fmt::format("{}:{}: '{}' must be a [gpu] table", origin, node->source().begin.line, key.str()));
        }
        const Entry e(*table, origin, std::string(key.str()), keys);
        GpuSpec gpu;
        gpu.name = e.name();
        gpu.aliases = e.strings("aliases");
        const auto gib = e.positive("memory_gib");
        if (!gib) {
            throw e.wrong("memory_gib", "given");
        }
        gpu.memory = static_cast<std::uint64_t>(std::llround(*gib * 1073741824.0));
        gpu.speed = e.positive("speed").value_or(1.0);
        gpu.note = e.text("note").value_or("");
        const auto cc = e.text("compute_capability");
        gpu.traits.compute_capability = cc ? parse_compute_capability(*cc) : std::nullopt;
        if (!gpu.traits.compute_capability) {
            throw e.wrong("compute_capability", "given as major.minor, e.g. \"8.0\"");
        }
        gpu.traits.nvlink = e.flag("nvlink");
        out.m_gpus.push_back(std::move(gpu));
    }
    return out;
}

const GpuSpec& GpuTable::find(const std::string& name) const
{
    const std::string key = gpu_key(name);
    for (const auto& g : m_gpus) {
        if (gpu_key(g.name) == key ||
            std::any_of(g.aliases.begin(), g.aliases.end(), [&](const auto& a) { return gpu_key(a) == key; })) {
            return g;
        }
    }
    std::vector<const GpuSpec*> family;
    for (const auto& g : m_gpus) {
        if (gpu_family(g.name) == key) {
            family.push_back(&g);
        }
    }
    if (family.size() == 1) {
        return *family.front();
    }
    if (family.size() > 1) {
        std::vector<std::string> names;
        for (const auto* g : family) {
            names.push_back(g->name);
        }
        throw Error(fmt::format("GPU {}: more than one in the table ({}); name one", name, fmt::join(names, ", ")));
    }
    std::vector<std::string> keys;
    std::vector<const GpuSpec*> owners;
    for (const auto& g : m_gpus) {
        keys.push_back(gpu_key(g.name));
        owners.push_back(&g);
        for (const auto& a : g.aliases) {
            keys.push_back(gpu_key(a));
            owners.push_back(&g);
        }
    }
    const std::string hint = base::closest_match(key, keys);
    std::string suggestion;
    for (std::size_t i = 0; i < keys.size() && !hint.empty(); ++i) {
        if (keys[i] == hint) {
            suggestion = fmt::format(" (did you mean {}?)", owners[i]->name);
            break;
        }
    }
    throw Error(fmt::format("GPU {}: not in the GPU table{}; 'gpudoctor fit --list' shows it; give --gpus N with "
                            "--gpu-mem SIZE and --speeds for others",
        name, suggestion));
}

} // namespace doctor::fit
