#pragma once

// JSON written as it goes, with no document in between: for reports whose size grows with their
// input (gpudoctor nccl-log's communicators), where building an nlohmann::json first costs about
// as much as reading the input did. The text is what nlohmann::json::dump(indent) writes for the
// same values with keys in the order given (nlohmann sorts keys: give them sorted for the same
// bytes). Strings are written as valid UTF-8: a byte that is not becomes U+FFFD.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace base {

/// `text` with every byte that is not part of valid UTF-8 (overlong forms and surrogates
/// included) replaced by U+FFFD; `text` itself when it is valid.
std::string valid_utf8(std::string_view text);

class JsonWriter {
public:
    /// Appends to `out`; `indent` spaces per level, as dump(indent) (-1: all on one line).
    explicit JsonWriter(std::string& out, int indent = 2);

    JsonWriter& begin_object();
    JsonWriter& begin_array();
    /// Closes the innermost object or array.
    JsonWriter& end();
    /// The next member's name, in an object.
    JsonWriter& key(std::string_view name);

    JsonWriter& value(std::string_view text);
    JsonWriter& value(const char* text) { return value(std::string_view(text)); }
    JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
    JsonWriter& value(bool flag);
    JsonWriter& value(std::int64_t number);
    JsonWriter& value(std::uint64_t number);
    JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
    JsonWriter& value(long long number) { return value(static_cast<std::int64_t>(number)); }
    JsonWriter& value(unsigned number) { return value(static_cast<std::uint64_t>(number)); }
    JsonWriter& value(unsigned long long number) { return value(static_cast<std::uint64_t>(number)); }
    JsonWriter& value(std::nullptr_t);
    /// A small value built as a document (a finding), written in place.
    JsonWriter& value(const nlohmann::json& document);
    /// An array of strings.
    JsonWriter& strings(const std::vector<std::string>& texts);

    /// A member: key(name).value(v).
    template <typename T> JsonWriter& member(std::string_view name, const T& v) { return key(name).value(v); }

private:
    void before_value();
    void newline(std::size_t depth);
    void write_string(std::string_view text);

    struct Level {
        bool array = false;
        bool empty = true;
    };
    std::string& m_out;
    int m_indent;
    std::vector<Level> m_levels;
    bool m_after_key = false;
};

} // namespace base
