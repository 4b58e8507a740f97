#pragma once

// gpudoctor check --junit FILE: the report as the JUnit XML that CI systems (Jenkins, GitLab,
// GitHub test reporters) list as test results, so a cluster image's CI shows which check failed.

#include "doctor/report.hpp"
#include "doctor/runner.hpp"

#include <string>
#include <string_view>

namespace doctor {

/// Text for XML content and attribute values: & < > " ' as entities, newline and tab in
/// attributes as character references, and the control characters XML 1.0 forbids as '?'.
std::string xml_escape(std::string_view text);

/// One <testsuites> with one <testsuite> ("gpudoctor check on HOST"), one <testcase> per finding
/// named "<probe>: <code> (<subject>)" with classname "gpudoctor.<probe>": fail and error findings
/// (and warn with --strict) carry <failure type="fail|error|warn">, skip findings <skipped>, the
/// others pass with their line in <system-out>. `now` (Unix time) is the suite's timestamp.
std::string render_junit(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options,
    double now, const std::string& version);

} // namespace doctor
