#include "doctor/engine/prometheus_report.hpp"
#include "tests/support/doctor_support.hpp"

#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace {

using doctor::engine::ProbeResult;
using doctor::engine::Severity;
using test_support::make_finding;
using test_support::probe_named;

/// Problems with `text` as the Prometheus text exposition format (0.0.4) that node_exporter's
/// textfile collector parses: every line a comment (# HELP/# TYPE) or a sample `name{labels}
/// value`, label values quoted with only \\ \" \n escapes, each family's HELP and TYPE before its
/// samples and the family in one block, no series twice, a final newline. Empty: valid.
std::vector<std::string> exposition_problems(const std::string& text)
{
    static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]*)");
    static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|untyped|summary|histogram))");
    static const std::regex sample(
        R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (NaN|[+-]Inf|[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?))");
    std::vector<std::string> problems;
    if (text.empty() || text.back() != '\n') {
        problems.push_back("no final newline");
    }
    std::set<std::string> helped, typed, finished, series;
    std::string current;
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        std::string family;
        if (std::regex_match(line, m, help)) {
            family = m[1];
            if (!helped.insert(family).second) {
                problems.push_back(std::to_string(n) + ": second HELP for " + family);
            }
        } else if (std::regex_match(line, m, type)) {
            family = m[1];
            if (!typed.insert(family).second) {
                problems.push_back(std::to_string(n) + ": second TYPE for " + family);
            }
        } else if (std::regex_match(line, m, sample)) {
            family = m[1];
            if (helped.count(family) == 0 || typed.count(family) == 0) {
                problems.push_back(std::to_string(n) + ": sample before HELP and TYPE: " + line);
            }
            if (!series.insert(m[1].str() + "{" + m[3].str() + "}").second) {
                problems.push_back(std::to_string(n) + ": duplicate series: " + line);
            }
        } else {
            problems.push_back(std::to_string(n) + ": not the exposition format: " + line);
            continue;
        }
        if (family != current) {
            if (finished.count(family) != 0) {
                problems.push_back(std::to_string(n) + ": family " + family + " split in two");
            }
            finished.insert(current);
            current = family;
        }
    }
    return problems;
}

/// The value of the series `name{labels}` ("" when absent), labels as written.
std::string value_of(const std::string& text, const std::string& series)
{
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(series + " ", 0) == 0) {
            return line.substr(series.size() + 1);
        }
    }
    return "";
}

std::vector<ProbeResult> results()
{
    return {
        {&probe_named("driver"), {make_finding("driver.ok", Severity::pass, "host")}},
        {&probe_named("gpus"),
            {make_finding("gpus.count", Severity::pass, "host"),
                make_finding("gpus.ecc_uncorrected", Severity::fail, "gpu 1 (0000:0f:00.0)"),
                make_finding("gpus.persistence_off", Severity::warn, "gpu 6 (0000:b7:00.0)")}},
        {&probe_named("p2p"), {make_finding("p2p.acs_unreadable", Severity::skip, "host")}},
        {&probe_named("mpi"), {make_finding("mpi.error", Severity::error, "host", "timed out after 10 s")}},
    };
}

doctor::engine::Facts facts()
{
    return test_support::facts_of(
        {{"nvml",
             {{"driver_file", nullptr}, {"nvml_loaded", true},
                 {"gpus",
                     {{{"index", 0}, {"bus_id", "0000:07:00.0"}, {"ecc_corrected", 2}, {"ecc_uncorrected", 0}},
                         {{"index", 1}, {"bus_id", "0000:0f:00.0"}, {"ecc_uncorrected", 4},
                             {"ecc_uncorrected_volatile", 1}}}}}},
            {"bandwidth",
                {{"gpus",
                     {{{"index", 0}, {"bus_id", "0000:07:00.0"}, {"h2d", {{"median_gbps", 24.5}}},
                          {"d2h", {{"median_gbps", 26}}}, {"d2d", {{"median_gbps", 700}}}},
                         {{"index", 1}, {"bus_id", "0000:0f:00.0"}, {"h2d", nullptr}, {"error", "copy failed"}}}},
                    {"peers", {{{"src", 0}, {"dst", 1}, {"bandwidth", {{"median_gbps", 40}}}, {"latency_us", 2.5}}}}}},
            {"allreduce", {{"ranks", 2}, {"busbw_gbps", 20.5}, {"algbw_gbps", 20.5}}}});
}

// check's metrics, as run_gpudoctor writes them.
std::string check_metrics(
    const std::vector<ProbeResult>& results, const doctor::engine::Facts& facts, double now, bool strict = false)
{
    return doctor::engine::render_prometheus(
        doctor::engine::check_verdict(results, facts, strict), &facts, now, "0.1.0");
}

TEST(PrometheusLabelValue, EscapesBackslashQuoteAndNewline)
{
    EXPECT_EQ(
        doctor::engine::prometheus_label_value("plain gpu 1 (0000:0f:00.0) ↔ x"), "plain gpu 1 (0000:0f:00.0) ↔ x");
    EXPECT_EQ(doctor::engine::prometheus_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(PrometheusReport, IsValidExpositionFormat)
{
    const std::string text = check_metrics(results(), facts(), 1700000000.25);
    EXPECT_EQ(exposition_problems(text), std::vector<std::string>{}) << text;
    // The validator itself catches what node_exporter would reject.
    EXPECT_FALSE(exposition_problems("x 1").empty());
    EXPECT_FALSE(exposition_problems("# HELP x h\n# TYPE x gauge\nx{a=\"b\\q\"} 1\n").empty());
    EXPECT_FALSE(exposition_problems("# HELP x h\n# TYPE x gauge\nx 1\nx 2\n").empty());
    EXPECT_FALSE(exposition_problems("x 1\n").empty());
}

TEST(PrometheusReport, ProbeStatusIsTheWorstFindingAndEachFindingHasASeries)
{
    const std::string text = check_metrics(results(), facts(), 1700000000.25);
    EXPECT_EQ(value_of(text, "gpudoctor_probe_status{subcommand=\"check\",probe=\"driver\"}"), "0");
    EXPECT_EQ(value_of(text, "gpudoctor_probe_status{subcommand=\"check\",probe=\"gpus\"}"), "3");
    EXPECT_EQ(value_of(text, "gpudoctor_probe_status{subcommand=\"check\",probe=\"p2p\"}"), "1");
    EXPECT_EQ(value_of(text, "gpudoctor_probe_status{subcommand=\"check\",probe=\"mpi\"}"), "4");
    EXPECT_EQ(value_of(text, "gpudoctor_probe_status{subcommand=\"check\",probe=\"network\"}"), ""); // not selected
    EXPECT_EQ(value_of(text,
                  "gpudoctor_finding{subcommand=\"check\",probe=\"gpus\",code=\"gpus.ecc_uncorrected\",severity="
                  "\"fail\",subject=\"gpu 1 "
                  "(0000:0f:00.0)\"}"),
        "3");
    EXPECT_EQ(value_of(text,
                  "gpudoctor_finding{subcommand=\"check\",probe=\"gpus\",code=\"gpus.persistence_off\",severity="
                  "\"warn\",subject=\"gpu 6 "
                  "(0000:b7:00.0)\"}"),
        "2");
    EXPECT_EQ(value_of(text, "gpudoctor_findings{subcommand=\"check\",severity=\"pass\"}"), "2");
    EXPECT_EQ(value_of(text, "gpudoctor_findings{subcommand=\"check\",severity=\"fail\"}"), "1");
    EXPECT_EQ(value_of(text, "gpudoctor_findings{subcommand=\"check\",severity=\"error\"}"), "1");
    EXPECT_EQ(value_of(text, "gpudoctor_exit_code{subcommand=\"check\"}"), "1");
    EXPECT_EQ(value_of(text, "gpudoctor_last_run_timestamp_seconds{subcommand=\"check\"}"), "1700000000.25");
    EXPECT_EQ(value_of(text, "gpudoctor_info{subcommand=\"check\",version=\"0.1.0\",strict=\"false\"}"), "1");
    EXPECT_NE(text.find("# TYPE gpudoctor_probe_status gauge\n"), std::string::npos);
    EXPECT_NE(text.find("# HELP gpudoctor_probe_status Worst finding of each probe that ran: 0 pass, 1 skip, 2 warn, "
                        "3 fail, 4 error.\n"),
        std::string::npos);
}

TEST(PrometheusReport, StrictWarningsSetTheExitCode)
{
    std::vector<ProbeResult> warned = {{&probe_named("gpus"), {make_finding("gpus.busy", Severity::warn, "gpu 0")}}};
    EXPECT_EQ(value_of(check_metrics(warned, {}, 1), "gpudoctor_exit_code{subcommand=\"check\"}"), "0");
    EXPECT_EQ(value_of(check_metrics(warned, {}, 1, true), "gpudoctor_exit_code{subcommand=\"check\"}"), "1");
}

TEST(PrometheusReport, NumericFactsInBaseUnits)
{
    const std::string text = check_metrics(results(), facts(), 1);
    EXPECT_EQ(value_of(text, "gpudoctor_gpus"), "2");
    EXPECT_EQ(value_of(text, "gpudoctor_gpu_ecc_errors{gpu=\"0\",bus_id=\"0000:07:00.0\",type=\"corrected\"}"), "2");
    EXPECT_EQ(value_of(text, "gpudoctor_gpu_ecc_errors{gpu=\"1\",bus_id=\"0000:0f:00.0\",type=\"uncorrected\"}"), "4");
    EXPECT_EQ(value_of(text, "gpudoctor_gpu_ecc_errors{gpu=\"1\",bus_id=\"0000:0f:00.0\",type=\"corrected\"}"), "");
    EXPECT_EQ(
        value_of(text, "gpudoctor_gpu_ecc_errors_since_reset{gpu=\"1\",bus_id=\"0000:0f:00.0\",type=\"uncorrected\"}"),
        "1");
    EXPECT_EQ(value_of(text,
                  "gpudoctor_copy_bandwidth_bytes_per_second{gpu=\"0\",bus_id=\"0000:07:00.0\",direction=\"h2d\"}"),
        "24500000000");
    EXPECT_EQ(value_of(text,
                  "gpudoctor_copy_bandwidth_bytes_per_second{gpu=\"0\",bus_id=\"0000:07:00.0\",direction=\"d2d\"}"),
        "700000000000");
    // A copy that failed has no number, and no series.
    EXPECT_EQ(text.find("gpudoctor_copy_bandwidth_bytes_per_second{gpu=\"1\""), std::string::npos);
    EXPECT_EQ(value_of(text, "gpudoctor_p2p_bandwidth_bytes_per_second{src=\"0\",dst=\"1\"}"), "40000000000");
    EXPECT_EQ(value_of(text, "gpudoctor_p2p_latency_seconds{src=\"0\",dst=\"1\"}"), "2.5e-06");
    EXPECT_EQ(value_of(text, "gpudoctor_allreduce_bus_bandwidth_bytes_per_second{gpus=\"2\"}"), "20500000000");
    EXPECT_EQ(value_of(text, "gpudoctor_allreduce_algorithm_bandwidth_bytes_per_second{gpus=\"2\"}"), "20500000000");
}

TEST(PrometheusReport, WithoutFactsOnlyTheJudgement)
{
    const std::string text = check_metrics(results(), {}, 1);
    EXPECT_EQ(exposition_problems(text), std::vector<std::string>{});
    EXPECT_EQ(text.find("gpudoctor_gpus"), std::string::npos);
    EXPECT_EQ(text.find("bandwidth"), std::string::npos);
    // A broken collector's facts are {"error": ...}: no numbers either.
    const std::string broken = check_metrics(results(),
        test_support::facts_of({{"nvml", {{"error", "timed out"}}}, {"allreduce", {{"error", "crashed"}}}}), 1);
    EXPECT_EQ(exposition_problems(broken), std::vector<std::string>{});
    EXPECT_EQ(broken.find("gpudoctor_gpus"), std::string::npos);
    EXPECT_EQ(broken.find("allreduce"), std::string::npos);
}

TEST(PrometheusReport, EscapedLabelsAndRepeatedFindingsStayValid)
{
    std::vector<ProbeResult> odd = {{&probe_named("nccl-env"),
        {make_finding("nccl-env.socket_ifname_missing", Severity::warn, "NCCL_SOCKET_IFNAME=\"eth\\9\"\nx"),
            make_finding("nccl-env.socket_ifname_missing", Severity::warn, "NCCL_SOCKET_IFNAME=\"eth\\9\"\nx")}}};
    const std::string text = check_metrics(odd, {}, 1);
    EXPECT_EQ(exposition_problems(text), std::vector<std::string>{}) << text;
    EXPECT_EQ(value_of(text,
                  "gpudoctor_finding{subcommand=\"check\",probe=\"nccl-env\",code=\"nccl-env.socket_ifname_missing\","
                  "severity=\"warn\","
                  "subject=\"NCCL_SOCKET_IFNAME=\\\"eth\\\\9\\\"\\nx\"}"),
        "2");
    EXPECT_EQ(value_of(text, "gpudoctor_findings{subcommand=\"check\",severity=\"warn\"}"), "2");
}

} // namespace
