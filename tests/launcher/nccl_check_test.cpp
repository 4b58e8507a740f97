#include "base/error.hpp"
#include "base/nccl/log.hpp"
#include "launcher/nccl_check.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using launcher::NcclCheck;
using launcher::NcclCheckMode;
using test_support::TempDir;

namespace {

using Env = std::map<std::string, std::string>;

launcher::NcclCheckEnv check_env(const Env& env, const std::vector<std::string>& exports = {})
{
    return launcher::nccl_check_env(
        "/logs",
        [&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        exports);
}

std::string joined(const std::vector<std::string>& lines)
{
    std::string out;
    for (const auto& l : lines) {
        out += l + '\n';
    }
    return out;
}

// What one rank of a two-rank job logs; `init_complete` false stops after the Channel lines.
std::string rank_log(int rank, long pid, bool init_complete, const std::string& transport = "P2P/CUMEM/read")
{
    const std::string p =
        "n01:" + std::to_string(pid) + ":" + std::to_string(pid) + " [" + std::to_string(rank) + "] NCCL INFO ";
    const std::string comm = "ncclCommInitRank comm 0x5555aaaa0000 rank " + std::to_string(rank) +
        " nranks 2 cudaDev " + std::to_string(rank) + " nvmlDev " + std::to_string(rank) + " busId " +
        std::to_string(rank + 1) + "0000 commId 0xabcdef0123456789";
    const int next = (rank + 1) % 2;
    std::string text = p + "NCCL version 2.21.5+cuda12.4\n" + p + comm + " - Init START\n" + p +
        "Channel 00/0 : " + std::to_string(rank) + "[" + std::to_string(rank) + "] -> " + std::to_string(next) + "[" +
        std::to_string(next) + "] via " + transport + "\n";
    if (init_complete) {
        text += p + comm + " - Init COMPLETE\n";
    }
    return text;
}

void write(const std::filesystem::path& file, const std::string& text)
{
    std::ofstream(file, std::ios::binary) << text;
}

// The verdict the analyzer gives for these texts, as gpurun prints it.
std::string verdict_lines(const std::vector<std::pair<std::string, std::string>>& logs)
{
    base::nccl::Analyzer a;
    for (const auto& [name, text] : logs) {
        a.read_text(text, name);
    }
    const std::string verdict = base::nccl::render_verdict(a.analysis());
    std::string out;
    std::size_t start = 0;
    while (start < verdict.size()) {
        std::size_t end = verdict.find('\n', start);
        end = end == std::string::npos ? verdict.size() : end;
        out += "gpurun: nccl-check: " + verdict.substr(start, end - start) + "\n";
        start = end + 1;
    }
    return out;
}

// poll() reads at most every 200 ms: ask until it answers or 5 s have passed.
std::string poll_until_answer(NcclCheck& check)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::string said;
    while (said.empty() && std::chrono::steady_clock::now() < deadline) {
        said = check.poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return said;
}

unsigned mode_of(const std::filesystem::path& p)
{
    struct stat st { };
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
}

} // namespace

TEST(NcclCheckEnv, SetsInfoInitNetAndTheLogFile)
{
    auto r = check_env({});
    EXPECT_EQ(r.exports,
        (std::vector<std::string>{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET",
            "NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log", "GPURUN_NCCL_LOG_DIR=/logs"}));
    EXPECT_TRUE(r.notes.empty()) << joined(r.notes);
    EXPECT_EQ(check_env({{"NCCL_DEBUG", ""}}).exports.front(), "NCCL_DEBUG=INFO") << "empty counts as unset";
}

TEST(NcclCheckEnv, KeepsTheUsersSettingsAndPassesThemToEveryRank)
{
    auto r = check_env({{"NCCL_DEBUG", "info"}, {"NCCL_DEBUG_SUBSYS", "INIT,COLL"}});
    EXPECT_EQ(r.exports,
        (std::vector<std::string>{
            "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log", "GPURUN_NCCL_LOG_DIR=/logs"}));
    EXPECT_TRUE(r.notes.empty()) << joined(r.notes);

    auto exported = check_env({{"NCCL_DEBUG", "TRACE"}}, {"NCCL_DEBUG_SUBSYS=ALL", "NCCL_DEBUG=WARN"});
    EXPECT_EQ(exported.exports,
        (std::vector<std::string>{"NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log", "GPURUN_NCCL_LOG_DIR=/logs"}))
        << "the user's -x already reaches the ranks";
    ASSERT_EQ(exported.notes.size(), 1U) << joined(exported.notes);
    EXPECT_NE(exported.notes[0].find("NCCL_DEBUG=WARN is kept"), std::string::npos) << exported.notes[0];
}

TEST(NcclCheckEnv, NotesSettingsThatHideWhatTheCheckReads)
{
    auto warn = check_env({{"NCCL_DEBUG", "WARN"}});
    ASSERT_EQ(warn.notes.size(), 1U);
    EXPECT_EQ(warn.notes[0],
        "NCCL_DEBUG=WARN is kept, so NCCL logs too little for --nccl-check to see communicators and transports; unset "
        "it or set NCCL_DEBUG=INFO");
    for (const char* hides : {"COLL,P2P", "^INIT", "^all", "NET"}) {
        auto r = check_env({{"NCCL_DEBUG_SUBSYS", hides}});
        ASSERT_EQ(r.notes.size(), 1U) << hides;
        EXPECT_NE(r.notes[0].find("without INIT"), std::string::npos) << r.notes[0];
    }
    for (const char* shows : {"INIT", "init,net", "ALL", "^COLL", "NET,INIT"}) {
        EXPECT_TRUE(check_env({{"NCCL_DEBUG_SUBSYS", shows}}).notes.empty()) << shows;
    }
    auto file = check_env({{"NCCL_DEBUG_FILE", "/home/u/nccl.log"}});
    ASSERT_EQ(file.notes.size(), 1U);
    EXPECT_NE(
        file.notes[0].find("NCCL_DEBUG_FILE=/home/u/nccl.log is replaced by /logs/nccl.%h.%p.log"), std::string::npos)
        << file.notes[0];
    EXPECT_NE(std::find(file.exports.begin(), file.exports.end(), "NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log"),
        file.exports.end());
}

TEST(NcclCheck, PrivateDirectoryIsMadeWithMode0700AndRemovedWithItsLogs)
{
    TempDir tmp;
    std::filesystem::path dir;
    {
        NcclCheck check(NcclCheckMode::end, 2, "", tmp.path().string());
        dir = check.dir();
        EXPECT_EQ(dir.parent_path(), tmp.path());
        EXPECT_EQ(dir.filename().string().rfind("gpurun-nccl.", 0), 0U) << dir;
        EXPECT_EQ(mode_of(dir), 0700U);
        write(dir / "nccl.n01.11.log", rank_log(0, 11, true));
    }
    EXPECT_FALSE(std::filesystem::exists(dir)) << "the private directory outlived the check";
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(NcclCheck, PrivateDirectoryUnderAMissingTempDirIsAnError)
{
    TempDir tmp;
    try {
        NcclCheck check(NcclCheckMode::end, 2, "", (tmp / "missing").string());
        ADD_FAILURE() << "made " << check.dir();
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot make a directory for the NCCL logs under"), std::string::npos)
            << e.what();
    }
}

TEST(NcclCheck, EndPrintsTheVerdictOfEveryLog)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::end, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    const std::string a = rank_log(0, 11, true, "SHM/direct/direct");
    const std::string b = rank_log(1, 12, true, "SHM/direct/direct");
    write(dir / "nccl.n01.11.log", a);
    write(dir / "nccl.n01.12.log", b);
    write(dir / "other.txt", rank_log(0, 13, true));
    EXPECT_EQ(check.poll(), "") << "only =init reports while the job runs";
    ASSERT_EQ(check.logs().size(), 2U);
    const std::string said = check.finish();
    // The private directory goes away: the verdict names the logs by their file names.
    const std::string verdict = verdict_lines({{"nccl.n01.11.log", a}, {"nccl.n01.12.log", b}});
    EXPECT_EQ(said, "gpurun: nccl-check: at the end of the job (2 logs):\n" + verdict);
    EXPECT_NE(said.find("nccl.shm_not_p2p"), std::string::npos) << said;
}

TEST(NcclCheck, NoLogSaysSoInOneLine)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::end, 2, "", tmp.path().string());
    EXPECT_EQ(check.finish(),
        "gpurun: nccl-check: no NCCL log appeared: the ranks did not start NCCL, or NCCL did not log to "
        "NCCL_DEBUG_FILE\n");
    TempDir keep;
    NcclCheck kept(NcclCheckMode::end, 2, keep.path().string(), "");
    EXPECT_EQ(kept.finish(),
        "gpurun: nccl-check: no NCCL log appeared in " + keep.path().string() +
            ": the ranks did not start NCCL, or NCCL did not log to NCCL_DEBUG_FILE\n"
            "gpurun: nccl-check: the NCCL logs are kept in " +
            keep.path().string() + " (nccl.HOST.PID.log)\n");
}

TEST(NcclCheck, InitSpeaksOnceEveryRankHasFinishedInit)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::init, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    write(dir / "nccl.n01.11.log", rank_log(0, 11, true));
    // Rank 1 is still in init, and the last line it wrote is not complete yet.
    const std::string half = rank_log(1, 12, true);
    write(dir / "nccl.n01.12.log", half.substr(0, half.size() - 4));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(check.poll(), "");

    write(dir / "nccl.n01.12.log", half);
    const std::string said = poll_until_answer(check);
    const std::string verdict = verdict_lines({{"nccl.n01.11.log", rank_log(0, 11, true)}, {"nccl.n01.12.log", half}});
    EXPECT_EQ(said, "gpurun: nccl-check: all 2 ranks are through NCCL init (the job goes on):\n" + verdict);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(check.poll(), "") << "the verdict is printed once";
    EXPECT_EQ(check.finish(), "") << "nothing new at the end";
}

TEST(NcclCheck, InitReadsEachByteOfTheLogsOnce)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::init, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    const std::string a = rank_log(0, 11, true);
    const std::string b = rank_log(1, 12, true);
    const auto append = [&](const char* name, const std::string& text) {
        std::ofstream(dir / name, std::ios::binary | std::ios::app) << text;
    };
    const auto poll_after_interval = [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        return check.poll();
    };
    // Rank 0 has written half a line.
    const std::size_t cut = a.size() / 2;
    ASSERT_NE(a[cut - 1], '\n');
    append("nccl.n01.11.log", a.substr(0, cut));
    EXPECT_EQ(poll_after_interval(), "");
    EXPECT_EQ(check.bytes_read(), cut);

    // The rest of rank 0's log and all but the last 4 bytes of rank 1's.
    append("nccl.n01.11.log", a.substr(cut));
    append("nccl.n01.12.log", b.substr(0, b.size() - 4));
    EXPECT_EQ(poll_after_interval(), "") << "rank 1's Init COMPLETE line is not complete";
    EXPECT_EQ(check.bytes_read(), a.size() + b.size() - 4);

    append("nccl.n01.12.log", b.substr(b.size() - 4));
    const std::string said = poll_until_answer(check);
    EXPECT_EQ(said,
        "gpurun: nccl-check: all 2 ranks are through NCCL init (the job goes on):\n" +
            verdict_lines({{"nccl.n01.11.log", a}, {"nccl.n01.12.log", b}}));
    EXPECT_EQ(check.bytes_read(), a.size() + b.size()) << "every byte once";
    EXPECT_EQ(check.finish(), "");
    EXPECT_EQ(check.bytes_read(), a.size() + b.size()) << "the end reads nothing again";
}

TEST(NcclCheck, ALogThatShrinksIsReadAgainFromItsStart)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::init, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    const std::string before = rank_log(0, 11, true, "SHM/direct/direct");
    write(dir / "nccl.n01.11.log", before);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(check.poll(), "");
    EXPECT_EQ(check.bytes_read(), before.size());

    // The log is written again, shorter, and the other rank's appears.
    const std::string after = rank_log(0, 11, true);
    ASSERT_LT(after.size(), before.size());
    const std::string b = rank_log(1, 12, true);
    write(dir / "nccl.n01.11.log", after);
    write(dir / "nccl.n01.12.log", b);
    const std::string said = poll_until_answer(check);
    EXPECT_EQ(said,
        "gpurun: nccl-check: all 2 ranks are through NCCL init (the job goes on):\n" +
            verdict_lines({{"nccl.n01.11.log", after}, {"nccl.n01.12.log", b}}));
    EXPECT_EQ(said.find("shm_not_p2p"), std::string::npos) << "what the log held before is forgotten";
    EXPECT_EQ(check.bytes_read(), before.size() + after.size() + b.size());
}

TEST(NcclCheck, EndReadsTheLastLineWithoutItsNewline)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::end, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    const std::string a = rank_log(0, 11, true, "SHM/direct/direct");
    const std::string b = rank_log(1, 12, true, "SHM/direct/direct");
    write(dir / "nccl.n01.11.log", a);
    write(dir / "nccl.n01.12.log", b.substr(0, b.size() - 1));
    EXPECT_EQ(check.finish(),
        "gpurun: nccl-check: at the end of the job (2 logs):\n" +
            verdict_lines({{"nccl.n01.11.log", a}, {"nccl.n01.12.log", b.substr(0, b.size() - 1)}}));
    EXPECT_EQ(check.bytes_read(), a.size() + b.size() - 1);
}

TEST(NcclCheck, InitPrintsTheFinalVerdictWhenItDiffers)
{
    TempDir tmp;
    NcclCheck check(NcclCheckMode::init, 2, "", tmp.path().string());
    const std::filesystem::path dir = check.dir();
    write(dir / "nccl.n01.11.log", rank_log(0, 11, true));
    write(dir / "nccl.n01.12.log", rank_log(1, 12, true));
    ASSERT_NE(poll_until_answer(check), "");
    // After init, the ranks connect more channels (NCCL connects lazily), here over shared memory.
    const std::string more = "n01:11:11 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct\n";
    std::ofstream(dir / "nccl.n01.11.log", std::ios::app) << more;
    const std::string said = check.finish();
    EXPECT_EQ(said.rfind("gpurun: nccl-check: at the end of the job the logs show more (2 logs):\n", 0), 0U) << said;
    EXPECT_NE(said.find("nccl.shm_not_p2p"), std::string::npos) << said;
}

TEST(NcclCheck, KeptDirectoryIsMadeWithMode0700AndOldLogsAreNotRead)
{
    TempDir tmp;
    const auto keep = tmp / "runs/today";
    {
        NcclCheck check(NcclCheckMode::end, 2, keep.string(), "");
        EXPECT_EQ(check.dir(), keep.string());
        EXPECT_EQ(mode_of(keep), 0700U);
        write(keep / "nccl.n01.11.log", rank_log(0, 11, true));
        write(keep / "nccl.n01.12.log", rank_log(1, 12, true));
        const std::string said = check.finish();
        EXPECT_EQ(said.rfind("gpurun: nccl-check: at the end of the job (2 logs):\n", 0), 0U) << said;
        EXPECT_NE(
            said.find("gpurun: nccl-check: the NCCL logs are kept in " + keep.string() + " (nccl.HOST.PID.log)\n"),
            std::string::npos)
            << said;
    }
    EXPECT_TRUE(std::filesystem::exists(keep / "nccl.n01.11.log")) << "kept logs are kept";

    // A second job in the same directory: the first job's logs are not its own.
    NcclCheck again(NcclCheckMode::end, 2, keep.string(), "");
    EXPECT_TRUE(again.logs().empty());
    write(keep / "nccl.n01.12.log", rank_log(1, 12, false));
    ASSERT_EQ(again.logs().size(), 1U) << "a log written again is read";
    const std::string said = again.finish();
    EXPECT_EQ(said.rfind("gpurun: nccl-check: at the end of the job (1 log):\n", 0), 0U) << said;
}

TEST(NcclCheck, KeptDirectoryThatIsAFileIsAnError)
{
    TempDir tmp;
    write(tmp / "file", "x");
    try {
        NcclCheck check(NcclCheckMode::end, 2, (tmp / "file").string(), "");
        ADD_FAILURE();
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()), "--nccl-log-dir " + (tmp / "file").string() + ": not a directory");
    }
}

TEST(NcclCheck, KeptDirectoryThatOthersCanWriteToIsAnError)
{
    TempDir tmp;
    const auto shared = tmp / "shared";
    std::filesystem::create_directory(shared);
    ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
    try {
        NcclCheck check(NcclCheckMode::end, 2, shared.string(), "");
        ADD_FAILURE() << "a directory every user can write to was accepted";
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()),
            "--nccl-log-dir " + shared.string() +
                ": every user can write to it (mode 1777): another user could read or replace what is written there; "
                "use a directory of your own");
    }
    ASSERT_EQ(chmod(shared.c_str(), 0770), 0);
    EXPECT_NO_THROW(NcclCheck(NcclCheckMode::end, 2, shared.string(), "")) << "group write is allowed";
}

TEST(NcclLogDir, MustBeADirectoryOfThisUserThatNotEveryoneCanWriteTo)
{
    TempDir tmp;
    const auto dir = tmp / "logs";
    EXPECT_EQ(launcher::nccl_log_dir_problem(dir.string()), "No such file or directory");
    std::filesystem::create_directory(dir);
    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
    EXPECT_EQ(launcher::nccl_log_dir_problem(dir.string()), "");
    ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
    EXPECT_EQ(launcher::nccl_log_dir_problem(dir.string()), "every user can write to it (mode 0777)");
    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
    write(tmp / "file", "x");
    EXPECT_EQ(launcher::nccl_log_dir_problem((tmp / "file").string()), "it is not a directory");
    std::filesystem::create_directory_symlink(dir, tmp / "link");
    EXPECT_EQ(launcher::nccl_log_dir_problem((tmp / "link").string()), "") << "a link to a directory of ours is fine";
    if (geteuid() == 0) {
        // Another user's directory (root can make one): a trap planted on a host before the job.
        ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
        EXPECT_EQ(launcher::nccl_log_dir_problem(dir.string()), "it belongs to uid 65534, not 0");
    }
}

TEST(NcclLogDir, TheHelperKeepsNcclDebugFileOnlyInADirectoryThatPasses)
{
    TempDir tmp;
    const auto dir = tmp / "gpurun-nccl.abc123";
    const std::string file = (dir / launcher::nccl_log_name).string();
    auto prepare = [&] {
        setenv(launcher::nccl_log_dir_variable, dir.c_str(), 1);
        setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
    };
    auto debug_file = [] {
        const char* v = std::getenv("NCCL_DEBUG_FILE");
        return v == nullptr ? std::string("(unset)") : std::string(v);
    };

    // Missing here: the private directory of a job started on another host. NCCL logs to stdout.
    prepare();
    EXPECT_EQ(launcher::keep_nccl_log_file_only_in_own_dir(), "");
    EXPECT_EQ(debug_file(), "(unset)");
    EXPECT_EQ(std::getenv(launcher::nccl_log_dir_variable), nullptr) << "the variable is gpurun's, not the program's";

    // Made by someone who lets everyone write to it: not used, with a warning.
    std::filesystem::create_directory(dir);
    ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
    prepare();
    EXPECT_EQ(launcher::keep_nccl_log_file_only_in_own_dir(),
        "the NCCL log directory " + dir.string() +
            " is not used: every user can write to it (mode 0777); NCCL logs to standard output");
    EXPECT_EQ(debug_file(), "(unset)");

    // Ours: kept.
    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
    prepare();
    EXPECT_EQ(launcher::keep_nccl_log_file_only_in_own_dir(), "");
    EXPECT_EQ(debug_file(), file);

    // Without the variable (no --nccl-check), the user's own NCCL_DEBUG_FILE is left alone.
    unsetenv(launcher::nccl_log_dir_variable);
    setenv("NCCL_DEBUG_FILE", "/nonexistent/nccl.log", 1);
    EXPECT_EQ(launcher::keep_nccl_log_file_only_in_own_dir(), "");
    EXPECT_EQ(debug_file(), "/nonexistent/nccl.log");
    unsetenv("NCCL_DEBUG_FILE");
}
