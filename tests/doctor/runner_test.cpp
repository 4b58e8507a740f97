#include "base/error.hpp"
#include "doctor/engine/runner.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <thread>
#include <unistd.h>

using doctor::engine::Collector;
using doctor::engine::Severity;

TEST(Runner, CollectorsRunInParallelAndAHangBecomesAnError)
{
    Collector fine{"fine", [](const doctor::engine::CollectContext&) { return nlohmann::json{{"x", 1}}; }};
    Collector hang{"hang", [](const doctor::engine::CollectContext&) {
                       while (true) {
                           pause();
                       }
                       return nlohmann::json();
                   }};
    Collector slow{"slow", [](const doctor::engine::CollectContext&) {
                       std::this_thread::sleep_for(std::chrono::milliseconds(300));
                       return nlohmann::json{{"y", 2}};
                   }};
    Collector crash{"crash", [](const doctor::engine::CollectContext&) {
                        std::raise(SIGSEGV);
                        return nlohmann::json();
                    }};
    Collector throws{"throws", [](const doctor::engine::CollectContext&) -> nlohmann::json {
                         throw base::Error("cannot read /sys/foo: Permission denied");
                     }};
    doctor::engine::CollectContext ctx;
    ctx.timeout = std::chrono::milliseconds(1000);
    const auto start = std::chrono::steady_clock::now();
    std::map<std::string, double> seconds;
    auto facts = doctor::engine::collect({&fine, &hang, &slow, &crash, &throws}, ctx, &seconds);
    const auto took = std::chrono::steady_clock::now() - start;
    // Each collector's time: the slow one's 0.3 s, the hang's the deadline, the quick one's little.
    ASSERT_EQ(seconds.size(), 5U);
    // Timed from the start of the wait, which comes after the children are started: a little
    // under the 0.3 s the slow one sleeps.
    EXPECT_GE(seconds["slow"], 0.25);
    EXPECT_GE(seconds["hang"], 0.95); // poll wakes within a millisecond of the deadline
    EXPECT_LT(seconds["fine"], seconds["hang"]);
    EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the deadline holds for all collectors at once";
    EXPECT_EQ((*facts.raw("fine"))["x"], 1);
    EXPECT_EQ((*facts.raw("slow"))["y"], 2);
    EXPECT_EQ(doctor::engine::collector_error(facts, "hang"), "timed out after 1 s");
    EXPECT_NE(doctor::engine::collector_error(facts, "crash").find("crashed (Segmentation fault)"), std::string::npos);
    EXPECT_EQ(doctor::engine::collector_error(facts, "throws"), "cannot read /sys/foo: Permission denied");
}

TEST(Runner, CollectorsRunFromTheRootDirectory)
{
    // Nothing of the directory gpudoctor was started from is read by a probe: an empty
    // LD_LIBRARY_PATH entry or a pyenv shim would otherwise find files there.
    Collector where{"where", [](const doctor::engine::CollectContext&) {
                        char buffer[4096];
                        return nlohmann::json{{"cwd", getcwd(buffer, sizeof buffer) != nullptr ? buffer : "?"}};
                    }};
    test_support::TempDir dir;
    const auto before = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    const auto facts = doctor::engine::collect({&where}, doctor::engine::CollectContext{});
    std::filesystem::current_path(before);
    EXPECT_EQ((*facts.raw("where"))["cwd"], "/") << facts.write().dump();
}

TEST(Runner, MissingOrBrokenFactsNeverPass)
{
    auto skipped = test_support::judge_one("gpus", nlohmann::json::object());
    ASSERT_EQ(skipped.size(), 1U);
    EXPECT_EQ(skipped[0].severity, Severity::skip);
    EXPECT_EQ(skipped[0].code, "gpus.skip");
    auto broken = test_support::judge_one("gpus",
        {{"nvml", {{"error", "timed out after 10 s"}}},
            {"topology", {{"source", "live"}, {"gpus", nlohmann::json::array()}}}});
    ASSERT_EQ(broken.size(), 1U);
    EXPECT_EQ(broken[0].severity, Severity::error);
    EXPECT_NE(broken[0].message.find("collecting nvml: timed out after 10 s"), std::string::npos);
}

TEST(Runner, ExitCodes)
{
    doctor::engine::Probe p;
    p.name = "x";
    auto finding = [](const char* code, Severity s) {
        return doctor::engine::Finding{code, s, "host", "m", "", nullptr};
    };
    std::vector<doctor::engine::ProbeResult> results{
        {&p, {finding("x.a", Severity::pass), finding("x.b", Severity::warn)}}};
    EXPECT_EQ(doctor::engine::exit_code(results, false), 0);
    EXPECT_EQ(doctor::engine::exit_code(results, true), 1);
    results[0].findings.push_back(finding("x.c", Severity::skip));
    EXPECT_EQ(doctor::engine::exit_code(results, false), 0);
    results[0].findings.push_back(finding("x.d", Severity::error));
    EXPECT_EQ(doctor::engine::exit_code(results, false), 1);
}

TEST(Runner, SelectionByNameAndPrefixWithDidYouMean)
{
    auto only = doctor::probes::select_probes("gpu", "");
    ASSERT_EQ(only.size(), 1U);
    EXPECT_EQ(only[0]->name, "gpus");
    auto skip = doctor::probes::select_probes("", "driver");
    EXPECT_TRUE(
        std::none_of(skip.begin(), skip.end(), [](const doctor::engine::Probe* p) { return p->name == "driver"; }));
    try {
        doctor::probes::select_probes("drivr", "");
        ADD_FAILURE();
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()),
            "--only drivr: no probe is called that (did you mean driver?); 'gpudoctor list' "
            "shows them");
    }
}

TEST(Runner, ASelectionOfNoProbeIsAnError)
{
    // Otherwise the check runs nothing and says "fit to train".
    auto error_of = [](const std::string& only, const std::string& skip) {
        try {
            doctor::probes::select_probes(only, skip);
        } catch (const base::Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(error_of("driver", "driver"),
        "--skip driver leaves no probe to run of --only driver; 'gpudoctor list' shows them");
    std::string all;
    for (const auto& p : doctor::probes::probe_table()) {
        all += (all.empty() ? "" : ",") + p.name;
    }
    EXPECT_EQ(error_of("", all), "--skip " + all + " leaves no probe to run; 'gpudoctor list' shows them");
    EXPECT_EQ(error_of("driver,gpus", "driver"), "") << "one probe left is a check";
}

TEST(Runner, EveryProbeDocumentsItsCodes)
{
    for (const auto& p : doctor::probes::probe_table()) {
        EXPECT_FALSE(p.codes.empty()) << p.name;
        for (const auto& c : p.codes) {
            EXPECT_EQ(c.code.rfind(p.name + ".", 0), 0U) << c.code << " belongs to " << p.name;
            EXPECT_FALSE(c.explanation.empty()) << c.code;
        }
        for (const auto& c : p.collectors) {
            EXPECT_NO_THROW(test_support::collector_named(c)) << p.name << " needs " << c;
        }
    }
}
