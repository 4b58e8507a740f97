#include "probes/finding.hpp"

#include "probes/error.hpp"
#include "probes/spelling.hpp"

#include <fmt/format.h>

namespace probes {

namespace {

/// Every severity's word and colour, in one table (the enum's order).
struct SeverityStyle {
    Severity severity;
    const char* word;
    const char* label;
    const char* color;
    int badness;
};

constexpr SeverityStyle styles[] = {
    {Severity::pass, "pass", "PASS ", "\033[32m", 0},
    {Severity::info, "info", "INFO ", "\033[36m", 0},
    {Severity::warn, "warn", "WARN ", "\033[33m", 1},
    {Severity::fail, "fail", "FAIL ", "\033[31m", 2},
    {Severity::skip, "skip", "SKIP ", "\033[2m", 0},
    {Severity::error, "error", "ERROR", "\033[35m", 2},
};

const SeverityStyle& style(Severity severity)
{
    return styles[static_cast<std::size_t>(severity)];
}

} // namespace

const char* to_string(Severity severity)
{
    return style(severity).word;
}

std::string severity_label(Severity severity, bool color)
{
    return color ? fmt::format("{}{}\033[0m", style(severity).color, style(severity).label) : style(severity).label;
}

const char* severity_color(Severity severity, bool color)
{
    return color ? style(severity).color : "";
}

const char* color_reset(bool color)
{
    return color ? "\033[0m" : "";
}

int badness(Severity severity)
{
    return style(severity).badness;
}

Severity parse_fail_on(const std::string& level)
{
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

std::string Where::str() const
{
    return line == 0 ? std::string() : fmt::format("{}:{}", file, line);
}

nlohmann::json to_json(const Finding& finding)
{
    nlohmann::json out{{"code", finding.code}, {"severity", to_string(finding.severity)}, {"subject", finding.subject},
        {"message", finding.message}, {"remedy", finding.remedy}};
    if (finding.where.known()) {
        out["where"] = finding.where.str();
    }
    if (finding.count > 0) {
        out["count"] = finding.count;
    }
    if (!finding.facts.is_null()) {
        out["facts"] = finding.facts;
    }
    return out;
}

std::string render_text(const Finding& finding, bool color, const std::string& indent)
{
    std::string out = fmt::format("{}{} {}: {}  [{}]\n", indent, severity_label(finding.severity, color),
        finding.subject, finding.message, finding.code);
    if (finding.where.known()) {
        out += fmt::format("{}      first at {}\n", indent, finding.where.str());
    }
    if (finding.severity != Severity::pass && !finding.remedy.empty()) {
        out += fmt::format("{}      fix: {}\n", indent, finding.remedy);
    }
    return out;
}

} // namespace probes
