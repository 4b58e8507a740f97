#pragma once

#include <string>
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

/// `text` with the letters from `first` to `last` moved by `shift` (ASCII only, whatever the locale).
inline std::string shift_letters(std::string_view text, char first, char last, int shift)
{
    std::string out(text);
    for (char& c : out) {
        if (c >= first && c <= last) {
            c = static_cast<char>(c + shift);
        }
    }
    return out;
}

/// `text` with its ASCII letters in upper case (std::toupper in the C locale, whatever the locale).
inline std::string upper_case(std::string_view text)
{
    return shift_letters(text, 'a', 'z', 'A' - 'a');
}

/// `text` with its ASCII letters in lower case.
inline std::string lower_case(std::string_view text)
{
    return shift_letters(text, 'A', 'Z', 'a' - 'A');
}

} // namespace base
