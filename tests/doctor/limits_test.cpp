#include "tests/support/doctor_support.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/resource.h>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace {

class LimitsCollector : public ::testing::Test {
protected:
    void write(const std::string& path, const std::string& text)
    {
        auto file = m_root / path;
        std::filesystem::create_directories(file.parent_path());
        std::ofstream(file) << text;
    }
    nlohmann::json collect()
    {
        doctor::engine::CollectContext ctx;
        ctx.sysroot = m_root.path().string();
        return test_support::collector_named("limits").collect(ctx);
    }
    test_support::TempDir m_root;
};

nlohmann::json facts_with(nlohmann::json shm, nlohmann::json memlock = {{"soft", "unlimited"}, {"hard", "unlimited"}},
    nlohmann::json nofile = {{"soft", 1048576}, {"hard", 1048576}})
{
    return {{"limits", {{"shm", shm}, {"memlock", memlock}, {"nofile", nofile}}}};
}

const nlohmann::json big_shm = {{"exists", true}, {"mounted", true}, {"bytes", 32ULL << 30}, {"source", "statfs"}};

} // namespace

TEST_F(LimitsCollector, ShmSizeFromTheMountOptions)
{
    std::filesystem::create_directories(m_root / "dev/shm");
    write("proc/mounts",
        "proc /proc proc rw,nosuid 0 0\n"
        "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k,inode64 0 0\n");
    auto facts = collect();
    EXPECT_EQ(facts["shm"]["bytes"], 64ULL << 20);
    EXPECT_EQ(facts["shm"]["source"], "mount options");
    EXPECT_EQ(facts["shm"]["fstype"], "tmpfs");
    EXPECT_TRUE(facts["shm"]["mounted"].get<bool>());
    EXPECT_FALSE(facts.contains("error")) << "a working collector has no top-level error";
}

TEST_F(LimitsCollector, TheLastMountOnDevShmWinsAndSuffixesAreRead)
{
    std::filesystem::create_directories(m_root / "dev/shm");
    write("proc/mounts",
        "shm /dev/shm tmpfs rw,size=65536k 0 0\n"
        "garbage\n"
        "tmpfs /dev/shm tmpfs rw,size=16G 0 0\n");
    EXPECT_EQ(collect()["shm"]["bytes"], 16ULL << 30);
}

TEST_F(LimitsCollector, StatfsWhenTheMountHasNoSizeOrAPercentage)
{
    std::filesystem::create_directories(m_root / "dev/shm");
    write("proc/mounts", "tmpfs /dev/shm tmpfs rw,size=50% 0 0\n");
    auto facts = collect();
    EXPECT_EQ(facts["shm"]["source"], "statfs");
    EXPECT_GT(facts["shm"]["bytes"].get<unsigned long long>(), 0ULL);

    write("proc/mounts", "proc /proc proc rw 0 0\n");
    facts = collect();
    EXPECT_EQ(facts["shm"]["source"], "statfs");
    EXPECT_FALSE(facts["shm"]["mounted"].get<bool>());
}

TEST_F(LimitsCollector, SizeZeroIsUnlimited)
{
    std::filesystem::create_directories(m_root / "dev/shm");
    write("proc/mounts", "tmpfs /dev/shm tmpfs rw,size=0 0 0\n");
    auto facts = collect();
    EXPECT_TRUE(facts["shm"].value("unlimited", false));
    auto findings = judge_one("limits", {{"limits", facts}});
    ASSERT_NE(find_code(findings, "limits.shm_ok"), nullptr);
}

TEST_F(LimitsCollector, MissingDevShmAndMountsFail)
{
    auto facts = collect();
    EXPECT_FALSE(facts["shm"]["exists"].get<bool>());
    EXPECT_TRUE(facts["shm"]["mounts_unreadable"].get<bool>());
    auto findings = judge_one("limits", {{"limits", facts}});
    const auto* f = find_code(findings, "limits.shm_missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_FALSE(f->remedy.empty());
}

TEST_F(LimitsCollector, RlimitsAreThisProcesssOwn)
{
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 1000) {
        GTEST_SKIP() << "hard open-files limit below 1000";
    }
    rlimit lowered = saved;
    lowered.rlim_cur = 1000;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
    auto facts = collect();
    setrlimit(RLIMIT_NOFILE, &saved);
    EXPECT_EQ(facts["nofile"]["soft"], 1000);
    EXPECT_TRUE(facts["memlock"].contains("soft"));
    auto findings = judge_one("limits", {{"limits", facts}});
    const auto* f = find_code(findings, "limits.nofile_low");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("1000"), std::string::npos) << f->message;
}

TEST(LimitsRule, HealthyNodePassesEveryPart)
{
    auto findings = judge_one("limits", facts_with(big_shm));
    EXPECT_EQ(codes_with(findings, Severity::pass),
        (std::vector<std::string>{"limits.shm_ok", "limits.memlock_ok", "limits.nofile_ok"}));
    EXPECT_TRUE(codes_with(findings, Severity::warn).empty());
}

TEST(LimitsRule, DockerDefaultShmWarnsWithTheSize)
{
    auto findings = judge_one("limits", facts_with({{"exists", true}, {"bytes", 64ULL << 20}}));
    const auto* f = find_code(findings, "limits.shm_small");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_EQ(f->subject, "/dev/shm");
    EXPECT_NE(f->message.find("64 MiB"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("1.0 GiB"), std::string::npos) << f->message;
    EXPECT_NE(f->remedy.find("--shm-size"), std::string::npos);
}

TEST(LimitsRule, ShmThresholdComesFromThePolicy)
{
    auto policy = doctor::engine::Policy::defaults();
    policy.min_shm_gib = 64;
    auto findings = judge_one("limits", facts_with(big_shm), policy);
    EXPECT_NE(find_code(findings, "limits.shm_small"), nullptr);
}

TEST(LimitsRule, ShmOfUnknownSizeIsSkippedNotPassed)
{
    auto findings = judge_one(
        "limits", facts_with({{"exists", true}, {"bytes", nullptr}, {"error", "statfs /x: Permission denied"}}));
    const auto* f = find_code(findings, "limits.shm_unknown");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::skip);
    EXPECT_NE(f->message.find("Permission denied"), std::string::npos);
    findings = judge_one("limits", facts_with({{"exists", true}}));
    EXPECT_EQ(find_code(findings, "limits.shm_unknown")->severity, Severity::skip);
}

TEST(LimitsRule, FactsNotAsTheCollectorWritesThemAreBadInputNotASkip)
{
    EXPECT_EQ(test_support::error_of([] {
        test_support::facts_of(facts_with({{"exists", true}, {"bytes", "lots"}}));
    }),
        "the test's facts: the limits facts are not as gpudoctor snapshot writes them (shm.bytes is 'lots', expected "
        "a count, 0 or more); write the snapshot again with 'gpudoctor snapshot > node.json'");
    EXPECT_NE(test_support::error_of([] {
        test_support::facts_of({{"limits", nlohmann::json::object()}});
    }).find("(shm is missing)"),
        std::string::npos);
}

TEST(LimitsRule, LimitedMemlockWarnsAndTheRemedyDependsOnTheHardLimit)
{
    auto findings = judge_one("limits", facts_with(big_shm, {{"soft", 65536}, {"hard", 65536}}));
    const auto* f = find_code(findings, "limits.memlock_limited");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("64 KiB"), std::string::npos) << f->message;
    EXPECT_NE(f->remedy.find("limits.conf"), std::string::npos);

    findings = judge_one("limits", facts_with(big_shm, {{"soft", 8388608}, {"hard", "unlimited"}}));
    f = find_code(findings, "limits.memlock_limited");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("8 MiB"), std::string::npos) << f->message;
    EXPECT_NE(f->remedy.find("ulimit -l unlimited"), std::string::npos);
}

TEST(LimitsRule, MemlockNeedNotBeUnlimitedWhenThePolicySaysSo)
{
    auto policy = doctor::engine::Policy::defaults();
    policy.memlock_unlimited = false;
    auto findings = judge_one("limits", facts_with(big_shm, {{"soft", 65536}, {"hard", 65536}}), policy);
    EXPECT_NE(find_code(findings, "limits.memlock_ok"), nullptr);
    EXPECT_EQ(find_code(findings, "limits.memlock_limited"), nullptr);
}

TEST(LimitsRule, LowOpenFilesWarns)
{
    auto findings = judge_one("limits",
        facts_with(big_shm, {{"soft", "unlimited"}, {"hard", "unlimited"}}, {{"soft", 1024}, {"hard", 1048576}}));
    const auto* f = find_code(findings, "limits.nofile_low");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("1024"), std::string::npos);
    EXPECT_NE(f->remedy.find("ulimit -n 65536"), std::string::npos) << f->remedy; // the policy's least

    findings = judge_one("limits",
        facts_with(big_shm, {{"soft", "unlimited"}, {"hard", "unlimited"}}, {{"soft", 1024}, {"hard", 4096}}));
    EXPECT_NE(find_code(findings, "limits.nofile_low")->remedy.find("limits.conf"), std::string::npos);
}

TEST(LimitsRule, GarbageOrMissingLimitsAreSkipped)
{
    auto findings =
        judge_one("limits", facts_with(big_shm, {{"soft", -5}, {"hard", "x"}}, {{"error", "getrlimit: EPERM"}}));
    EXPECT_EQ(codes_with(findings, Severity::skip),
        (std::vector<std::string>{"limits.memlock_unknown", "limits.nofile_unknown"}));
    findings = judge_one("limits",
        facts_with({{"exists", true}, {"error", "statfs: EACCES"}}, {{"error", "getrlimit: EPERM"}},
            {{"error", "getrlimit: EPERM"}}));
    EXPECT_EQ(codes_with(findings, Severity::skip).size(), 3U);
    EXPECT_TRUE(codes_with(findings, Severity::pass).empty()) << "nothing known is never a pass";
}

TEST(LimitsRule, EveryCodeEmittedIsDocumented)
{
    const auto& probe = test_support::probe_named("limits");
    std::vector<std::string> documented;
    for (const auto& c : probe.codes) {
        documented.push_back(c.code);
        EXPECT_EQ(c.code.rfind("limits.", 0), 0U) << c.code;
    }
    for (const auto& facts :
        {facts_with(big_shm), facts_with({{"exists", false}}), facts_with({{"exists", true}, {"bytes", 1}}),
            facts_with(big_shm, {{"soft", 1}, {"hard", 1}}, {{"soft", 1}, {"hard", 1}}),
            facts_with({{"exists", true}}, {{"error", "x"}}, {{"soft", "x"}})}) {
        for (const auto& f : judge_one("limits", facts)) {
            EXPECT_NE(std::find(documented.begin(), documented.end(), f.code), documented.end()) << f.code;
            if (f.severity == Severity::warn || f.severity == Severity::fail) {
                EXPECT_FALSE(f.remedy.empty()) << f.code;
            }
        }
    }
}
