#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace probes {

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

/// A message as it may go to a terminal: control characters (but newline and tab) and DEL written
/// as \xNN, since messages quote what the user gave, which may hold escape sequences.
inline std::string printable(std::string_view message)
{
    std::string out;
    out.reserve(message.size());
    for (const char c : message) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
            char escaped[5];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
            out += escaped;
        } else {
            out += c;
        }
    }
    return out;
}

} // namespace probes
