#pragma once

#include "doctor/runner.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace doctor {

struct ReportOptions {
    bool color = false;
    bool quiet = false; ///< only problems (warn, fail, error) and the summary line
    bool strict = false;
};

/// The text report for people: one line per finding, grouped by probe, the remedy under each
/// problem, then a summary line with the exit status.
std::string render_text(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options);

/// The same for programs: {"host", "exit_code", "summary": {pass, warn, fail, skip, error},
/// "probes": [{"name", "summary", "findings": [{code, severity, subject, message, remedy, facts}]}]}.
nlohmann::json render_json(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options);

} // namespace doctor
