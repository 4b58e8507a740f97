#include "doctor/engine/report.hpp"

#include "base/error.hpp"
#include "doctor/engine/probe.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace doctor::engine {

namespace {

std::map<Severity, unsigned> count(const std::vector<ProbeResult>& results)
{
    std::map<Severity, unsigned> n;
    for (auto s : {Severity::pass, Severity::warn, Severity::fail, Severity::skip, Severity::error}) {
        n[s] = 0;
    }
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            ++n[f.severity];
        }
    }
    return n;
}

/// "8 pass, 5 warn, 4 fail, 0 error, 1 skip: NOT fit to train", with its newline.
std::string summary_line(const std::vector<ProbeResult>& results, bool strict)
{
    auto n = count(results);
    const int code = exit_code(results, strict);
    return fmt::format("{} pass, {} warn, {} fail, {} error, {} skip: {}\n", n[Severity::pass], n[Severity::warn],
        n[Severity::fail], n[Severity::error], n[Severity::skip],
        code == 0 ? (n[Severity::warn] > 0 ? "fit to train, with warnings" : "fit to train") : "NOT fit to train");
}

/// Text from the facts (a GPU's name, a driver version, a host name) as a report line shows it: a
/// snapshot may hold terminal escape sequences, so control characters are written as \xNN.
std::string one_line(std::string_view text)
{
    return base::escape_controls(text, false);
}

} // namespace

std::string checked_host(const Facts& facts)
{
    if (const auto* host = facts.host().get()) {
        return host->hostname;
    }
    return "";
}

std::string render_text(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options)
{
    std::string out;
    const std::string host = checked_host(facts);
    if (!options.quiet) {
        out += fmt::format("gpudoctor check{}\n", host.empty() ? "" : " on " + one_line(host));
        if (const std::string scope = scope_line(options.scope); !scope.empty()) {
            out += fmt::format("judging {}\n", one_line(scope));
        }
    }
    for (const auto& r : results) {
        // The same finding about several GPUs (or ports) is one line, its remedy once.
        for (const auto& group : base::group_findings(r.findings)) {
            const Finding& f = *group.first;
            const bool problem = base::badness(f.severity) > 0;
            if (options.quiet && !problem) {
                continue;
            }
            out += fmt::format("{} {:<10} {}: {}  [{}]\n", base::severity_label(f.severity, options.color),
                r.probe->name, one_line(group.subject()), one_line(f.message), f.code);
            if (problem && !f.remedy.empty()) {
                out += fmt::format("      {:<10} fix: {}\n", "", one_line(f.remedy));
            }
        }
    }
    return out + summary_line(results, options.strict);
}

bool is_failing(const Finding& finding, bool strict)
{
    return base::fails(finding.severity, strict ? Severity::warn : Severity::fail);
}

std::string render_fail_summary(const std::vector<ProbeResult>& results, const ReportOptions& options)
{
    const Finding* first = nullptr;
    unsigned failing = 0;
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            if (is_failing(f, options.strict)) {
                first = first == nullptr ? &f : first;
                ++failing;
            }
        }
    }
    if (first == nullptr) {
        return summary_line(results, options.strict);
    }
    std::string line = fmt::format("{}: {}: {}", first->code, first->subject, first->message);
    if (failing > 1) {
        line += fmt::format(" (+{} more)", failing - 1);
    }
    for (auto& c : line) {
        c = c == '\n' || c == '\r' ? ' ' : c;
    }
    return one_line(line) + "\n";
}

nlohmann::json render_json(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options)
{
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& r : results) {
        nlohmann::json findings = nlohmann::json::array();
        for (const auto& f : r.findings) {
            findings.push_back(base::to_json(f));
        }
        probes.push_back({{"name", r.probe->name}, {"summary", r.probe->summary}, {"findings", findings}});
        double slowest = -1;
        for (const auto& c : r.probe->collectors) {
            if (auto t = options.collector_seconds.find(c); t != options.collector_seconds.end()) {
                slowest = std::max(slowest, t->second);
            }
        }
        if (slowest >= 0) {
            probes.back()["seconds"] = std::round(slowest * 1000) / 1000;
        }
    }
    auto n = count(results);
    const std::string host = checked_host(facts);
    nlohmann::json out = {{"host", host.empty() ? nlohmann::json(nullptr) : nlohmann::json(host)},
        {"exit_code", exit_code(results, options.strict)}, {"strict", options.strict},
        {"gpus_judged", scope_json(options.scope)},
        {"summary",
            {{"pass", n[Severity::pass]}, {"warn", n[Severity::warn]}, {"fail", n[Severity::fail]},
                {"error", n[Severity::error]}, {"skip", n[Severity::skip]}}},
        {"probes", probes}};
    // Every number the deep tier measured, as its collectors reported them.
    nlohmann::json measurements = nlohmann::json::object();
    for (const auto& name : options.measured) {
        if (const auto* measured = facts.raw(name)) {
            measurements[name] = *measured;
        }
    }
    if (!measurements.empty()) {
        out["measurements"] = measurements;
    }
    if (!options.collector_seconds.empty()) {
        nlohmann::json collected = nlohmann::json::object();
        for (const auto& [name, t] : options.collector_seconds) {
            collected[name] = std::round(t * 1000) / 1000;
        }
        out["collect_seconds"] = collected;
    }
    return out;
}

} // namespace doctor::engine
