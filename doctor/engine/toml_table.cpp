#include "doctor/engine/toml_table.hpp"

#include "base/spelling.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace doctor::engine {

toml::table parse_toml(const std::string& text, const std::string& origin)
{
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        throw base::Error(fmt::format("{}:{}:{}: {}", origin, where.line, where.column, e.description()));
    }
}

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

TomlEntry::TomlEntry(
    const toml::table& table, std::string origin, std::string name, const std::vector<std::string>& known)
    : m_table(table), m_origin(std::move(origin)), m_name(std::move(name))
{
    for (const auto& [key, value] : table) {
        const std::string k(key.str());
        if (std::find(known.begin(), known.end(), k) != known.end()) {
            continue;
        }
        if (value.is_table()) {
            // [llama-3.1-8b] is the table "1-8b" inside [llama-3]: TOML splits names at dots.
            throw base::Error(fmt::format("{}:{}: [{}.{}]: a name with a dot is a table inside [{}]; quote the "
                                          "name: [\"{}.{}\"]",
                m_origin, value.source().begin.line, m_name, k, m_name, m_name, k));
        }
        const std::string hint = base::closest_match(k, known);
        throw base::Error(fmt::format("{}:{}: [{}]: unknown key '{}'{}; known keys: {}", m_origin,
            value.source().begin.line, m_name, k, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint),
            fmt::format("{}", fmt::join(known, ", "))));
    }
}

std::string TomlEntry::where(const char* key) const
{
    const auto* n = m_table.get(key);
    return fmt::format(
        "{}:{}: [{}]: {}", m_origin, n != nullptr ? n->source().begin.line : m_table.source().begin.line, m_name, key);
}

base::Error TomlEntry::wrong(const char* key, const std::string& what) const
{
    return base::Error(fmt::format("{} must be {}", where(key), what));
}

std::optional<std::string> TomlEntry::text(const char* key) const
{
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return std::nullopt;
    }
    if (!n->is_string()) {
        throw wrong(key, "a string");
    }
    return n->value<std::string>();
}

std::optional<unsigned> TomlEntry::count(const char* key) const
{
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto v = n->is_integer() ? n->value<std::int64_t>() : std::nullopt;
    if (!v || *v < 1 || *v > 100000000) {
        throw wrong(key, "a whole number, 1 or more");
    }
    return static_cast<unsigned>(*v);
}

std::optional<bool> TomlEntry::flag(const char* key) const
{
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return std::nullopt;
    }
    if (!n->is_boolean()) {
        throw wrong(key, "true or false");
    }
    return *n->value<bool>();
}

std::optional<double> TomlEntry::positive(const char* key) const
{
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return std::nullopt;
    }
    const auto v = n->is_number() ? n->value<double>() : std::nullopt;
    if (!v || !std::isfinite(*v) || !(*v > 0)) {
        throw wrong(key, "a number above 0");
    }
    return v;
}

std::vector<std::string> TomlEntry::strings(const char* key) const
{
    std::vector<std::string> out;
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return out;
    }
    const auto* array = n->as_array();
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

std::vector<std::pair<std::string, double>> TomlEntry::numbers(
    const char* key, const std::vector<std::string>& known) const
{
    std::vector<std::pair<std::string, double>> out;
    const auto* n = m_table.get(key);
    if (n == nullptr) {
        return out;
    }
    const auto* table = n->as_table();
    if (table == nullptr) {
        throw wrong(key, fmt::format("a table of numbers ({})", fmt::join(known, ", ")));
    }
    for (const auto& [k, v] : *table) {
        const std::string name(k.str());
        if (std::find(known.begin(), known.end(), name) == known.end()) {
            const std::string hint = base::closest_match(name, known);
            throw wrong(key,
                fmt::format("a table of {}; '{}' is none of them{}", fmt::join(known, ", "), name,
                    hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
        }
        const auto value = v.is_number() ? v.value<double>() : std::nullopt;
        if (!value || !std::isfinite(*value) || *value < 0) {
            throw wrong(key, fmt::format("a table of numbers, 0 or more ({} is not)", name));
        }
        out.emplace_back(name, *value);
    }
    return out;
}

} // namespace doctor::engine
