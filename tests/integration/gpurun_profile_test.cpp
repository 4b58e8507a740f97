// gpurun --profile nsys with the real Open MPI mpirun and a fake nsys first on PATH: the chosen
// ranks run under it with their own report name, the others do not.
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

// Records its arguments (one per line) in $FAKE_NSYS_LOG/nsys.rank$RANK.args, runs the program
// after nsys's options as `nsys profile` does, and leaves the report files nsys would.
constexpr const char* fake_nsys = R"(#!/bin/sh
printf '%s\n' "$@" > "$FAKE_NSYS_LOG/nsys.rank$RANK.args"
[ "$1" = profile ] || exit 64
shift
out=
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out="$2"; shift 2 ;;
        --*=*) shift ;;
        -*) echo "fake nsys: unexpected option $1" >&2; exit 64 ;;
        *) break ;;
    esac
done
"$@"
status=$?
if [ -n "$out" ]; then
    : > "$out.nsys-rep"
    : > "$out.sqlite"
fi
exit $status
)";

std::string read_all(const std::filesystem::path& file)
{
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class GpurunProfile : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::filesystem::create_directories(m_dir / "bin");
        std::filesystem::create_directories(m_dir / "log");
        std::filesystem::create_directories(m_dir / "probe");
        std::ofstream(m_dir / "bin/nsys") << fake_nsys;
        chmod((m_dir / "bin/nsys").c_str(), 0755);
        const char* path = std::getenv("PATH");
        m_env = {{"PATH", (m_dir / "bin").string() + ":" + (path != nullptr ? path : "/usr/bin:/bin")},
            {"FAKE_NSYS_LOG", (m_dir / "log").string()}, {"PROBE_DIR", (m_dir / "probe").string()},
            {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
            {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}, {"MASTER_ADDR", test_support::unset_var},
            {"MASTER_PORT", test_support::unset_var}};
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra);
    }

    // The ranks nsys ran, from its argument logs.
    std::vector<std::string> logs() const
    {
        std::vector<std::string> names;
        for (const auto& entry : std::filesystem::directory_iterator(m_dir / "log")) {
            names.push_back(entry.path().filename().string());
        }
        std::sort(names.begin(), names.end());
        return names;
    }

    std::string expected_args(unsigned rank) const
    {
        return "profile\n-o\n" + (m_dir / "reports" / ("rank" + std::to_string(rank))).string() +
            "\n--trace=cuda,nvtx,osrt,mpi\n--mpi-impl=openmpi\n--export=sqlite\n--force-overwrite=true\n" +
            RANK_PROBE_PATH + "\nan arg\n";
    }

    bool rank_ran(unsigned rank) const
    {
        return read_all(m_dir / "probe" / ("rank-" + std::to_string(rank) + ".txt")).find("arg=an arg\n") !=
            std::string::npos;
    }

    TempDir m_dir;
    EnvChanges m_env;
};

} // namespace

TEST_F(GpurunProfile, RankZeroByDefaultOthersRunPlain)
{
    const std::string reports = (m_dir / "reports").string();
    auto r =
        gpurun({"--cpu-only", "-np", "2", "--profile", "nsys", "--profile-dir", reports, RANK_PROBE_PATH, "an arg"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(logs(), std::vector<std::string>{"nsys.rank0.args"}) << "only rank 0 runs under nsys";
    EXPECT_EQ(read_all(m_dir / "log/nsys.rank0.args"), expected_args(0));
    EXPECT_TRUE(rank_ran(0));
    EXPECT_TRUE(rank_ran(1));
    EXPECT_TRUE(std::filesystem::exists(m_dir / "reports/rank0.sqlite"));
    EXPECT_FALSE(std::filesystem::exists(m_dir / "reports/rank1.sqlite"));
    EXPECT_NE(r.err.find("gpurun: profile: the nsys reports of rank 0 are in " + reports), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("gpurun: profile: read them with: gpudoctor profile " + reports + "/rank0.sqlite\n"),
        std::string::npos)
        << r.err;
}

TEST_F(GpurunProfile, ChosenRanksEachWriteTheirOwnReport)
{
    auto r = gpurun({"--cpu-only", "-np", "3", "--profile", "nsys", "--profile-ranks", "0,2", "--profile-dir",
        (m_dir / "reports").string(), RANK_PROBE_PATH, "an arg"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(logs(), (std::vector<std::string>{"nsys.rank0.args", "nsys.rank2.args"}));
    EXPECT_EQ(read_all(m_dir / "log/nsys.rank0.args"), expected_args(0));
    EXPECT_EQ(read_all(m_dir / "log/nsys.rank2.args"), expected_args(2));
    for (unsigned rank = 0; rank < 3; ++rank) {
        EXPECT_TRUE(rank_ran(rank)) << rank;
    }
    EXPECT_NE(r.err.find("the nsys reports of ranks 0,2 are in"), std::string::npos) << r.err;
}

TEST_F(GpurunProfile, AllRanksAndTheJobsExitStatus)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--profile", "nsys", "--profile-ranks", "all", "--profile-dir",
                        (m_dir / "reports").string(), RANK_PROBE_PATH, "an arg"},
        {{"PROBE_EXIT_RANK", "1"}, {"PROBE_EXIT", "3"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(logs(), (std::vector<std::string>{"nsys.rank0.args", "nsys.rank1.args"}));
    EXPECT_EQ(read_all(m_dir / "log/nsys.rank1.args"), expected_args(1));
    EXPECT_NE(r.err.find("the nsys reports of ranks 0-1 are in"), std::string::npos) << r.err;
}

TEST_F(GpurunProfile, WithoutNsysNothingStarts)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--profile", "nsys", "--profile-dir", (m_dir / "reports").string(),
                        RANK_PROBE_PATH, "an arg"},
        {{"PATH", "/usr/bin:/bin"}});
    if (std::filesystem::exists("/usr/bin/nsys") || std::filesystem::exists("/bin/nsys")) {
        GTEST_SKIP() << "a real nsys is installed";
    }
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("gpurun: --profile nsys: nsys is not on PATH"), std::string::npos) << r.err;
    EXPECT_FALSE(rank_ran(0));
    EXPECT_FALSE(std::filesystem::exists(m_dir / "reports")) << "no report directory for a job that did not start";
}
