#pragma once

// Both programs parse their options with CLI11, which takes an empty value ("-H ''",
// "--topology ''") as given; each option's default then stood in for it, silently. Header only:
// the base library itself does not use CLI11.

#include "base/error.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace base {

/// Throws base::Error for the first option of `app` that takes a value and was given an empty
/// one: "--topology '': expected a file name".
inline void refuse_empty_values(const CLI::App& app)
{
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->get_items_expected_min() == 0 || opt->count() == 0) {
            continue;
        }
        for (const auto& value : opt->results()) {
            if (value.empty()) {
                const std::string type = opt->get_type_name();
                const char* expected = type.find("FILE") != std::string::npos ? "a file name"
                    : type.find("DIR") != std::string::npos                   ? "a directory"
                                                                              : "a value";
                const std::string name = opt->get_name().empty() ? opt->get_name(true) : opt->get_name(false, true);
                throw Error(fmt::format("{} '': expected {}", name, expected));
            }
        }
    }
}

/// CLI11 reads integers with strtoll(s, 0): "-np 010" was 8 ranks, "--master-port 0x50" port 80 and
/// "-np 08" an error, and floats with strtod, which takes "0x1p4". Given to an option's transform(),
/// this refuses anything but a decimal number (sign, digits, an optional fraction and exponent)
/// and drops leading zeros so that the conversion after it reads what a person reads: 010 is 10.
inline const CLI::Validator decimal_number(
    [](std::string& text) -> std::string {
        if (text.empty()) {
            return {}; // refuse_empty_values() says what was expected
        }
        std::size_t i = text.size() > 0 && (text[0] == '+' || text[0] == '-') ? 1 : 0;
        const std::size_t first_digit = i;
        auto digits = [&text, &i] {
            const std::size_t from = i;
            while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
                ++i;
            }
            return i - from;
        };
        std::size_t mantissa = digits();
        const std::size_t integer_end = i;
        if (i < text.size() && text[i] == '.') {
            ++i;
            mantissa += digits();
        }
        bool ok = mantissa > 0;
        if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
            ++i;
            if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
                ++i;
            }
            ok = digits() > 0;
        }
        if (!ok || i != text.size()) {
            return fmt::format("{} is not a decimal number", base::quote_input(text));
        }
        std::size_t zeros = 0;
        while (first_digit + zeros + 1 < integer_end && text[first_digit + zeros] == '0') {
            ++zeros;
        }
        text.erase(first_digit, zeros);
        return {};
    },
    "", "decimal");

/// A numeric option read as decimal_number reads it, shown in --help as `type`.
template <typename T>
CLI::Option* add_number(
    CLI::App& app, const std::string& name, T& value, const std::string& description, const std::string& type)
{
    return app.add_option(name, value, description)->transform(decimal_number)->type_name(type);
}

} // namespace base
