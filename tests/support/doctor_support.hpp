#pragma once

#include "doctor/engine/probe.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace test_support {

/// The probe called `name` from the table.
inline const doctor::engine::Probe& probe_named(const std::string& name)
{
    for (const auto& p : doctor::probes::probe_table()) {
        if (p.name == name) {
            return p;
        }
    }
    throw std::runtime_error("no probe " + name);
}

/// The collector called `name` from the table.
inline const doctor::engine::Collector& collector_named(const std::string& name)
{
    for (const auto& c : doctor::probes::collector_table()) {
        if (c.name == name) {
            return c;
        }
    }
    throw std::runtime_error("no collector " + name);
}

/// Facts written as a snapshot's "facts" object, read as gpudoctor reads them.
inline doctor::engine::Facts facts_of(const nlohmann::json& document)
{
    return doctor::engine::Facts::read(document, "the test's facts");
}

/// The findings of one probe judged on `facts` (with the runner's handling of missing and
/// broken collectors).
inline std::vector<doctor::engine::Finding> judge_one(const std::string& probe, const doctor::engine::Facts& facts,
    const doctor::engine::Policy& policy = doctor::engine::Policy::defaults())
{
    auto results = doctor::engine::judge({&probe_named(probe)}, facts, policy);
    return results.front().findings;
}

/// The same on facts written as a snapshot's "facts" object.
inline std::vector<doctor::engine::Finding> judge_one(const std::string& probe, const nlohmann::json& facts,
    const doctor::engine::Policy& policy = doctor::engine::Policy::defaults())
{
    return judge_one(probe, facts_of(facts), policy);
}

/// A finding made up for a renderer's test.
inline doctor::engine::Finding make_finding(const std::string& code, doctor::engine::Severity severity,
    const std::string& subject, const std::string& message = "m", const std::string& remedy = "")
{
    doctor::engine::Finding f;
    f.code = code;
    f.severity = severity;
    f.subject = subject;
    f.message = message;
    f.remedy = remedy;
    return f;
}

/// The first finding with this code, or nullptr.
inline const doctor::engine::Finding* find_code(
    const std::vector<doctor::engine::Finding>& findings, const std::string& code)
{
    auto it = std::find_if(
        findings.begin(), findings.end(), [&](const doctor::engine::Finding& f) { return f.code == code; });
    return it == findings.end() ? nullptr : &*it;
}

/// Codes of the findings with this severity, in order.
inline std::vector<std::string> codes_with(
    const std::vector<doctor::engine::Finding>& findings, doctor::engine::Severity s)
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
