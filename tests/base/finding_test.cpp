#include "base/finding.hpp"

#include "base/error.hpp"

#include <gtest/gtest.h>

namespace {

using base::Finding;
using base::Severity;

Finding gpu_finding(unsigned gpu, const std::string& message, Severity severity = Severity::pass)
{
    Finding f;
    f.code = "gpus.ok";
    f.severity = severity;
    f.subject = "gpu " + std::to_string(gpu) + " (0000:0" + std::to_string(gpu) + ":00.0)";
    f.message = message;
    return f;
}

TEST(FindingGroups, TheSameFindingOnSeveralGpusIsOneGroupWithTheirNumbersAsRanges)
{
    std::vector<Finding> findings;
    for (unsigned gpu : {0U, 1U, 2U, 3U, 6U, 7U}) {
        findings.push_back(gpu_finding(gpu, "NVIDIA A100, 80 GiB"));
    }
    findings.insert(findings.begin() + 4, gpu_finding(4, "4 uncorrected ECC errors", Severity::fail));
    findings.push_back(gpu_finding(5, "NVIDIA A100, 80 GiB", Severity::warn)); // another severity
    const auto groups = base::group_findings(findings);
    ASSERT_EQ(groups.size(), 3U);
    EXPECT_EQ(groups[0].subject(), "gpus 0-3, 6-7");
    EXPECT_EQ(groups[0].subjects.size(), 6U);
    EXPECT_EQ(groups[0].first, &findings[0]);
    EXPECT_EQ(groups[1].subject(), "gpu 4 (0000:04:00.0)") << "one subject is shown whole";
    EXPECT_EQ(groups[2].subject(), "gpu 5 (0000:05:00.0)");
}

TEST(FindingGroups, OtherSubjectsAreListedAndADifferentMessageOrRemedyIsAnotherGroup)
{
    Finding a{"network.port_down", Severity::warn, "mlx5_0 port 1", "DOWN", "check the cable"};
    Finding b = a;
    b.subject = "mlx5_1 port 1";
    Finding c = a;
    c.subject = "mlx5_2 port 1";
    c.remedy = "another";
    Finding d = a;
    d.subject = "gpu 1";
    const std::vector<Finding> findings{a, b, c, d};
    const auto groups = base::group_findings(findings);
    ASSERT_EQ(groups.size(), 2U);
    EXPECT_EQ(groups[0].subject(), "mlx5_0 port 1, mlx5_1 port 1, gpu 1");
    EXPECT_EQ(groups[1].subject(), "mlx5_2 port 1");
    // Not every "gpu ..." subject is a GPU number.
    Finding e = a;
    e.subject = "gpu 1x";
    EXPECT_EQ(base::group_findings({d, e})[0].subject(), "gpu 1, gpu 1x");
}

TEST(FindingJson, TheSameKeysForEverySubcommandAndTheOptionalOnesOnlyWhenKnown)
{
    Finding f{"nccl.warn", Severity::warn, "job", "1 WARN record", "read it"};
    EXPECT_EQ(base::to_json(f),
        (nlohmann::json{{"code", "nccl.warn"}, {"severity", "warn"}, {"subject", "job"}, {"message", "1 WARN record"},
            {"remedy", "read it"}}));
    f.where = {"job.log", 22};
    f.count = 3;
    f.facts = {{"kind", "x"}};
    const auto json = base::to_json(f);
    EXPECT_EQ(json["where"], "job.log:22");
    EXPECT_EQ(json["count"], 3);
    EXPECT_EQ(json["facts"]["kind"], "x");
}

TEST(FindingSeverity, WordsLabelsAndTheFailOnThreshold)
{
    const std::vector<std::pair<Severity, std::string>> words = {{Severity::pass, "pass"}, {Severity::info, "info"},
        {Severity::warn, "warn"}, {Severity::fail, "fail"}, {Severity::skip, "skip"}, {Severity::error, "error"}};
    for (const auto& [severity, word] : words) {
        EXPECT_EQ(base::to_string(severity), word);
        EXPECT_EQ(base::severity_label(severity, false).size(), 5U) << word;
    }
    EXPECT_EQ(base::severity_label(Severity::fail, false), "FAIL ");
    EXPECT_EQ(base::severity_label(Severity::fail, true), "\033[31mFAIL \033[0m");
    const Severity fail = base::parse_fail_on("fail");
    const Severity warn = base::parse_fail_on("warn");
    EXPECT_TRUE(base::fails(Severity::fail, fail));
    EXPECT_TRUE(base::fails(Severity::error, fail));
    EXPECT_FALSE(base::fails(Severity::warn, fail));
    EXPECT_TRUE(base::fails(Severity::warn, warn));
    for (Severity quiet : {Severity::pass, Severity::info, Severity::skip}) {
        EXPECT_FALSE(base::fails(quiet, warn)) << base::to_string(quiet);
    }
    try {
        base::parse_fail_on("wran");
        ADD_FAILURE() << "no error";
    } catch (const base::Error& e) {
        EXPECT_STREQ(e.what(), "--fail-on wran: expected warn or fail (did you mean warn?)");
    }
}

} // namespace
