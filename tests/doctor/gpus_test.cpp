#include "doctor/engine/runner.hpp"
#include "doctor/probes/gpu_facts.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/fake_gpu_node.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/process.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::TempDir;

namespace {

/// Collects the nvml facts from the fake NVML with `fixture`, as the real collector does.
class GpusProbe : public ::testing::Test {
protected:
    nlohmann::json collect(const nlohmann::json& fixture, const std::string& sysroot = "/")
    {
        test_support::FakeNvmlFixture fake(m_dir, fixture.dump());
        doctor::engine::CollectContext ctx;
        ctx.sysroot = sysroot;
        ctx.env["GPUKIT_NVML_LIBRARY"] = FAKE_NVML_PATH;
        nlohmann::json facts;
        facts["nvml"] = test_support::collector_named("nvml").collect(ctx);
        facts["topology"] = {{"source", "live"}, {"gpus", nlohmann::json::array()}};
        return facts;
    }
    std::vector<doctor::engine::Finding> gpus(
        const nlohmann::json& fixture, doctor::engine::Policy policy = doctor::engine::Policy::defaults())
    {
        return test_support::judge_one("gpus", collect(fixture), policy);
    }
    TempDir m_dir;
};

} // namespace

TEST_F(GpusProbe, HealthyEightGpuNodePasses)
{
    auto policy = doctor::engine::Policy::defaults();
    policy.expect_gpus = 8;
    auto findings = gpus(test_support::healthy_gpu_node(), policy);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    EXPECT_TRUE(codes_with(findings, Severity::warn).empty());
    ASSERT_EQ(codes_with(findings, Severity::pass).size(), 9U) << "the count, then one per GPU";
    EXPECT_EQ(findings[0].message, "8 GPUs, as expected");
    EXPECT_EQ(findings[1].subject, "gpu 0 (0000:07:00.0)");
    EXPECT_EQ(findings[1].message, "NVIDIA A100-SXM4-80GB, 80.0 GiB, ECC on, PCIe Gen4 x16");
}

TEST_F(GpusProbe, MissingGpuIsNamedFromThePciBus)
{
    auto fixture = test_support::healthy_gpu_node();
    fixture["gpus"].erase(2);
    auto facts = collect(fixture);
    facts["topology"] = {{"source", "live"},
        {"gpus", {{{"index", 0}, {"bus_id", "0000:07:00.0"}}, {{"index", 1}, {"bus_id", "0000:47:00.0"}}}}};
    auto policy = doctor::engine::Policy::defaults();
    policy.expect_gpus = 8;
    auto findings = test_support::judge_one("gpus", facts, policy);
    const auto* count = find_code(findings, "gpus.count");
    ASSERT_NE(count, nullptr);
    EXPECT_EQ(count->severity, Severity::fail);
    EXPECT_EQ(count->message,
        "7 GPUs visible, expected 8; on the PCI bus but not seen by NVML: 0000:47:00.0 (fallen "
        "off the bus?)");
}

TEST_F(GpusProbe, EccRetiredPagesAndRowRemapping)
{
    auto fixture = test_support::healthy_gpu_node(4);
    fixture["gpus"][0]["ecc"]["uncorrected"] = 9;
    fixture["gpus"][0]["ecc"]["uncorrected_volatile"] = 2;
    fixture["gpus"][1]["retired_pages"]["pending"] = 1;
    fixture["gpus"][2]["remapped_rows"]["failure"] = 1;
    fixture["gpus"][3]["retired_pages"] = {{"single", 40}, {"double", 23}, {"pending", 0}};
    auto findings = gpus(fixture);
    EXPECT_EQ(codes_with(findings, Severity::fail),
        (std::vector<std::string>{"gpus.ecc_uncorrected", "gpus.retired_pages_pending", "gpus.row_remap_failure",
            "gpus.retired_pages_limit"}));
    EXPECT_EQ(find_code(findings, "gpus.ecc_uncorrected")->subject, "gpu 0 (0000:07:00.0)");
    EXPECT_EQ(find_code(findings, "gpus.ecc_uncorrected")->message,
        "2 uncorrected ECC errors since the last reset (9 since manufacture)");
    EXPECT_EQ(find_code(findings, "gpus.retired_pages_limit")->message, "63 retired pages, at or past the limit of 63");
}

TEST_F(GpusProbe, LifetimeEccErrorsThatNoResetClearsOnlyWarn)
{
    // NVML's aggregate count never goes down: failing on it would drain a node after every reset,
    // for ever. Errors since the last reset fail; the history alone warns.
    auto fixture = test_support::healthy_gpu_node(3);
    fixture["gpus"][0]["ecc"]["uncorrected"] = 5; // 0 since the last reset
    fixture["gpus"][1]["ecc"]["uncorrected"] = 5;
    fixture["gpus"][1]["ecc"].erase("uncorrected_volatile"); // this NVML gives only the lifetime count
    auto findings = gpus(fixture);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    EXPECT_EQ(codes_with(findings, Severity::warn),
        (std::vector<std::string>{"gpus.ecc_uncorrected_history", "gpus.ecc_uncorrected_history"}));
    std::vector<const doctor::engine::Finding*> history;
    for (const auto& f : findings) {
        if (f.code == "gpus.ecc_uncorrected_history") {
            history.push_back(&f);
        }
    }
    ASSERT_EQ(history.size(), 2U);
    EXPECT_EQ(history[0]->subject, "gpu 0 (0000:07:00.0)");
    EXPECT_EQ(history[0]->message, "5 uncorrected ECC errors since manufacture; 0 since the last reset");
    EXPECT_NE(history[0]->remedy.find("a reset does not"), std::string::npos);
    EXPECT_EQ(
        history[1]->message, "5 uncorrected ECC errors since manufacture; NVML gives no count since the last reset");
}

TEST_F(GpusProbe, ThrottleReasonsIdleIsNotAFault)
{
    auto fixture = test_support::healthy_gpu_node(3);
    fixture["gpus"][0]["clock_event_reasons"] = 0x1 | 0x4; // idle + software power cap
    fixture["gpus"][1]["clock_event_reasons"] = 0x40;
    fixture["gpus"][2]["clock_event_reasons"] = 0x88;
    auto findings = gpus(fixture);
    EXPECT_EQ(codes_with(findings, Severity::fail), (std::vector<std::string>{"gpus.throttled", "gpus.throttled"}));
    EXPECT_EQ(
        find_code(findings, "gpus.throttled")->message, "clocks held down: hardware thermal slowdown (reasons 0x40)");
    EXPECT_EQ(findings.back().message, "clocks held down: hardware slowdown, hardware power brake (reasons 0x88)");
}

TEST_F(GpusProbe, PcieWidthFailsGenerationOnlyWhenBusy)
{
    auto fixture = test_support::healthy_gpu_node(3);
    fixture["gpus"][0]["pcie"]["width"] = 8;
    fixture["gpus"][1]["pcie"]["gen"] = 1; // idle: power saving
    fixture["gpus"][2]["pcie"]["gen"] = 3;
    fixture["gpus"][2]["utilization"] = 95;
    auto findings = gpus(fixture);
    EXPECT_EQ(codes_with(findings, Severity::fail), (std::vector<std::string>{"gpus.pcie_width_degraded"}));
    EXPECT_EQ(codes_with(findings, Severity::warn), (std::vector<std::string>{"gpus.pcie_gen_low"}));
    EXPECT_EQ(find_code(findings, "gpus.pcie_width_degraded")->message, "PCIe link trained at x8 of x16");
}

TEST_F(GpusProbe, OtherProcessesModesAndPersistence)
{
    auto fixture = test_support::healthy_gpu_node(3);
    fixture["gpus"][0]["processes"] = 2;
    fixture["gpus"][1]["compute_mode"] = 2; // NVML_COMPUTEMODE_PROHIBITED
    fixture["gpus"][2]["persistence"] = 0;
    auto findings = gpus(fixture);
    EXPECT_EQ(find_code(findings, "gpus.compute_exclusive"), nullptr);
    EXPECT_EQ(find_code(findings, "gpus.busy")->message, "2 compute processes already on this GPU");
    EXPECT_EQ(find_code(findings, "gpus.compute_prohibited")->severity, Severity::fail);
    EXPECT_EQ(find_code(findings, "gpus.persistence_off")->severity, Severity::warn);
    auto policy = doctor::engine::Policy::defaults();
    policy.max_other_processes = 2;
    EXPECT_EQ(find_code(gpus(fixture, policy), "gpus.busy"), nullptr);
    fixture["gpus"][1]["compute_mode"] = 3; // NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    EXPECT_EQ(find_code(gpus(fixture), "gpus.compute_exclusive")->severity, Severity::warn);
    EXPECT_EQ(find_code(gpus(fixture), "gpus.compute_prohibited"), nullptr);
}

TEST_F(GpusProbe, NoDriverFailsUnlessACpuNodeIsExpected)
{
    nlohmann::json facts;
    facts["nvml"] = {{"driver_file", nullptr}, {"nvml_loaded", false}, {"nvml_error", "cannot load libnvidia-ml.so.1"}};
    facts["topology"] = {{"source", "live"}, {"gpus", nlohmann::json::array()}};
    auto findings = test_support::judge_one("gpus", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::fail);
    EXPECT_NE(findings[0].message.find("no NVIDIA driver"), std::string::npos);
    auto driver = test_support::judge_one("driver", facts);
    EXPECT_EQ(driver[0].code, "driver.missing");
    auto cpu = doctor::engine::Policy::defaults();
    cpu.expect_gpus = 0;
    EXPECT_EQ(test_support::judge_one("gpus", facts, cpu)[0].code, "gpus.none_expected");
    EXPECT_EQ(test_support::judge_one("driver", facts, cpu)[0].severity, Severity::pass);
}

TEST_F(GpusProbe, DriverVersionPolicyAndModuleMismatch)
{
    TempDir root;
    std::filesystem::create_directories(root / "proc/driver/nvidia");
    std::ofstream(root / "proc/driver/nvidia/version")
        << "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n";
    auto facts = collect(test_support::healthy_gpu_node(1), root.path().string());
    EXPECT_EQ(facts["nvml"]["kernel_module_version"], "550.90.07");
    auto findings = test_support::judge_one("driver", facts);
    ASSERT_NE(find_code(findings, "driver.mismatch"), nullptr);
    EXPECT_EQ(
        find_code(findings, "driver.mismatch")->message, "kernel module 550.90.07 but NVML reports driver 550.54.15");

    auto old = test_support::healthy_gpu_node(1);
    old["driver"] = "470.82.01";
    auto policy = doctor::engine::Policy::defaults();
    auto old_findings = test_support::judge_one("driver", collect(old), policy);
    EXPECT_EQ(old_findings[0].code, "driver.too_old");
    EXPECT_EQ(old_findings[0].message, "driver 470.82.01 is older than 535.0 (policy driver.min_version)");
    auto ok = test_support::judge_one("driver", collect(test_support::healthy_gpu_node(1)));
    EXPECT_EQ(ok[0].message, "NVIDIA driver 550.54.15, supports CUDA 12.4");
}

TEST_F(GpusProbe, HangingAndCrashingNvmlBecomeErrorsWithinTheDeadline)
{
    for (const char* how : {"hang_in", "crash_in"}) {
        auto fixture = test_support::healthy_gpu_node(2);
        fixture[how] = "nvmlInit_v2";
        auto path = m_dir / (std::string(how) + ".json");
        std::ofstream(path) << fixture.dump();
        const auto start = std::chrono::steady_clock::now();
        auto r = test_support::run({GPUDOCTOR_PATH, "check", "--json", "--timeout", "1"},
            {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", path.string()}});
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_LT(took, std::chrono::seconds(5)) << how;
        EXPECT_EQ(r.exit_code, 1) << how << r.err;
        auto report = nlohmann::json::parse(r.out);
        std::string driver_message;
        unsigned errors = 0;
        for (const auto& p : report["probes"]) {
            for (const auto& f : p["findings"]) {
                if (f["severity"] == "error") {
                    ++errors;
                }
                if (f["code"] == "driver.error") {
                    driver_message = f["message"];
                }
            }
        }
        EXPECT_GE(errors, 2U) << how;
        EXPECT_NE(
            driver_message.find(std::string(how) == "hang_in" ? "timed out after 1 s" : "crashed (Segmentation fault)"),
            std::string::npos)
            << driver_message;
        EXPECT_GT(report["summary"]["pass"].get<int>() + report["summary"]["skip"].get<int>(), 0)
            << "the other probes still report";
    }
}

TEST_F(GpusProbe, SnapshotThenCheckFromJudgesTheSameWay)
{
    auto fixture = test_support::healthy_gpu_node(2);
    fixture["gpus"][1]["ecc"]["uncorrected"] = 1;
    fixture["gpus"][1]["ecc"]["uncorrected_volatile"] = 1;
    auto path = m_dir / "nvml.json";
    std::ofstream(path) << fixture.dump();
    test_support::EnvChanges env{{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", path.string()}};
    auto direct = test_support::run({GPUDOCTOR_PATH, "check", "--json", "--only", "driver,gpus"}, env);
    auto snap = test_support::run({GPUDOCTOR_PATH, "snapshot", "--only", "driver,gpus"}, env);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    std::ofstream(m_dir / "node.json") << snap.out;
    // Judged without the fake library: everything comes from the snapshot.
    auto from = test_support::run(
        {GPUDOCTOR_PATH, "check", "--json", "--only", "driver,gpus", "--from", (m_dir / "node.json").string()},
        {{"GPUKIT_NVML_LIBRARY", "/nonexistent.so"}});
    EXPECT_EQ(from.exit_code, 1);
    EXPECT_EQ(direct.exit_code, 1);
    // The same report, but for how long the collectors took (a snapshot was not timed).
    auto judged = nlohmann::json::parse(direct.out);
    ASSERT_TRUE(judged.contains("collect_seconds"));
    judged.erase("collect_seconds");
    for (auto& probe : judged["probes"]) {
        probe.erase("seconds");
    }
    EXPECT_EQ(nlohmann::json::parse(from.out), judged);
    auto bad = test_support::run({GPUDOCTOR_PATH, "check", "--from", path.string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("is not a gpudoctor snapshot"), std::string::npos) << bad.err;
}

TEST_F(GpusProbe, ASnapshotOfTheWrongShapeOrFormatIsBadInputNotABrokenNode)
{
    auto path = m_dir / "nvml.json";
    std::ofstream(path) << test_support::healthy_gpu_node(2).dump();
    test_support::EnvChanges env{{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", path.string()}};
    auto snap = test_support::run({GPUDOCTOR_PATH, "snapshot", "--only", "driver,gpus"}, env);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    auto doc = nlohmann::json::parse(snap.out);
    auto check = [&](const nlohmann::json& edited) {
        std::ofstream(m_dir / "edited.json") << edited.dump();
        return test_support::run(
            {GPUDOCTOR_PATH, "check", "--only", "driver,gpus", "--from", (m_dir / "edited.json").string()});
    };

    // Edited by hand: a GPU list that is not a list.
    auto edited = doc;
    ASSERT_TRUE(edited["facts"]["nvml"].contains("gpus")) << doc.dump();
    edited["facts"]["nvml"]["gpus"] = "none";
    auto shape = check(edited);
    EXPECT_EQ(shape.exit_code, 2) << shape.out << shape.err;
    EXPECT_EQ(shape.out, "") << "no report of a broken node";
    EXPECT_NE(shape.err.find("gpudoctor: " + (m_dir / "edited.json").string() + ": the "), std::string::npos)
        << shape.err;
    EXPECT_NE(shape.err.find(" facts are not as gpudoctor snapshot writes them ("), std::string::npos) << shape.err;

    // From a later format, or not a format at all.
    for (const nlohmann::json& format : {nlohmann::json(2), nlohmann::json("1"), nlohmann::json(-1)}) {
        edited = doc;
        edited["gpudoctor_snapshot"] = format;
        auto r = check(edited);
        EXPECT_EQ(r.exit_code, 2) << format;
        EXPECT_NE(r.err.find(": snapshot format " + format.dump() + ", but this gpudoctor reads format 1; "),
            std::string::npos)
            << r.err;
    }
}

TEST_F(GpusProbe, NvmlWithNoGpuOnACpuNodePasses)
{
    auto facts = collect(test_support::healthy_gpu_node(0));
    auto cpu = doctor::engine::Policy::defaults();
    cpu.expect_gpus = 0;
    auto findings = test_support::judge_one("gpus", facts, cpu);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "gpus.none_expected");
    EXPECT_EQ(findings[0].severity, Severity::pass);
    EXPECT_EQ(test_support::judge_one("gpus", facts)[0].severity, Severity::fail) << "at least one GPU by default";
}

TEST_F(GpusProbe, ATopologyFileIsNotComparedWithThisMachinesNvml)
{
    auto facts = collect(test_support::healthy_gpu_node(1));
    facts["topology"] = {{"source", "/some/other-node.xml"}, {"gpus", {{{"index", 0}, {"bus_id", "0000:47:00.0"}}}}};
    EXPECT_EQ(find_code(test_support::judge_one("gpus", facts), "gpus.count")->severity, Severity::pass);
    facts["topology"]["source"] = "live";
    EXPECT_EQ(find_code(test_support::judge_one("gpus", facts), "gpus.count")->severity, Severity::fail);
}

TEST(GpudoctorCommandLine, OptionsWithoutASubcommandMeanCheck)
{
    auto r = test_support::run({GPUDOCTOR_PATH, "--only", "nccl-env"}, {{"NCCL_DEBUG", "INFO"}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("[nccl-env.debug_on]"), std::string::npos) << r.out;
    auto bad = test_support::run({GPUDOCTOR_PATH, "--topology", "/nonexistent/node.xml"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_EQ(bad.err, "gpudoctor: cannot read topology /nonexistent/node.xml: No such file or directory\n");
}
