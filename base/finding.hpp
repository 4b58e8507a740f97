#pragma once

// The one finding model of gpukit. Every subcommand that judges (gpudoctor check, nccl-log,
// profile, monitor; gpurun's --nccl-check) says what it found as Findings with the same fields,
// the same severity words and colours, the same JSON keys, and the same --fail-on rule.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace base {

/// How a finding came out. `pass`, `skip` and `error` belong to checks that ran (or could not run)
/// on a node: a check that did not run is never `pass`, it is `skip` with a reason, or `error` when
/// the check itself broke (timed out, crashed). `info`, `warn` and `fail` grade what a log or a
/// trace shows.
enum class Severity { pass, info, warn, fail, skip, error };

/// "pass", "info", "warn", "fail", "skip", "error": the word in JSON and in text.
const char* to_string(Severity severity);

/// The word as the text reports print it: upper case, padded to 5 ("FAIL "), in the severity's
/// colour (one table for every report) when `color`.
std::string severity_label(Severity severity, bool color);

/// The ANSI colour of a severity ("" when `color` is false) and the code that ends it.
const char* severity_color(Severity severity, bool color);
const char* color_reset(bool color);

/// How bad a severity is, for thresholds: pass, skip and info 0; warn 1; fail and error 2.
int badness(Severity severity);

/// --fail-on LEVEL: warn or fail. Throws base::Error "--fail-on LEVEL: expected warn or fail
/// (did you mean ...?)".
Severity parse_fail_on(const std::string& level);

/// Whether a finding of `severity` makes the subcommand exit 1 when `threshold` (warn or fail) is
/// the level that fails.
inline bool fails(Severity severity, Severity threshold)
{
    return badness(severity) >= badness(threshold) && badness(severity) > 0;
}

/// Where something was first seen: an input's name ("-" for stdin) and its 1-based line.
struct Where {
    std::string file;
    std::uint64_t line = 0;
    std::string str() const; ///< "file:line", or "" when unknown
    bool known() const { return line != 0; }
};

/// One conclusion. `code` is stable and documented (`gpudoctor explain CODE`).
struct Finding {
    std::string code; ///< "gpus.ecc_uncorrected", "nccl.shm_not_p2p"
    Severity severity = Severity::pass;
    std::string subject; ///< what it is about: "host", "gpu 3 (0000:47:00.0)", "gpu-a02", "log"
    std::string message; ///< what was seen, with the values
    std::string remedy; ///< what to do; empty for pass
    nlohmann::json facts = nullptr; ///< the numbers behind it
    Where where{}; ///< a log or trace finding: the first line that shows it
    std::uint64_t count = 0; ///< a log finding: the lines behind it
};

/// The JSON of a finding, the same for every subcommand: code, severity, subject, message, remedy,
/// and where, count and facts when they are known.
nlohmann::json to_json(const Finding& finding);

/// Findings that say the same thing (code, severity, message and remedy) about several subjects,
/// as a text report shows them: once, with the subjects listed. JSON keeps one entry per subject.
struct FindingGroup {
    const Finding* first = nullptr; ///< the first of them, for everything but the subject
    std::vector<std::string> subjects; ///< in the order they came
    /// "gpu 3 (0000:47:00.0)" for one; "gpus 0-3, 6" when every subject is a GPU; else the
    /// subjects joined by ", ".
    std::string subject() const;
};

/// `findings` grouped, in the order each group first appears.
std::vector<FindingGroup> group_findings(const std::vector<Finding>& findings);

/// A finding as the text reports of logs and traces print it, indented by `indent`:
/// "WARN  gpu-a02: shared memory ... on gpu-a02  [nccl.shm_not_p2p]", then "first at FILE:LINE" and
/// "fix: REMEDY" on lines of their own.
std::string render_text(const Finding& finding, bool color, const std::string& indent = "  ");

/// One finding code: the row that builds every finding of the code, and that `gpudoctor explain`,
/// `list --codes` and the man page read. Its remedy is the one a finding of it carries (none for a
/// pass); its message is written where the finding is made, with the values seen.
struct FindingCode {
    std::string code; ///< "gpus.ecc_uncorrected": <probe or subcommand>.<what>
    Severity severity = Severity::warn; ///< what its findings are
    std::string title; ///< a line: what the code means
    std::string explanation; ///< why it matters, how it is told
    /// What to do; "" where nothing is to be done. "{name}" in it is the value of `name` in the
    /// finding's facts ("setpci -s {bridge} ..."); explain and the man page show it as "<name>".
    std::string remedy;
    /// A second severity some of its findings have (gpus.count is pass or fail); none for most.
    std::optional<Severity> also{};

    /// A finding of this code about `subject` saying `message`, with the row's severity and remedy.
    Finding make(std::string subject, std::string message, nlohmann::json facts = nullptr) const;
    /// The same at `severity`, which must be the row's or its `also` (std::logic_error otherwise).
    Finding make(Severity severity, std::string subject, std::string message, nlohmann::json facts = nullptr) const;
    /// "fail", or "pass or fail" with `also`, in the order of badness.
    std::string severities() const;
    /// The remedy as explain and the man page show it: each "{name}" as "<name>".
    std::string remedy_shown() const;
};

/// The row of `code` in `table`. A code the table lacks is a programming error (std::logic_error).
const FindingCode& code_in(const std::vector<FindingCode>& table, std::string_view code);

/// A finding of `code` made by its row of `table` (code_in, then FindingCode::make).
Finding finding_from(
    const std::vector<FindingCode>& table, std::string_view code, std::string subject, std::string message);

} // namespace base
