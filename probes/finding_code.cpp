#include "probes/finding_code.hpp"

#include "probes/error.hpp"
#include "probes/spelling.hpp"

#include <fmt/format.h>

namespace probes {

const char* to_string(Severity severity)
{
    switch (severity) {
    case Severity::info:
        return "info";
    case Severity::warn:
        return "warn";
    case Severity::fail:
        return "fail";
    }
    return "?";
}

std::optional<Severity> parse_fail_on(const std::string& level)
{
    if (level.empty()) {
        return std::nullopt;
    }
    if (level == "warn") {
        return Severity::warn;
    }
    if (level == "fail") {
        return Severity::fail;
    }
    const std::string hint = closest_match(level, {"warn", "fail"});
    throw Error(fmt::format(
        "--fail-on {}: expected warn or fail{}", level, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

} // namespace probes
