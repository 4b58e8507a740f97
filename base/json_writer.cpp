#include "base/json_writer.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace base {

std::string valid_utf8(std::string_view in)
{
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size();) {
        const auto c = static_cast<unsigned char>(in[i]);
        const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool ok = n != 0 && i + n <= in.size() && !(n == 2 && c < 0xc2);
        for (std::size_t k = 1; ok && k < n; ++k) {
            ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
        }
        if (ok && n == 3) {
            const auto c1 = static_cast<unsigned char>(in[i + 1]);
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0); // overlong, surrogates
        } else if (ok && n == 4) {
            const auto c1 = static_cast<unsigned char>(in[i + 1]);
            ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90) && c <= 0xf4;
        }
        if (ok) {
            out.append(in, i, n);
            i += n;
        } else {
            out += "\xef\xbf\xbd";
            ++i;
        }
    }
    return out;
}

JsonWriter::JsonWriter(std::string& out, int indent) : m_out(out), m_indent(indent)
{
}

void JsonWriter::newline(std::size_t depth)
{
    if (m_indent >= 0) {
        m_out += '\n';
        m_out.append(depth * static_cast<std::size_t>(m_indent), ' ');
    }
}

void JsonWriter::before_value()
{
    if (m_after_key || m_levels.empty()) {
        m_after_key = false;
        return;
    }
    Level& level = m_levels.back();
    m_out += level.empty ? "" : ",";
    level.empty = false;
    newline(m_levels.size());
}

JsonWriter& JsonWriter::begin_object()
{
    before_value();
    m_out += '{';
    m_levels.push_back(Level{false, true});
    return *this;
}

JsonWriter& JsonWriter::begin_array()
{
    before_value();
    m_out += '[';
    m_levels.push_back(Level{true, true});
    return *this;
}

JsonWriter& JsonWriter::end()
{
    const Level level = m_levels.back();
    m_levels.pop_back();
    if (!level.empty) {
        newline(m_levels.size());
    }
    m_out += level.array ? ']' : '}';
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view name)
{
    before_value();
    write_string(name);
    m_out += m_indent >= 0 ? ": " : ":";
    m_after_key = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view text)
{
    before_value();
    write_string(text);
    return *this;
}

void JsonWriter::write_string(std::string_view text)
{
    const bool ascii =
        std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    const std::string fixed = ascii ? std::string() : valid_utf8(text);
    const std::string_view s = ascii ? text : std::string_view(fixed);
    m_out += '"';
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"':
            m_out += "\\\"";
            break;
        case '\\':
            m_out += "\\\\";
            break;
        case '\b':
            m_out += "\\b";
            break;
        case '\f':
            m_out += "\\f";
            break;
        case '\n':
            m_out += "\\n";
            break;
        case '\r':
            m_out += "\\r";
            break;
        case '\t':
            m_out += "\\t";
            break;
        default:
            if (c < 0x20) {
                fmt::format_to(std::back_inserter(m_out), "\\u{:04x}", c);
            } else {
                m_out += ch;
            }
        }
    }
    m_out += '"';
}

JsonWriter& JsonWriter::value(bool flag)
{
    before_value();
    m_out += flag ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::value(std::int64_t number)
{
    before_value();
    fmt::format_to(std::back_inserter(m_out), "{}", number);
    return *this;
}

JsonWriter& JsonWriter::value(std::uint64_t number)
{
    before_value();
    fmt::format_to(std::back_inserter(m_out), "{}", number);
    return *this;
}

JsonWriter& JsonWriter::value(std::nullptr_t)
{
    before_value();
    m_out += "null";
    return *this;
}

namespace {

// Every string and key of `j` as valid UTF-8, as JsonWriter writes its own strings.
void make_valid(nlohmann::json& j)
{
    if (j.is_string()) {
        auto& s = j.get_ref<std::string&>();
        s = valid_utf8(s);
    } else if (j.is_array()) {
        for (auto& e : j) {
            make_valid(e);
        }
    } else if (j.is_object()) {
        nlohmann::json out = nlohmann::json::object();
        for (auto& [key, value] : j.items()) {
            make_valid(value);
            out[valid_utf8(key)] = std::move(value);
        }
        j = std::move(out);
    }
}

} // namespace

JsonWriter& JsonWriter::value(const nlohmann::json& document)
{
    before_value();
    nlohmann::json valid = document;
    make_valid(valid);
    const std::string text = valid.dump(m_indent);
    // Its lines are indented from column 0: shift them to this depth (a JSON string holds no raw
    // newline, so every newline is the layout's).
    const std::string shift(m_indent >= 0 ? m_levels.size() * static_cast<std::size_t>(m_indent) : 0, ' ');
    for (const char c : text) {
        m_out += c;
        if (c == '\n') {
            m_out += shift;
        }
    }
    return *this;
}

JsonWriter& JsonWriter::strings(const std::vector<std::string>& texts)
{
    begin_array();
    for (const auto& t : texts) {
        value(t);
    }
    return end();
}

} // namespace base
