#pragma once

// --junit FILE (check, nccl-log, profile): the verdict as the JUnit XML that CI systems (Jenkins,
// GitLab, GitHub test reporters) list as test results, so a cluster image's CI shows which check
// failed.

#include "doctor/engine/verdict.hpp"

#include <string>
#include <string_view>

namespace doctor::engine {

/// Text for XML content and attribute values: & < > " ' as entities, newline and tab in
/// attributes as character references, and the control characters XML 1.0 forbids as '?'.
std::string xml_escape(std::string_view text);

/// One <testsuites> with one <testsuite> ("gpudoctor check on HOST", "gpudoctor nccl-log"), one
/// <testcase> per finding named "<group>: <code> (<subject>)" with classname "gpudoctor.<group>":
/// findings that fail the verdict carry <failure type="fail|error|warn">, skip findings
/// <skipped>, the others pass with their line in <system-out>. `now` (Unix time) is the suite's
/// timestamp.
std::string render_junit(const Verdict& verdict, double now, const std::string& version);

} // namespace doctor::engine
