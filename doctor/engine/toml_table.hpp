#pragma once

// Reading gpudoctor's TOML tables (the GPU table, fit's model catalogue): the file parsed with
// errors that say where, its top-level tables in file order, and one [entry] read key by key with
// errors that name the file, the line, the entry and the key.

#include "base/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <toml++/toml.h>
#include <utility>
#include <vector>

namespace doctor::engine {

/// The document; a syntax error is base::Error "ORIGIN:LINE:COLUMN: what".
toml::table parse_toml(const std::string& text, const std::string& origin);

/// The top-level entries in the order the file has them (toml::table sorts its keys).
std::vector<std::pair<toml::key, const toml::node*>> in_file_order(const toml::table& doc);

/// One [entry] of a table file. Every key must be one of `known` (base::Error with the closest
/// otherwise); each getter returns nullopt for a key that is not there and throws base::Error for a
/// value of the wrong kind.
class TomlEntry {
public:
    TomlEntry(const toml::table& table, std::string origin, std::string name, const std::vector<std::string>& known);

    bool has(const char* key) const { return m_table.contains(key); }
    const toml::node* node(const char* key) const { return m_table.get(key); }
    /// The error for `key`: "ORIGIN:LINE: [NAME]: KEY must be WHAT".
    base::Error wrong(const char* key, const std::string& what) const;
    /// "ORIGIN:LINE: [NAME]: KEY", for errors of a value read elsewhere.
    std::string where(const char* key) const;

    std::optional<std::string> text(const char* key) const;
    std::optional<unsigned> count(const char* key) const; ///< a whole number, 1 to 100,000,000
    std::optional<bool> flag(const char* key) const;
    std::optional<double> positive(const char* key) const; ///< a finite number above 0
    std::vector<std::string> strings(const char* key) const; ///< an array of strings; none when absent
    /// An inline table of numbers above 0 (or 0), each key one of `known`: {h2d_gbps = 48, ...}.
    std::vector<std::pair<std::string, double>> numbers(const char* key, const std::vector<std::string>& known) const;

    const std::string& origin() const { return m_origin; }
    const std::string& name() const { return m_name; }

private:
    const toml::table& m_table;
    std::string m_origin;
    std::string m_name;
};

} // namespace doctor::engine
