#pragma once

// What the findings of gpudoctor's file readers (nccl-log, profile) share: their severities, the
// --fail-on level that turns them into exit status 1, and the long text of every finding code.

#include <optional>
#include <string>

namespace probes {

/// How bad a finding of a log or trace reader is. (gpudoctor check's probes have their own
/// severities, with pass, skip and error.)
enum class Severity { info, warn, fail };

/// "info", "warn", "fail".
const char* to_string(Severity severity);

/// --fail-on LEVEL: nullopt for "" (the exit status does not depend on findings), else warn or
/// fail. Throws probes::Error "--fail-on LEVEL: expected warn or fail (did you mean ...?)".
std::optional<Severity> parse_fail_on(const std::string& level);

/// Whether a finding of `severity` makes the reader exit 1 under --fail-on `threshold`.
inline bool fails(Severity severity, const std::optional<Severity>& threshold)
{
    return threshold && static_cast<int>(severity) >= static_cast<int>(*threshold);
}

/// The title, explanation and remedy of a finding code, for `gpudoctor explain` and the man page.
struct CodeText {
    const char* code;
    Severity severity;
    const char* title;
    const char* explanation;
    const char* remedy;
};

} // namespace probes
