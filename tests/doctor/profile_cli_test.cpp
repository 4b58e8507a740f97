// Golden tests of the real `gpudoctor profile` on Nsight Systems exports written here (see
// tests/support/nsys_fixture.hpp): exit code, stdout and stderr. UPDATE_GOLDEN=1 rewrites the
// golden files from the current output (review the diff).
#include "tests/support/golden.hpp"
#include "tests/support/nsys_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using test_support::EnvChanges;
using test_support::NsysShape;
using test_support::TempDir;

namespace {

struct Case {
    const char* name;
    std::vector<std::string> args;
};

[[maybe_unused]] void PrintTo(const Case& c, std::ostream* os)
{
    *os << c.name;
}

std::vector<Case> cases()
{
    return {
        {"profile_help", {"profile", "--help"}},
        {"profile_quiet", {"profile", "--quiet", "--no-color", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_text", {"profile", "--no-color", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_json", {"profile", "--json", "@TMP@/two-gpus-2026.sqlite"}},
        {"profile_2021_no_enums", {"profile", "--no-color", "@TMP@/two-gpus-2021.sqlite"}},
        {"profile_empty", {"profile", "--no-color", "@TMP@/empty.sqlite"}},
        {"profile_empty_json", {"profile", "--json", "@TMP@/empty.sqlite"}},
        {"profile_directory", {"profile", "--no-color", "--top", "1", "--gap", "0.6", "--min-busy", "20", "@TMP@/run"}},
        {"profile_fail_on_warn", {"profile", "--fail-on", "warn", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_fail_on_fail", {"profile", "--fail-on", "fail", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_bad_fail_on", {"profile", "--fail-on", "wran", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_bad_gap", {"profile", "--gap", "0", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_bad_min_busy", {"profile", "--min-busy", "150", "@TMP@/two-gpus-2024.sqlite"}},
        {"profile_no_file", {"profile"}},
        {"profile_missing", {"profile", "@TMP@/two-gpus-2024.sqlite", "@TMP@/missing.sqlite"}},
        {"profile_not_sqlite", {"profile", "@TMP@/notes.txt"}},
        {"profile_no_cuda_tables", {"profile", "@TMP@/cpu-only.sqlite"}},
        {"profile_report_not_export", {"profile", "@TMP@/rank0.nsys-rep"}},
        {"explain_profile", {"explain", "profile.pageable_copies"}},
    };
}

class GpudoctorProfileCli : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        test_support::two_gpus(NsysShape::s2021, false).write(m_dir / "two-gpus-2021.sqlite");
        test_support::two_gpus(NsysShape::s2024).write(m_dir / "two-gpus-2024.sqlite");
        test_support::two_gpus(NsysShape::s2026).write(m_dir / "two-gpus-2026.sqlite");
        test_support::NsysFixture empty;
        empty.span_start = 1;
        empty.span_end = 3'000'000'001;
        empty.gpus = {{0, "NVIDIA H100 80GB HBM3"}};
        empty.write(m_dir / "empty.sqlite");
        // What gpurun --profile nsys --profile-ranks all leaves: one export per rank.
        std::filesystem::create_directories(m_dir / "run");
        test_support::two_gpus(NsysShape::s2024).write(m_dir / "run/rank1.sqlite");
        empty.write(m_dir / "run/rank0.sqlite");
        std::ofstream(m_dir / "run/rank0.nsys-rep") << "not read";
        test_support::NsysFixture cpu;
        cpu.cuda_tables = false;
        cpu.write(m_dir / "cpu-only.sqlite");
        std::ofstream(m_dir / "notes.txt") << "step 1 loss 2.3\nstep 2 loss 2.1\n, and more text than a header\n";
        std::ofstream(m_dir / "rank0.nsys-rep") << "binary";
    }

    TempDir m_dir;
};

} // namespace

TEST_P(GpudoctorProfileCli, MatchesGolden)
{
    const Case& c = GetParam();
    std::vector<std::string> argv{GPUDOCTOR_PATH};
    for (const auto& a : c.args) {
        argv.push_back(test_support::replace_all(a, "@TMP@", m_dir.path().string()));
    }
    auto r = test_support::run(argv, {{"NO_COLOR", test_support::unset_var}, {"COLUMNS", "100"}});
    ASSERT_FALSE(r.timed_out) << c.name;
    const std::string actual = test_support::replace_all(test_support::golden_text(r), m_dir.path().string(), "@TMP@");
    test_support::expect_golden(std::filesystem::path(GPUKIT_SOURCE_DIR) / "tests/doctor/golden", c.name, actual);
}

INSTANTIATE_TEST_SUITE_P(Golden, GpudoctorProfileCli, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });
