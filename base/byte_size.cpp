#include "base/byte_size.hpp"

#include "base/error.hpp"
#include "base/text.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <fmt/format.h>

namespace base {

namespace {

constexpr std::uint64_t largest = std::uint64_t{1} << 60;

struct Unit {
    const char* name;
    std::uint64_t bytes;
};

constexpr std::uint64_t kib = 1024;
constexpr std::array<Unit, 13> units = {{{"b", 1}, {"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
    {"tb", std::uint64_t{1000} * 1000 * 1000 * 1000}, {"kib", kib}, {"mib", kib* kib}, {"gib", kib* kib* kib},
    {"tib", kib* kib* kib* kib}, {"k", kib}, {"m", kib* kib}, {"g", kib* kib* kib}, {"t", kib* kib* kib* kib}}};

[[noreturn]] void bad_size(std::string_view text, const std::string& what, const std::string& why)
{
    throw Error(fmt::format("{} {}: {}; write a size such as 16GiB, 80GB or 40000MiB", what, text, why));
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

} // namespace

std::uint64_t parse_byte_size(std::string_view text, const std::string& what)
{
    const std::string_view s = trim_blanks(text);
    // The number: digits, then an optional fraction. The integer part is kept exact (no double),
    // so byte counts up to 2^60 survive.
    std::size_t pos = 0;
    std::uint64_t whole = 0;
    bool digits = false;
    for (; pos < s.size() && is_digit(s[pos]); ++pos) {
        digits = true;
        whole = whole * 10 + static_cast<std::uint64_t>(s[pos] - '0');
        if (whole > largest) {
            bad_size(text, what, "too large (at most 1 EiB)");
        }
    }
    std::string fraction;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        for (; pos < s.size() && is_digit(s[pos]); ++pos) {
            digits = true;
            fraction += s[pos];
        }
    }
    if (!digits) {
        bad_size(text, what, "not a size");
    }
    std::string_view unit_text = trim_blanks(s.substr(pos));
    const std::string unit_name = lower_case(unit_text);
    std::uint64_t unit = 0;
    if (unit_name.empty()) {
        unit = 1;
    }
    for (const auto& u : units) {
        if (unit_name == u.name) {
            unit = u.bytes;
        }
    }
    if (unit == 0) {
        bad_size(text, what,
            fmt::format("unknown unit '{}' (B, KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB and K, M, G, T "
                        "powers of 1024)",
                unit_text));
    }
    if (whole > largest / unit) {
        bad_size(text, what, "too large (at most 1 EiB)");
    }
    std::uint64_t bytes = whole * unit;
    if (!fraction.empty()) {
        // The fraction in units, rounded down to whole bytes: "1.5GiB" is exact, "0.1KB" is 100 B.
        const long double part = std::stold("0." + fraction) * static_cast<long double>(unit);
        bytes += static_cast<std::uint64_t>(std::floor(part));
    }
    if (bytes > largest) {
        bad_size(text, what, "too large (at most 1 EiB)");
    }
    if (bytes == 0) {
        bad_size(text, what, "zero bytes");
    }
    return bytes;
}

std::string format_bytes(std::uint64_t bytes)
{
    if (bytes < 1024) {
        return fmt::format("{} B", bytes);
    }
    // Up to TiB, the largest unit parse_byte_size reads, so that what is printed can be read back.
    static constexpr std::array<const char*, 4> names = {"KiB", "MiB", "GiB", "TiB"};
    std::size_t index = 0;
    std::uint64_t unit = 1024;
    while (index + 1 < names.size() && bytes / unit >= 1024) {
        unit *= 1024;
        ++index;
    }
    if (bytes % unit == 0) {
        return fmt::format("{} {}", bytes / unit, names[index]);
    }
    const double value = static_cast<double>(bytes) / static_cast<double>(unit);
    // 1023.999 MiB would print as "1024.00 MiB": say "1 GiB" instead.
    if (value >= 1023.995 && index + 1 < names.size()) {
        return fmt::format("{:.2f} {}", value / 1024, names[index + 1]);
    }
    return fmt::format("{:.2f} {}", value, names[index]);
}

} // namespace base
