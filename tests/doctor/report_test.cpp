#include "doctor/engine/report.hpp"
#include "tests/support/doctor_support.hpp"

#include <gtest/gtest.h>

namespace {

using doctor::engine::ProbeResult;
using doctor::engine::Severity;
using test_support::make_finding;
using test_support::probe_named;

TEST(FailSummary, FirstFailingFindingInTableOrderWithTheCountOfOthers)
{
    std::vector<ProbeResult> results = {
        {&probe_named("driver"), {make_finding("driver.ok", Severity::pass, "host", "ok")}},
        {&probe_named("gpus"),
            {make_finding("gpus.persistence_off", Severity::warn, "gpu 6", "persistence off"),
                make_finding(
                    "gpus.ecc_uncorrected", Severity::fail, "gpu 1 (0000:0f:00.0)", "4 uncorrected ECC errors"),
                make_finding("gpus.throttled", Severity::fail, "gpu 3", "clocks held down")}},
        {&probe_named("mpi"), {make_finding("mpi.error", Severity::error, "host", "timed out\nafter 10 s")}},
    };
    EXPECT_EQ(doctor::engine::render_fail_summary(results, {}),
        "gpus.ecc_uncorrected: gpu 1 (0000:0f:00.0): 4 uncorrected ECC errors (+2 more)\n");
    doctor::engine::ReportOptions strict;
    strict.strict = true;
    EXPECT_EQ(doctor::engine::render_fail_summary(results, strict),
        "gpus.persistence_off: gpu 6: persistence off (+3 more)\n");
    // One line, always.
    std::vector<ProbeResult> broken = {
        {&probe_named("mpi"), {make_finding("mpi.error", Severity::error, "host", "timed out\nafter 10 s")}}};
    EXPECT_EQ(doctor::engine::render_fail_summary(broken, {}), "mpi.error: host: timed out after 10 s\n");
}

TEST(FailSummary, FitNodeGetsTheSummaryLine)
{
    std::vector<ProbeResult> results = {{&probe_named("gpus"),
        {make_finding("gpus.ok", Severity::pass, "gpu 0", "fine"),
            make_finding("gpus.busy", Severity::warn, "gpu 0", "busy"),
            make_finding("gpus.x", Severity::skip, "host", "not checked")}}};
    EXPECT_EQ(doctor::engine::render_fail_summary(results, {}),
        "1 pass, 1 warn, 0 fail, 0 error, 1 skip: fit to train, with "
        "warnings\n");
    EXPECT_FALSE(doctor::engine::is_failing(results[0].findings[1], false));
    EXPECT_TRUE(doctor::engine::is_failing(results[0].findings[1], true));
    EXPECT_FALSE(doctor::engine::is_failing(results[0].findings[2], true));
}

TEST(TextReport, ControlCharactersFromTheFactsAreEscaped)
{
    // A GPU name or driver version from a snapshot may hold terminal escape sequences.
    std::vector<ProbeResult> results = {{&probe_named("gpus"),
        {make_finding(
            "gpus.ecc_uncorrected", Severity::fail, "gpu 0 (\x1b]0;owned\x07)", "NVIDIA \x1b[2J\x1b[32mH100\r\nok")}}};
    results[0].findings[0].remedy = "drain\x1b[8m";
    const doctor::engine::Facts facts = test_support::facts_of({{"host", {{"hostname", "n01\x1b[1A"}}}});
    const std::string text = doctor::engine::render_text(results, facts, {});
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << text;
    EXPECT_NE(text.find("gpudoctor check on n01\\x1b[1A\n"), std::string::npos) << text;
    EXPECT_NE(text.find("gpu 0 (\\x1b]0;owned\\x07): NVIDIA \\x1b[2J\\x1b[32mH100\\x0d\\x0aok  "), std::string::npos)
        << text;
    EXPECT_NE(text.find("fix: drain\\x1b[8m\n"), std::string::npos) << text;
    EXPECT_EQ(doctor::engine::render_fail_summary(results, {}),
        "gpus.ecc_uncorrected: gpu 0 (\\x1b]0;owned\\x07): NVIDIA \\x1b[2J\\x1b[32mH100  ok\n");
}

} // namespace

TEST(JsonReport, EachProbeSaysHowLongItsSlowestCollectorTook)
{
    doctor::engine::Probe two;
    two.name = "two";
    two.collectors = {"a", "b"};
    doctor::engine::Probe none;
    none.name = "none";
    none.collectors = {"c"};
    const std::vector<doctor::engine::ProbeResult> results = {
        {&two, {make_finding("two.ok", Severity::pass, "host", "fine")}},
        {&none, {make_finding("none.ok", Severity::pass, "host", "fine")}}};
    doctor::engine::ReportOptions options;
    options.collector_seconds = {{"a", 0.0123}, {"b", 0.4567}};
    const auto j = doctor::engine::render_json(results, doctor::engine::Facts{}, options);
    EXPECT_EQ(j["probes"][0]["seconds"], 0.457) << "they run at once: the slowest";
    EXPECT_FALSE(j["probes"][1].contains("seconds")) << "a collector not timed";
    EXPECT_EQ(j["collect_seconds"], (nlohmann::json{{"a", 0.012}, {"b", 0.457}}));
    // From a snapshot nothing was timed: no numbers at all.
    const auto from = doctor::engine::render_json(results, doctor::engine::Facts{}, doctor::engine::ReportOptions{});
    EXPECT_FALSE(from.contains("collect_seconds"));
    EXPECT_FALSE(from["probes"][0].contains("seconds"));
}
