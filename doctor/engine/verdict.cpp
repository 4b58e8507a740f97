#include "doctor/engine/verdict.hpp"

#include "base/atomic_file.hpp"
#include "doctor/engine/junit_report.hpp"
#include "doctor/engine/prometheus_report.hpp"
#include "doctor/engine/report.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>

namespace doctor::engine {

bool Verdict::failing(const Finding& finding) const
{
    return base::fails(finding.severity, fail_on);
}

int Verdict::exit_code() const
{
    return std::any_of(groups.begin(), groups.end(),
               [&](const Group& g) {
                   return std::any_of(
                       g.findings.begin(), g.findings.end(), [&](const Finding& f) { return failing(f); });
               })
        ? 1
        : 0;
}

Verdict check_verdict(const std::vector<ProbeResult>& results, const Facts& facts, bool strict)
{
    Verdict v{"check", checked_host(facts), {}, strict ? Severity::warn : Severity::fail};
    for (const auto& r : results) {
        v.groups.push_back({r.probe->name, r.findings});
    }
    return v;
}

Verdict findings_verdict(std::string subcommand, std::vector<Finding> findings, Severity fail_on)
{
    Verdict v{std::move(subcommand), "", {}, fail_on};
    v.groups.push_back({v.subcommand, std::move(findings)});
    return v;
}

void write_verdict_files(const VerdictFiles& files, const Verdict& verdict, const Facts* facts)
{
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::vector<base::OutputFile> outputs;
    if (!files.prometheus.empty()) {
        outputs.push_back({"--prometheus", files.prometheus, render_prometheus(verdict, facts, now, GPUKIT_VERSION)});
    }
    if (!files.junit.empty()) {
        outputs.push_back({"--junit", files.junit, render_junit(verdict, now, GPUKIT_VERSION)});
    }
    base::write_files_atomically(outputs);
}

std::string render_problems(const Verdict& verdict, bool color)
{
    std::string out;
    std::map<Severity, unsigned> n;
    for (const auto& g : verdict.groups) {
        for (const auto& f : g.findings) {
            ++n[f.severity];
            if (base::badness(f.severity) > 0) {
                out += base::render_text(f, color, "");
            }
        }
    }
    return out + fmt::format("{} fail, {} warn, {} error\n", n[Severity::fail], n[Severity::warn], n[Severity::error]);
}

} // namespace doctor::engine
