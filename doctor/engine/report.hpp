#pragma once

#include "doctor/engine/gpu_scope.hpp"
#include "doctor/engine/runner.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace doctor::engine {

struct ReportOptions {
    bool color = false;
    bool quiet = false; ///< only problems (warn, fail, error) and the summary line
    bool strict = false;
    GpuScope scope; ///< the GPUs judged (check --gpus, or the job's), said under the title
    std::vector<std::string> measured; ///< collectors whose facts are measurements (the deep tier)
    /// How long each collector took (none when the facts came from a snapshot): in JSON, each
    /// probe's `seconds` is its slowest collector's (they run at once), and `collect_seconds` all.
    std::map<std::string, double> collector_seconds;
};

/// The text report for people: one line per finding, grouped by probe, the remedy under each
/// problem, then a summary line with the exit status.
std::string render_text(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options);

/// The same for programs: {"host", "exit_code", "gpus_judged": scope_json(...), "summary": {pass, warn, fail, skip,
/// error}, "probes": [{"name", "summary", "findings": [{code, severity, subject, message, remedy, facts}]}]}.
nlohmann::json render_json(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options);

/// Whether a finding makes check exit 1: fail and error, and warn with `strict`.
bool is_failing(const Finding& finding, bool strict);

/// One line for scripts (check --fail-summary; the Slurm prolog's drain reason): when the check
/// fails, the first failing finding in table order as "CODE: SUBJECT: MESSAGE", with " (+N more)"
/// when others fail too; otherwise the summary line of the text report. No newline inside.
std::string render_fail_summary(const std::vector<ProbeResult>& results, const ReportOptions& options);

/// The checked node's hostname, from the host collector's facts; "" when they are missing.
std::string checked_host(const Facts& facts);

} // namespace doctor::engine
