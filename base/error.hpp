#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace base {

/// The one error type of the project. Its message reads "what: why" in lower case and names the
/// value that was wrong and what to do; `main` prints it once and picks the exit code.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) { }
};

/// The tool could not do its work on this machine (NVML needed and missing, the topology of this
/// machine unreadable): exit status 3, "could not run", where an Error is the user's input (2).
class Unavailable : public std::runtime_error {
public:
    explicit Unavailable(const std::string& message) : std::runtime_error(message) { }
};

/// `text` with control characters and DEL written as \xNN; newline and tab kept when `lines`.
inline std::string escape_controls(std::string_view text, bool lines)
{
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte < 0x20 && !(lines && (c == '\n' || c == '\t'))) || byte == 0x7f) {
            char escaped[5];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
            out += escaped;
        } else {
            out += c;
        }
    }
    return out;
}

/// A message as it may go to a terminal: control characters (but newline and tab) and DEL written
/// as \xNN, since messages quote what the user gave, which may hold escape sequences.
inline std::string printable(std::string_view message)
{
    return escape_controls(message, true);
}

/// What the user gave, as a message quotes it: in single quotes, every control character
/// (newline too) as \xNN, and only the first 200 bytes with the count of the rest, so that a 60 MB
/// host name or a newline in CUDA_VISIBLE_DEVICES makes one short line.
inline std::string quote_input(std::string_view input)
{
    constexpr std::size_t shown = 200;
    std::string out = "'" + escape_controls(input.substr(0, shown), false) + "'";
    if (input.size() > shown) {
        out += " (first " + std::to_string(shown) + " of " + std::to_string(input.size()) + " bytes)";
    }
    return out;
}

} // namespace base
