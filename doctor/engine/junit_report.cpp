#include "doctor/engine/junit_report.hpp"
#include "base/text.hpp"

#include <ctime>
#include <fmt/format.h>

namespace doctor::engine {

namespace {

std::string utc_timestamp(double now)
{
    const auto seconds = static_cast<std::time_t>(now);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char text[32] = {};
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    return text;
}

std::string finding_line(const Finding& f)
{
    return fmt::format("{} {}: {}", base::upper_case(to_string(f.severity)), f.subject, f.message);
}

} // namespace

std::string xml_escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        case '\'':
            out += "&apos;";
            break;
        case '\n':
            out += "&#10;";
            break;
        case '\t':
            out += "&#9;";
            break;
        case '\r':
            out += "&#13;";
            break;
        default:
            out += u < 0x20 || u == 0x7f ? '?' : c;
        }
    }
    return out;
}

std::string render_junit(const Verdict& verdict, double now, const std::string& version)
{
    unsigned tests = 0;
    unsigned failures = 0;
    unsigned skipped = 0;
    std::string cases;
    for (const auto& g : verdict.groups) {
        for (const auto& f : g.findings) {
            ++tests;
            cases += fmt::format("    <testcase name=\"{}\" classname=\"gpudoctor.{}\">\n",
                xml_escape(fmt::format("{}: {} ({})", g.name, f.code, f.subject)), xml_escape(g.name));
            const std::string line = finding_line(f);
            if (verdict.failing(f)) {
                ++failures;
                std::string body = line;
                if (!f.remedy.empty()) {
                    body += "\nfix: " + f.remedy;
                }
                cases += fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n", to_string(f.severity),
                    xml_escape(f.message), xml_escape(body));
            } else if (f.severity == Severity::skip) {
                ++skipped;
                cases += fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(f.message));
            } else {
                std::string body = line;
                if (f.severity == Severity::warn && !f.remedy.empty()) {
                    body += "\nfix: " + f.remedy;
                }
                cases += fmt::format("      <system-out>{}</system-out>\n", xml_escape(body));
            }
            cases += "    </testcase>\n";
        }
    }
    const std::string& host = verdict.host;
    const std::string title = "gpudoctor " + verdict.subcommand;
    const bool strict = verdict.fail_on == Severity::warn;
    const std::string counts =
        fmt::format("tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\"", tests, failures, skipped);
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += fmt::format("<testsuites name=\"gpudoctor\" {}>\n", counts);
    out += fmt::format("  <testsuite name=\"{}\" {} timestamp=\"{}\" hostname=\"{}\">\n",
        xml_escape(host.empty() ? title : title + " on " + host), counts, utc_timestamp(now),
        xml_escape(host.empty() ? "unknown" : host));
    out += "    <properties>\n";
    out += fmt::format("      <property name=\"gpudoctor.version\" value=\"{}\"/>\n", xml_escape(version));
    out +=
        fmt::format("      <property name=\"gpudoctor.subcommand\" value=\"{}\"/>\n", xml_escape(verdict.subcommand));
    out += fmt::format("      <property name=\"gpudoctor.exit_code\" value=\"{}\"/>\n", verdict.exit_code());
    out += fmt::format("      <property name=\"gpudoctor.strict\" value=\"{}\"/>\n", strict ? "true" : "false");
    out += "    </properties>\n";
    out += cases;
    out += "  </testsuite>\n</testsuites>\n";
    return out;
}

} // namespace doctor::engine
