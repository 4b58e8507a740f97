#include "doctor/junit_report.hpp"

#include "doctor/probe.hpp"

#include <ctime>
#include <fmt/format.h>

namespace doctor {

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
    std::string label = to_string(f.severity);
    for (auto& c : label) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return fmt::format("{} {}: {}", label, f.subject, f.message);
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

std::string render_junit(const std::vector<ProbeResult>& results, const Facts& facts, const ReportOptions& options,
    double now, const std::string& version)
{
    unsigned tests = 0;
    unsigned failures = 0;
    unsigned skipped = 0;
    std::string cases;
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            ++tests;
            cases += fmt::format("    <testcase name=\"{}\" classname=\"gpudoctor.{}\">\n",
                xml_escape(fmt::format("{}: {} ({})", r.probe->name, f.code, f.subject)), xml_escape(r.probe->name));
            const std::string line = finding_line(f);
            if (is_failing(f, options.strict)) {
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
    const std::string host = checked_host(facts);
    const std::string counts =
        fmt::format("tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\"", tests, failures, skipped);
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += fmt::format("<testsuites name=\"gpudoctor\" {}>\n", counts);
    out += fmt::format("  <testsuite name=\"{}\" {} timestamp=\"{}\" hostname=\"{}\">\n",
        xml_escape(host.empty() ? "gpudoctor check" : "gpudoctor check on " + host), counts, utc_timestamp(now),
        xml_escape(host.empty() ? "unknown" : host));
    out += "    <properties>\n";
    out += fmt::format("      <property name=\"gpudoctor.version\" value=\"{}\"/>\n", xml_escape(version));
    out += fmt::format(
        "      <property name=\"gpudoctor.exit_code\" value=\"{}\"/>\n", exit_code(results, options.strict));
    out += fmt::format("      <property name=\"gpudoctor.strict\" value=\"{}\"/>\n", options.strict ? "true" : "false");
    out += "    </properties>\n";
    out += cases;
    out += "  </testsuite>\n</testsuites>\n";
    return out;
}

} // namespace doctor
