#include "doctor/engine/junit_report.hpp"
#include "tests/support/doctor_support.hpp"

#include <gtest/gtest.h>
#include <regex>

namespace {

using doctor::engine::ProbeResult;
using doctor::engine::Severity;
using test_support::make_finding;
using test_support::probe_named;

std::vector<ProbeResult> results()
{
    return {
        {&probe_named("driver"), {make_finding("driver.ok", Severity::pass, "host", "NVIDIA driver 550.54.15")}},
        {&probe_named("gpus"),
            {make_finding("gpus.ecc_uncorrected", Severity::fail, "gpu 1 (0000:0f:00.0)", "4 uncorrected ECC errors",
                 "drain the node & reset the GPU"),
                make_finding(
                    "gpus.persistence_off", Severity::warn, "gpu 6", "persistence mode is off", "nvidia-smi -pm 1")}},
        {&probe_named("p2p"), {make_finding("p2p.acs_unreadable", Severity::skip, "host", "ACS <not> checked")}},
        {&probe_named("mpi"), {make_finding("mpi.error", Severity::error, "host", "timed out after 10 s")}},
    };
}

/// Whether the tags of `xml` nest properly (our output has no comments, CDATA or processing
/// instructions besides the declaration) and no '&' starts anything but an entity.
bool well_formed(const std::string& xml)
{
    static const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9_-]*)((?:\s+[a-zA-Z_.-]+="[^"<]*")*)\s*(/?)>)");
    std::string body = xml.substr(xml.find("?>") + 2);
    std::vector<std::string> open;
    std::size_t at = 0;
    for (std::sregex_iterator it(body.begin(), body.end(), tag), end; it != end; ++it) {
        const std::string between = body.substr(at, static_cast<std::size_t>(it->position()) - at);
        if (between.find('<') != std::string::npos || between.find('>') != std::string::npos) {
            return false;
        }
        at = static_cast<std::size_t>(it->position() + it->length());
        if ((*it)[1] == "/") {
            if (open.empty() || open.back() != (*it)[2]) {
                return false;
            }
            open.pop_back();
        } else if ((*it)[4] != "/") {
            open.push_back((*it)[2]);
        }
    }
    static const std::regex bare_amp(R"(&(?!(amp|lt|gt|quot|apos|#[0-9]+);))");
    return open.empty() && !std::regex_search(xml, bare_amp) && xml.rfind("<?xml version=\"1.0\"", 0) == 0;
}

TEST(XmlEscape, EntitiesAndControlCharacters)
{
    EXPECT_EQ(doctor::engine::xml_escape("a & b <c> \"d\" 'e'"), "a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;");
    EXPECT_EQ(doctor::engine::xml_escape("line\nnext\ttab\x01"), "line&#10;next&#9;tab?");
    EXPECT_EQ(doctor::engine::xml_escape("gpu 0 ↔ gpu 7"), "gpu 0 ↔ gpu 7");
}

TEST(JunitReport, OneTestcasePerFindingWithFailuresAndSkips)
{
    const std::string xml = doctor::engine::render_junit(
        doctor::engine::check_verdict(results(), test_support::facts_of({{"host", {{"hostname", "gpu-a01"}}}}), false),
        0, "0.1.0");
    EXPECT_TRUE(well_formed(xml)) << xml;
    EXPECT_NE(xml.find("<testsuites name=\"gpudoctor\" tests=\"5\" failures=\"2\" errors=\"0\" skipped=\"1\">"),
        std::string::npos)
        << xml;
    EXPECT_NE(xml.find("<testsuite name=\"gpudoctor check on gpu-a01\" tests=\"5\" failures=\"2\" errors=\"0\" "
                       "skipped=\"1\" timestamp=\"1970-01-01T00:00:00\" hostname=\"gpu-a01\">"),
        std::string::npos);
    EXPECT_NE(
        xml.find("<testcase name=\"gpus: gpus.ecc_uncorrected (gpu 1 (0000:0f:00.0))\" classname=\"gpudoctor.gpus\">\n"
                 "      <failure type=\"fail\" message=\"4 uncorrected ECC errors\">FAIL gpu 1 (0000:0f:00.0): 4 "
                 "uncorrected ECC errors&#10;fix: drain the node &amp; reset the GPU</failure>\n"
                 "    </testcase>"),
        std::string::npos)
        << xml;
    EXPECT_NE(xml.find("<failure type=\"error\" message=\"timed out after 10 s\">"), std::string::npos);
    EXPECT_NE(xml.find("<testcase name=\"p2p: p2p.acs_unreadable (host)\" classname=\"gpudoctor.p2p\">\n"
                       "      <skipped message=\"ACS &lt;not&gt; checked\"/>"),
        std::string::npos);
    EXPECT_NE(xml.find("<system-out>PASS host: NVIDIA driver 550.54.15</system-out>"), std::string::npos);
    // A warning passes, with its remedy in the output.
    EXPECT_NE(xml.find("<system-out>WARN gpu 6: persistence mode is off&#10;fix: nvidia-smi -pm 1</system-out>"),
        std::string::npos);
    EXPECT_NE(xml.find("<property name=\"gpudoctor.exit_code\" value=\"1\"/>"), std::string::npos);
}

TEST(JunitReport, StrictWarningsFail)
{
    const std::string xml = doctor::engine::render_junit(
        doctor::engine::check_verdict(results(), doctor::engine::Facts{}, true), 1732950000, "0.1.0");
    EXPECT_TRUE(well_formed(xml)) << xml;
    EXPECT_NE(xml.find("failures=\"3\""), std::string::npos);
    EXPECT_NE(xml.find("<failure type=\"warn\" message=\"persistence mode is off\">"), std::string::npos);
    EXPECT_NE(xml.find("<testsuite name=\"gpudoctor check\" "), std::string::npos);
    EXPECT_NE(xml.find("timestamp=\"2024-11-30T07:00:00\" hostname=\"unknown\""), std::string::npos);
    EXPECT_NE(xml.find("<property name=\"gpudoctor.strict\" value=\"true\"/>"), std::string::npos);
}

TEST(JunitReport, HostileTextStaysWellFormed)
{
    std::vector<ProbeResult> odd = {{&probe_named("nccl-env"),
        {make_finding("nccl-env.socket_ifname_missing", Severity::fail, "NCCL_SOCKET_IFNAME=\"<eth>&'\"",
            "]]> </failure> \x02\n<x>", "a & b")}}};
    const std::string xml = doctor::engine::render_junit(
        doctor::engine::check_verdict(odd, test_support::facts_of({{"host", {{"hostname", "n<1>"}}}}), false), 0,
        "0.1.0");
    EXPECT_TRUE(well_formed(xml)) << xml;
    EXPECT_NE(xml.find("hostname=\"n&lt;1&gt;\""), std::string::npos);
}

TEST(JunitReport, NcclLogAndProfileFindingsAreOneSuiteNamedAfterTheSubcommand)
{
    const auto verdict = doctor::engine::findings_verdict("nccl-log",
        {make_finding("nccl.watchdog_timeout", Severity::fail, "job", "timed out"),
            make_finding("nccl.no_connections", Severity::warn, "log", "no lines"),
            make_finding("nccl.transports", Severity::info, "job", "P2P")},
        Severity::fail);
    const std::string xml = doctor::engine::render_junit(verdict, 0, "0.1.0");
    EXPECT_TRUE(well_formed(xml)) << xml;
    EXPECT_NE(xml.find("<testsuite name=\"gpudoctor nccl-log\" tests=\"3\" failures=\"1\""), std::string::npos) << xml;
    EXPECT_NE(xml.find("classname=\"gpudoctor.nccl-log\""), std::string::npos);
    EXPECT_NE(xml.find("<property name=\"gpudoctor.subcommand\" value=\"nccl-log\"/>"), std::string::npos);
    // --fail-on warn: the warning fails too.
    const auto warn = doctor::engine::findings_verdict("profile", verdict.groups[0].findings, Severity::warn);
    EXPECT_NE(doctor::engine::render_junit(warn, 0, "v").find("failures=\"2\""), std::string::npos);
    EXPECT_EQ(warn.exit_code(), 1);
    EXPECT_EQ(
        doctor::engine::findings_verdict("profile", {verdict.groups[0].findings[2]}, Severity::warn).exit_code(), 0)
        << "info never fails";
}

} // namespace
