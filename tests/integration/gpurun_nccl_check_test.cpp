// gpurun --nccl-check with the real Open MPI mpirun: ranks that log like NCCL (fake_nccl_rank) write
// to the files gpurun names, and gpurun prints the analyzer's verdict.
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

std::size_t count(const std::string& text, const std::string& what)
{
    std::size_t n = 0;
    for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) {
        ++n;
    }
    return n;
}

std::string read_all(const std::filesystem::path& file)
{
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class GpurunNcclCheck : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::filesystem::create_directory(m_tmp);
        m_env = {{"TMPDIR", m_tmp.string()}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
            {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}, {"NCCL_DEBUG", test_support::unset_var},
            {"NCCL_DEBUG_SUBSYS", test_support::unset_var}, {"NCCL_DEBUG_FILE", test_support::unset_var},
            {"MASTER_ADDR", test_support::unset_var}, {"MASTER_PORT", test_support::unset_var}};
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra);
    }

    // The private log directories gpurun left in its TMPDIR.
    std::vector<std::string> leftovers() const
    {
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(m_tmp)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind("gpurun-nccl.", 0) == 0) {
                found.push_back(name);
            }
        }
        return found;
    }

    // Waits up to 30 s for `what` in the file; returns the file's text then.
    std::string wait_for_text(const std::filesystem::path& file, const std::string& what)
    {
        std::string text;
        for (int i = 0; i < 300; ++i) {
            text = read_all(file);
            if (text.find(what) != std::string::npos) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return text;
    }

    TempDir m_dir;
    std::filesystem::path m_tmp = m_dir / "tmp";
    EnvChanges m_env;
};

} // namespace

TEST_F(GpurunNcclCheck, VerdictAtTheEndAndNothingLeftBehind)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--nccl-check", FAKE_NCCL_RANK_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("fake_nccl_rank 0 of 2: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("fake_nccl_rank 1: done"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("NCCL INFO"), std::string::npos) << "NCCL's lines went to the console:\n" << r.out;
    EXPECT_NE(r.err.find("gpurun: nccl-check: at the end of the job (2 logs):\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("p2p"), std::string::npos) << "the transport summary:\n" << r.err;
    EXPECT_EQ(r.err.find("nccl.shm_not_p2p"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "the private log directory was not removed";
}

TEST_F(GpurunNcclCheck, SharedMemoryBetweenGpusIsAFinding)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--nccl-check=end", FAKE_NCCL_RANK_PATH, "--transport", "shm"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("nccl.shm_not_p2p"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunNcclCheck, LogDirKeepsTheLogs)
{
    const auto keep = m_dir / "logs/run1";
    auto r = gpurun({"--cpu-only", "-np", "2", "--nccl-check", "--nccl-log-dir", keep.string(), FAKE_NCCL_RANK_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    struct stat st { };
    ASSERT_EQ(stat(keep.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700U);
    std::vector<std::string> logs;
    for (const auto& entry : std::filesystem::directory_iterator(keep)) {
        logs.push_back(entry.path().filename().string());
        EXPECT_NE(read_all(entry.path()).find("Init COMPLETE"), std::string::npos) << entry.path();
    }
    EXPECT_EQ(logs.size(), 2U);
    for (const auto& name : logs) {
        EXPECT_EQ(name.rfind("nccl.", 0), 0U) << name;
    }
    EXPECT_NE(r.err.find("gpurun: nccl-check: the NCCL logs are kept in " + keep.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("gpurun: nccl-check: at the end of the job (2 logs):\n"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunNcclCheck, InitPrintsTheVerdictWhileTheJobRuns)
{
    // The ranks wait after init until the test has seen the verdict: its order in the output does not
    // depend on timing.
    const auto log = m_dir / "gpurun.log";
    const auto release = m_dir / "release";
    pid_t pid = test_support::start({GPURUN_PATH, "--cpu-only", "-np", "2", "--nccl-check=init", FAKE_NCCL_RANK_PATH,
                                        "--wait-for", release.string()},
        m_env, log.string());
    const std::string during = wait_for_text(log, "all 2 ranks are through NCCL init");
    std::ofstream(release) << "go\n";
    const int code = test_support::wait_for(pid, std::chrono::seconds(60));
    if (code == -1) {
        kill(pid, SIGKILL);
    }
    EXPECT_NE(
        during.find("gpurun: nccl-check: all 2 ranks are through NCCL init (the job goes on):\n"), std::string::npos)
        << "no verdict while the ranks waited:\n"
        << during;
    EXPECT_EQ(during.find(": done"), std::string::npos) << during;
    EXPECT_EQ(code, 0);
    const std::string all = read_all(log);
    EXPECT_NE(all.find("fake_nccl_rank 0: done"), std::string::npos) << all;
    EXPECT_EQ(count(all, "through NCCL init"), 1U) << all;
    EXPECT_EQ(count(all, "at the end of the job"), 0U) << "the same verdict was printed again at the end:\n" << all;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunNcclCheck, SigintPrintsTheVerdictAndRemovesTheLogs)
{
    // Ranks that hang after init: the user stops the job and still learns what the logs show.
    const auto log = m_dir / "gpurun.log";
    pid_t pid = test_support::start({GPURUN_PATH, "--cpu-only", "-np", "2", "--grace", "3", "--nccl-check",
                                        FAKE_NCCL_RANK_PATH, "--wait-for", (m_dir / "never").string()},
        m_env, log.string());
    std::string started = wait_for_text(log, "fake_nccl_rank 0 of 2");
    started = wait_for_text(log, "fake_nccl_rank 1 of 2");
    ASSERT_NE(started.find("fake_nccl_rank 1 of 2"), std::string::npos) << "ranks did not start:\n" << started;
    // The ranks print that line before they log; give them a moment to finish init.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGINT);
    const int code = test_support::wait_for(pid, std::chrono::seconds(30));
    if (code == -1) {
        kill(pid, SIGKILL);
    }
    EXPECT_EQ(code, 128 + SIGINT);
    const std::string all = read_all(log);
    EXPECT_NE(all.find("gpurun: nccl-check: "), std::string::npos) << all;
    EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "the private log directory outlived a forwarded signal";
}

TEST_F(GpurunNcclCheck, ProgramWithoutNcclGetsOneLine)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--nccl-check", "/bin/true"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.err, "gpurun: nccl-check: "), 1U) << r.err;
    EXPECT_NE(r.err.find("no NCCL log appeared"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunNcclCheck, UsersOwnSettingsAreKept)
{
    auto subsys = gpurun({"--cpu-only", "-np", "2", "--nccl-check", FAKE_NCCL_RANK_PATH},
        {{"NCCL_DEBUG_SUBSYS", "INIT,COLL"}, {"NCCL_DEBUG", "info"}});
    ASSERT_EQ(subsys.exit_code, 0) << subsys.err;
    EXPECT_NE(subsys.out.find("fake_nccl_rank 1 of 2: NCCL_DEBUG=info NCCL_DEBUG_SUBSYS=INIT,COLL"), std::string::npos)
        << subsys.out;
    EXPECT_EQ(subsys.err.find("gpurun: note:"), std::string::npos) << subsys.err;
    EXPECT_NE(subsys.err.find("at the end of the job (2 logs)"), std::string::npos) << subsys.err;

    auto warn = gpurun({"--cpu-only", "-np", "2", "--nccl-check", FAKE_NCCL_RANK_PATH}, {{"NCCL_DEBUG", "WARN"}});
    ASSERT_EQ(warn.exit_code, 0) << warn.err;
    EXPECT_NE(warn.out.find("fake_nccl_rank 0 of 2: NCCL_DEBUG=WARN"), std::string::npos) << warn.out;
    EXPECT_NE(warn.err.find("gpurun: note: NCCL_DEBUG=WARN is kept"), std::string::npos) << warn.err;
    EXPECT_NE(warn.err.find("no NCCL log appeared"), std::string::npos) << warn.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunNcclCheck, ExitStatusStaysTheJobs)
{
    auto r = gpurun({"--cpu-only", "-np", "1", "--nccl-check", "/bin/false"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("no NCCL log appeared"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

// A rank on another host: the private directory's path (in mpirun's arguments, which every user can
// read) may have been made there by someone else. The rank's helper then leaves NCCL_DEBUG_FILE
// out, so NCCL logs to standard output instead of into that directory.
TEST_F(GpurunNcclCheck, TheHelperUsesNoLogDirectoryThatIsNotTheUsers)
{
    const std::string helper = (std::filesystem::path(GPURUN_PATH).parent_path() / "gpurun-rank").string();
    const auto dir = m_tmp / "gpurun-nccl.Ab12Cd";
    const EnvChanges rank = {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
        {"NCCL_DEBUG_FILE", (dir / "nccl.%h.%p.log").string()}, {"GPURUN_NCCL_LOG_DIR", dir.string()}};
    auto run = [&] { return test_support::run_with(helper, {"--cpu-only", "--", "env"}, m_env, rank); };

    auto missing = run();
    ASSERT_EQ(missing.exit_code, 0) << missing.err;
    EXPECT_EQ(missing.out.find("NCCL_DEBUG_FILE="), std::string::npos) << missing.out;
    EXPECT_EQ(missing.out.find("GPURUN_NCCL_LOG_DIR="), std::string::npos) << "gpurun's own variable";
    EXPECT_EQ(missing.err, "") << "a directory missing on another host is usual";

    std::filesystem::create_directory(dir);
    ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
    auto open_to_all = run();
    ASSERT_EQ(open_to_all.exit_code, 0) << open_to_all.err;
    EXPECT_EQ(open_to_all.out.find("NCCL_DEBUG_FILE="), std::string::npos) << open_to_all.out;
    EXPECT_NE(open_to_all.err.find("gpurun-rank: warning: rank 0 ("), std::string::npos) << open_to_all.err;
    EXPECT_NE(open_to_all.err.find("the NCCL log directory " + dir.string() +
                  " is not used: every user can write to it (mode 0777); NCCL logs to standard output\n"),
        std::string::npos)
        << open_to_all.err;

    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
    auto own = run();
    ASSERT_EQ(own.exit_code, 0) << own.err;
    EXPECT_NE(own.out.find("NCCL_DEBUG_FILE=" + (dir / "nccl.%h.%p.log").string() + "\n"), std::string::npos)
        << own.out;
    EXPECT_EQ(own.err, "");
}

// gpurun killed with SIGKILL runs no destructor: the private log directory is removed by the
// watcher gpurun started when it made it (base::remove_after_exit).
TEST_F(GpurunNcclCheck, KillNineLeavesNoLogDirectory)
{
    const auto log = m_dir / "gpurun.log";
    const auto release = m_dir / "release";
    pid_t pid = test_support::start(
        {GPURUN_PATH, "--cpu-only", "-np", "2", "--nccl-check", FAKE_NCCL_RANK_PATH, "--wait-for", release.string()},
        m_env, log.string());
    const std::string started = wait_for_text(log, "fake_nccl_rank 1 of 2");
    ASSERT_NE(started.find("fake_nccl_rank 1 of 2"), std::string::npos) << "ranks did not start:\n" << started;
    ASSERT_EQ(leftovers().size(), 1U) << "the private log directory is there while the job runs";
    kill(pid, SIGKILL);
    test_support::wait_for(pid, std::chrono::seconds(30));
    for (int i = 0; i < 100 && !leftovers().empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "the private log directory outlived gpurun";
    std::ofstream(release) << "go\n"; // the ranks, which outlive gpurun's SIGKILL, end
}
