#pragma once

#include <stdexcept>
#include <string>

namespace probes {

/// The one error type of the project. Its message reads "what: why" in lower case and names the
/// value that was wrong and what to do; `main` prints it once and picks the exit code.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) { }
};

} // namespace probes
