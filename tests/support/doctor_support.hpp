#pragma once

#include "doctor/check/probe.hpp"
#include "doctor/check/runner.hpp"
#include "doctor/checks/checks.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace test_support {

/// The probe called `name` from the table.
inline const doctor::check::Probe& probe_named(const std::string& name)
{
    for (const auto& p : doctor::checks::probe_table()) {
        if (p.name == name) {
            return p;
        }
    }
    throw std::runtime_error("no probe " + name);
}

/// The collector called `name` from the table.
inline const doctor::check::Collector& collector_named(const std::string& name)
{
    for (const auto& c : doctor::checks::collector_table()) {
        if (c.name == name) {
            return c;
        }
    }
    throw std::runtime_error("no collector " + name);
}

/// The findings of one probe judged on `facts` (with the runner's handling of missing and
/// broken collectors).
inline std::vector<doctor::check::Finding> judge_one(const std::string& probe, const doctor::check::Facts& facts,
    const doctor::check::Policy& policy = doctor::check::Policy::defaults())
{
    auto results = doctor::check::judge({&probe_named(probe)}, facts, policy);
    return results.front().findings;
}

/// A finding made up for a renderer's test.
inline doctor::check::Finding make_finding(const std::string& code, doctor::check::Severity severity,
    const std::string& subject, const std::string& message = "m", const std::string& remedy = "")
{
    doctor::check::Finding f;
    f.code = code;
    f.severity = severity;
    f.subject = subject;
    f.message = message;
    f.remedy = remedy;
    return f;
}

/// The first finding with this code, or nullptr.
inline const doctor::check::Finding* find_code(
    const std::vector<doctor::check::Finding>& findings, const std::string& code)
{
    auto it =
        std::find_if(findings.begin(), findings.end(), [&](const doctor::check::Finding& f) { return f.code == code; });
    return it == findings.end() ? nullptr : &*it;
}

/// Codes of the findings with this severity, in order.
inline std::vector<std::string> codes_with(
    const std::vector<doctor::check::Finding>& findings, doctor::check::Severity s)
{
    std::vector<std::string> out;
    for (const auto& f : findings) {
        if (f.severity == s) {
            out.push_back(f.code);
        }
    }
    return out;
}

} // namespace test_support
