#pragma once

#include <string_view>

namespace base {

/// Whether `c` is ASCII white space: space, tab, newline, vertical tab, form feed, carriage return
/// (std::isspace in the C locale, whatever the locale).
constexpr bool is_blank(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/// `text` without the white space (is_blank) at either end.
constexpr std::string_view trim_blanks(std::string_view text)
{
    while (!text.empty() && is_blank(text.front())) {
        text.remove_prefix(1);
    }
    while (!text.empty() && is_blank(text.back())) {
        text.remove_suffix(1);
    }
    return text;
}

} // namespace base
