#include "base/launchers/node_list.hpp"

#include "base/error.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <optional>

namespace base::launchers {

namespace {

using base::Error;

/// The longest host name DNS allows; a longer one is a typo, and the bound keeps the output small.
constexpr std::size_t max_host_name = 253;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.' || c == '_';
}

// A character as an error message shows it: itself when printable, \xNN otherwise.
std::string shown(char c)
{
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
        return fmt::format("\\x{:02x}", u);
    }
    return std::string(1, c);
}

// One "lo-hi" or "n" inside brackets; each number is written zero-padded to `width`.
struct Range {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    std::size_t width = 0;
};

// A name as literal text around bracket groups: literals.size() == groups.size() + 1.
struct NamePattern {
    std::vector<std::string_view> literals;
    std::vector<std::vector<Range>> groups;
    std::size_t count = 1; ///< names it gives
    std::size_t length = 0; ///< of the longest name it gives
};

class NameParser {
public:
    NameParser(std::string_view list, std::string_view name, std::size_t limit)
        : m_list(list), m_name(name), m_limit(limit)
    {
    }

    NamePattern parse()
    {
        NamePattern pattern;
        std::size_t literal_start = 0;
        std::size_t i = 0;
        while (i < m_name.size()) {
            const char c = m_name[i];
            if (c == '[') {
                pattern.literals.push_back(m_name.substr(literal_start, i - literal_start));
                const std::size_t close = group_end(i);
                std::size_t width = 0;
                pattern.groups.push_back(parse_group(m_name.substr(i + 1, close - i - 1), width));
                pattern.length += width;
                const std::size_t n = group_count(pattern.groups.back());
                if (pattern.count > m_limit / n) {
                    too_many();
                }
                pattern.count *= n;
                i = close + 1;
                literal_start = i;
                continue;
            }
            if (c == ']') {
                throw Error(fmt::format("{}: ']' without '[' in '{}'; write ranges as name[1-4,7]", where(), m_name));
            }
            if (!is_name_char(c)) {
                throw Error(fmt::format("{}: '{}' in '{}' cannot be in a host name; host names have letters, "
                                        "digits, '-', '.' and '_', with ranges in brackets as in gpu[01-04]",
                    where(), shown(c), m_name));
            }
            ++pattern.length;
            ++i;
        }
        pattern.literals.push_back(m_name.substr(literal_start));
        if (!pattern.literals.front().empty() && pattern.literals.front().front() == '-') {
            throw Error(fmt::format(
                "{}: host name '{}' starts with '-'; a host name starts with a letter or digit", where(), m_name));
        }
        if (pattern.length > max_host_name) {
            throw Error(fmt::format("{}: '{}' gives names longer than {} characters; check for a missing comma or "
                                    "an over-padded range",
                where(), m_name, max_host_name));
        }
        return pattern;
    }

    [[noreturn]] void too_many() const
    {
        throw Error(fmt::format("{}: more than {} names; check the ranges in '{}' (a typo such as [1-100000] "
                                "instead of [1-100]?)",
            where(), m_limit, m_name));
    }

private:
    // The ']' that closes the '[' at `open`.
    std::size_t group_end(std::size_t open) const
    {
        for (std::size_t j = open + 1; j < m_name.size(); ++j) {
            if (m_name[j] == ']') {
                return j;
            }
            if (m_name[j] == '[') {
                throw Error(fmt::format(
                    "{}: '[' inside brackets in '{}'; brackets do not nest, write r[1-2]n[1-2] for several groups",
                    where(), m_name));
            }
        }
        throw Error(fmt::format(
            "{}: the '[' in '{}' is never closed; end the ranges with ']', as in name[1-4,7]", where(), m_name));
    }

    // "1-4,7" (the text between the brackets); `width` becomes the widest number it writes.
    std::vector<Range> parse_group(std::string_view group, std::size_t& width) const
    {
        std::vector<Range> ranges;
        std::size_t start = 0;
        while (true) {
            std::size_t comma = group.find(',', start);
            std::string_view item =
                group.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
            if (item.empty()) {
                throw Error(fmt::format("{}: empty range in '[{}]' of '{}'; write a number or lo-hi between "
                                        "commas, as in [1-4,7]",
                    where(), group, m_name));
            }
            ranges.push_back(parse_range(item, group));
            const Range& r = ranges.back();
            width = std::max(width, std::max(r.width, digits(r.hi)));
            if (comma == std::string_view::npos) {
                break;
            }
            start = comma + 1;
        }
        return ranges;
    }

    Range parse_range(std::string_view item, std::string_view group) const
    {
        const std::size_t dash = item.find('-');
        const std::string_view lo_text = item.substr(0, dash);
        const std::string_view hi_text = dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
        Range r;
        r.lo = bound(lo_text, item, group);
        r.hi = bound(hi_text, item, group);
        r.width = lo_text.size();
        if (r.hi < r.lo) {
            throw Error(fmt::format("{}: range '{}' in '{}' ends below its start; write the smaller number first, "
                                    "as in [{}-{}]",
                where(), item, m_name, hi_text, lo_text));
        }
        return r;
    }

    std::uint64_t bound(std::string_view text, std::string_view item, std::string_view group) const
    {
        bool all_digits = !text.empty();
        for (char c : text) {
            all_digits = all_digits && is_digit(c);
        }
        if (!all_digits) {
            throw Error(fmt::format("{}: '{}' in '[{}]' of '{}' is not a number or a range; write digits as in "
                                    "[1-4,7]",
                where(), item, group, m_name));
        }
        std::uint64_t value = 0;
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || ptr != text.data() + text.size()) {
            throw Error(fmt::format("{}: '{}' in '{}' is too large a number; a range counts at most {} names", where(),
                text, m_name, m_limit));
        }
        return value;
    }

    static std::size_t digits(std::uint64_t v)
    {
        std::size_t n = 1;
        while (v >= 10) {
            v /= 10;
            ++n;
        }
        return n;
    }

    std::size_t group_count(const std::vector<Range>& ranges) const
    {
        std::size_t n = 0;
        for (const Range& r : ranges) {
            if (r.hi - r.lo >= m_limit || r.hi - r.lo + 1 > m_limit - n) {
                too_many();
            }
            n += static_cast<std::size_t>(r.hi - r.lo + 1);
        }
        return n;
    }

    // Built only for an error: a list of many names must not copy itself once per name.
    std::string where() const { return fmt::format("host list {}", base::quote_input(m_list)); }

    std::string_view m_list;
    std::string_view m_name;
    std::size_t m_limit;
};

// The names of one pattern in order, the last group varying fastest.
void append_names(const NamePattern& pattern, std::vector<std::string>& out)
{
    std::vector<std::vector<std::string>> values(pattern.groups.size());
    for (std::size_t g = 0; g < pattern.groups.size(); ++g) {
        for (const Range& r : pattern.groups[g]) {
            for (std::uint64_t v = r.lo;; ++v) {
                values[g].push_back(fmt::format("{:0{}}", v, r.width));
                if (v == r.hi) {
                    break;
                }
            }
        }
    }
    std::vector<std::size_t> index(values.size(), 0);
    for (std::size_t n = 0; n < pattern.count; ++n) {
        std::string name;
        name.reserve(pattern.length);
        name += pattern.literals[0];
        for (std::size_t g = 0; g < values.size(); ++g) {
            name += values[g][index[g]];
            name += pattern.literals[g + 1];
        }
        out.push_back(std::move(name));
        for (std::size_t g = values.size(); g-- > 0;) {
            if (++index[g] < values[g].size()) {
                break;
            }
            index[g] = 0;
        }
    }
}

std::optional<std::uint64_t> whole_number(std::string_view text)
{
    std::uint64_t value = 0;
    bool all_digits = !text.empty();
    for (char c : text) {
        all_digits = all_digits && is_digit(c);
    }
    if (!all_digits) {
        return std::nullopt;
    }
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
        return std::numeric_limits<std::uint64_t>::max(); // too large: the callers' range checks refuse it
    }
    return value;
}

} // namespace

std::vector<std::string_view> split_node_list(std::string_view text)
{
    std::vector<std::string_view> parts;
    auto add = [&](std::string_view part) { parts.push_back(base::trim_blanks(part)); };
    bool in_brackets = false;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '[') {
            in_brackets = true;
        } else if (text[i] == ']') {
            in_brackets = false;
        } else if (text[i] == ',' && !in_brackets) {
            add(text.substr(start, i - start));
            start = i + 1;
        }
    }
    add(text.substr(start));
    return parts;
}

std::vector<std::string> expand_node_list(std::string_view text, std::size_t limit)
{
    if (text.empty()) {
        throw Error("host list is empty; write names such as gpu[01-04],cpu7");
    }
    std::vector<NamePattern> patterns;
    std::size_t total = 0;
    for (std::string_view name : split_node_list(text)) {
        if (name.empty()) {
            throw Error(fmt::format("host list {}: empty name (a comma at an end, or two together); separate "
                                    "names with one comma, as in a,b",
                base::quote_input(text)));
        }
        NameParser parser(text, name, limit);
        patterns.push_back(parser.parse());
        if (patterns.back().count > limit - total) {
            parser.too_many();
        }
        total += patterns.back().count;
    }
    std::vector<std::string> names;
    names.reserve(total);
    for (const NamePattern& pattern : patterns) {
        append_names(pattern, names);
    }
    return names;
}

std::vector<unsigned> expand_count_list(std::string_view text, std::size_t limit)
{
    if (text.empty()) {
        throw Error("count list is empty; write counts such as 2(x3),1");
    }
    struct Run {
        unsigned value;
        std::size_t repeat;
    };
    std::vector<Run> runs;
    std::size_t total = 0;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        const std::string_view item =
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        if (item.empty()) {
            throw Error(fmt::format("count list '{}': empty entry (a comma at an end, or two together); write "
                                    "counts such as 2(x3),1",
                text));
        }
        const std::size_t paren = item.find('(');
        const auto value = whole_number(item.substr(0, paren));
        std::optional<std::uint64_t> repeat = 1;
        if (paren != std::string_view::npos) {
            const std::string_view rest = item.substr(paren);
            repeat = rest.size() >= 4 && rest.substr(0, 2) == "(x" && rest.back() == ')'
                ? whole_number(rest.substr(2, rest.size() - 3))
                : std::nullopt;
        }
        if (!value || !repeat) {
            throw Error(fmt::format(
                "count list '{}': '{}' is not a count; write N, or N(xM) for N repeated M times, as in 2(x3),1", text,
                item));
        }
        if (*value > std::numeric_limits<unsigned>::max()) {
            throw Error(fmt::format("count list '{}': '{}' is too large a count", text, item));
        }
        if (*repeat == 0) {
            throw Error(fmt::format(
                "count list '{}': '{}' repeats a count 0 times; write a repeat of 1 or more, or leave it out", text,
                item));
        }
        if (*repeat > limit - total) {
            throw Error(
                fmt::format("count list '{}': more than {} counts; check the repeat in '{}'", text, limit, item));
        }
        total += static_cast<std::size_t>(*repeat);
        runs.push_back(Run{static_cast<unsigned>(*value), static_cast<std::size_t>(*repeat)});
        if (comma == std::string_view::npos) {
            break;
        }
        start = comma + 1;
    }
    std::vector<unsigned> counts;
    counts.reserve(total);
    for (const Run& run : runs) {
        counts.insert(counts.end(), run.repeat, run.value);
    }
    return counts;
}

std::string compress_count_list(const std::vector<unsigned>& counts)
{
    std::string text;
    for (std::size_t i = 0; i < counts.size();) {
        std::size_t j = i + 1;
        while (j < counts.size() && counts[j] == counts[i]) {
            ++j;
        }
        if (!text.empty()) {
            text += ',';
        }
        text += j - i == 1 ? fmt::format("{}", counts[i]) : fmt::format("{}(x{})", counts[i], j - i);
        i = j;
    }
    return text;
}

} // namespace base::launchers
