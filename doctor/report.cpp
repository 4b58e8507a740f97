#include "doctor/report.hpp"

#include "doctor/probe.hpp"

#include <fmt/format.h>
#include <map>

namespace doctor {

namespace {

const char* color_of(Severity s)
{
    switch (s) {
    case Severity::pass:
        return "\033[32m";
    case Severity::warn:
        return "\033[33m";
    case Severity::fail:
        return "\033[31m";
    case Severity::error:
        return "\033[35m";
    case Severity::skip:
        return "\033[2m";
    }
    return "";
}

std::string host_of(const Facts& facts)
{
    const auto* host = collector_facts(facts, "host");
    if (host != nullptr && host->is_object() && host->contains("hostname") && (*host)["hostname"].is_string()) {
        return (*host)["hostname"].get<std::string>();
    }
    return "";
}

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

} // namespace

std::string render_text(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options)
{
    std::string out;
    const std::string host = host_of(facts);
    if (!options.quiet) {
        out += fmt::format("gpudoctor check{}\n", host.empty() ? "" : " on " + host);
    }
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            const bool problem =
                f.severity == Severity::warn || f.severity == Severity::fail || f.severity == Severity::error;
            if (options.quiet && !problem) {
                continue;
            }
            std::string label = fmt::format("{:<5}", to_string(f.severity));
            for (auto& c : label) {
                c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            }
            if (options.color) {
                label = fmt::format("{}{}\033[0m", color_of(f.severity), label);
            }
            out += fmt::format("{} {:<10} {}: {}  [{}]\n", label, r.probe->name, f.subject, f.message, f.code);
            if (problem && !f.remedy.empty()) {
                out += fmt::format("      {:<10} fix: {}\n", "", f.remedy);
            }
        }
    }
    auto n = count(results);
    const int code = exit_code(results, options.strict);
    out += fmt::format("{} pass, {} warn, {} fail, {} error, {} skip: {}\n", n[Severity::pass], n[Severity::warn],
        n[Severity::fail], n[Severity::error], n[Severity::skip],
        code == 0 ? (n[Severity::warn] > 0 ? "fit to train, with warnings" : "fit to train") : "NOT fit to train");
    return out;
}

nlohmann::json render_json(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options)
{
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& r : results) {
        nlohmann::json findings = nlohmann::json::array();
        for (const auto& f : r.findings) {
            findings.push_back({{"code", f.code}, {"severity", to_string(f.severity)}, {"subject", f.subject},
                {"message", f.message}, {"remedy", f.remedy}, {"facts", f.facts}});
        }
        probes.push_back({{"name", r.probe->name}, {"summary", r.probe->summary}, {"findings", findings}});
    }
    auto n = count(results);
    const std::string host = host_of(facts);
    nlohmann::json out = {{"host", host.empty() ? nlohmann::json(nullptr) : nlohmann::json(host)},
        {"exit_code", exit_code(results, options.strict)}, {"strict", options.strict},
        {"summary",
            {{"pass", n[Severity::pass]}, {"warn", n[Severity::warn]}, {"fail", n[Severity::fail]},
                {"error", n[Severity::error]}, {"skip", n[Severity::skip]}}},
        {"probes", probes}};
    // Every number the deep tier measured, as its collectors reported them.
    nlohmann::json measurements = nlohmann::json::object();
    for (const auto& c : collector_table()) {
        if (c.deep && facts.is_object() && facts.contains(c.name)) {
            measurements[c.name] = facts[c.name];
        }
    }
    if (!measurements.empty()) {
        out["measurements"] = measurements;
    }
    return out;
}

} // namespace doctor
