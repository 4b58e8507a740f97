#include "base/process.hpp"

#include "base/error.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

// What KeptOutput must hold for `text`: all of it when it fits in head + tail, else its first
// `head` bytes, the line that counts what was left out, and its last `tail` bytes.
std::string expected(const std::string& text, std::size_t head, std::size_t tail)
{
    if (text.size() <= head + tail) {
        return text;
    }
    std::string out = text.substr(0, head);
    if (!out.empty() && out.back() != '\n') {
        out += '\n';
    }
    out += "[... " + std::to_string(text.size() - head - tail) + " bytes of output left out ...]\n";
    return out + text.substr(text.size() - tail);
}

TEST(KeptOutput, KeepsTheStartAndTheEndWhateverTheChunks)
{
    std::mt19937 random(7);
    for (std::size_t size : {0U, 5U, 10U, 11U, 29U, 30U, 31U, 64U, 1000U}) {
        std::string text;
        for (std::size_t i = 0; i < size; ++i) {
            text += static_cast<char>('a' + i % 26);
        }
        for (int round = 0; round < 20; ++round) {
            base::KeptOutput kept(10, 20);
            std::size_t at = 0;
            while (at < text.size()) {
                const std::size_t n = std::min<std::size_t>(text.size() - at, 1 + random() % 45);
                kept.append(text.data() + at, n);
                at += n;
            }
            EXPECT_EQ(kept.take(), expected(text, 10, 20)) << "size " << size << ", round " << round;
        }
    }
}

TEST(KeptOutput, TheCountStartsOnItsOwnLineAndTakeEmptiesIt)
{
    base::KeptOutput kept(4, 3);
    const std::string text = "abc\ndefghij\nxyz";
    kept.append(text.data(), text.size());
    EXPECT_EQ(kept.take(), "abc\n[... 8 bytes of output left out ...]\nxyz");
    EXPECT_EQ(kept.take(), "");
    kept.append("12345", 5);
    EXPECT_EQ(kept.take(), "12345");
}

TEST(RunCommand, KeepsTheLastLinesOfAnOutputPastTheLimit)
{
    // 20 MB, then a last line: the output holds the first and last 8 MiB and the last line.
    auto r = base::run_command(
        {"/bin/sh", "-c", "head -c 20000000 /dev/zero | tr '\\000' x; echo; echo 'the last line' >&2"},
        std::chrono::seconds(60));
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_FALSE(r.timed_out);
    const std::size_t mib8 = 8U << 20;
    const std::string dropped = std::to_string(20000000 + 1 + 14 - 2 * mib8);
    EXPECT_EQ(r.output.size(), 2 * mib8 + 1 + ("[...  bytes of output left out ...]\n" + dropped).size());
    EXPECT_EQ(r.output.substr(0, 3), "xxx");
    EXPECT_NE(r.output.find("\n[... " + dropped + " bytes of output left out ...]\nxxx"), std::string::npos);
    EXPECT_EQ(r.output.substr(r.output.size() - 16), "x\nthe last line\n");
}

TEST(RunCommand, StatusTimeoutAndAProgramThatIsNotThere)
{
    auto r = base::run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.output, "out\nerr\n");
    const auto start = std::chrono::steady_clock::now();
    r = base::run_command({"sleep", "30"}, std::chrono::milliseconds(200));
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.exit_code, 128 + SIGKILL);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    r = base::run_command({"gpukit-no-such-program"}, std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 127);
    // A program that closes its output and goes on is still ended at the deadline.
    r = base::run_command({"/bin/sh", "-c", "exec >&- 2>&-; sleep 30"}, std::chrono::milliseconds(300));
    EXPECT_TRUE(r.timed_out);
}

// A command that hangs (`mpirun --version` on a broken install) and the children it started: all
// of them go at the deadline, also those that closed their output; and what a command that ended
// left running goes with it.
TEST(RunCommand, NothingTheCommandStartedOutlivesIt)
{
    test_support::TempDir dir;
    const auto pids = dir / "pids";
    auto alive = [](const std::filesystem::path& file) {
        std::ifstream in(file);
        std::vector<pid_t> left;
        for (pid_t pid = 0; in >> pid;) {
            // Killed but not yet reaped by whoever inherited it (state Z) counts as gone.
            std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
            std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
            const auto paren = text.rfind(')');
            if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z') {
                left.push_back(pid);
            }
        }
        return left;
    };
    auto r = base::run_command(
        {"/bin/sh", "-c", "(exec >&- 2>&-; sleep 30) & echo $! >>\"$0\"; sleep 30 & echo $! >>\"$0\"; wait",
            pids.string()},
        std::chrono::milliseconds(500));
    EXPECT_TRUE(r.timed_out);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(alive(pids), std::vector<pid_t>{}) << "children of a command killed at its deadline";
    std::filesystem::remove(pids);
    r = base::run_command({"/bin/sh", "-c", "(exec >&- 2>&-; sleep 30) & echo $! >>\"$0\"; exit 0", pids.string()},
        std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(alive(pids), std::vector<pid_t>{}) << "a child left behind by a command that ended";
}

TEST(RunCommand, TheEnvironmentGivenIsTheWholeEnvironment)
{
    const std::map<std::string, std::string> env{{"PATH", "/usr/bin:/bin"}, {"ONLY", "this"}};
    auto r = base::run_command({"sh", "-c", "env | sort"}, std::chrono::seconds(10), env);
    EXPECT_EQ(r.output, "ONLY=this\nPATH=/usr/bin:/bin\nPWD=" + std::filesystem::current_path().string() + "\n");
}

TEST(SpawnFunction, ReturnsWhatTheChildMadeAndTellsACrashFromAThrow)
{
    std::vector<base::Child> children;
    children.push_back(base::spawn_function([] { return std::string("made in the child"); }, {}));
    children.push_back(base::spawn_function([]() -> std::string { throw base::Error("it broke: here"); }, {}));
    children.push_back(base::spawn_function(
        []() -> std::string {
            raise(SIGSEGV);
            return "";
        },
        {}));
    const auto outcomes = base::wait_for_children(children, std::chrono::seconds(10));
    ASSERT_EQ(outcomes.size(), 3U);
    EXPECT_TRUE(outcomes[0].exited(0));
    EXPECT_EQ(outcomes[0].output, "made in the child");
    EXPECT_TRUE(outcomes[1].exited(3));
    EXPECT_EQ(outcomes[1].output, "it broke: here");
    EXPECT_TRUE(outcomes[2].signaled());
    EXPECT_EQ(WTERMSIG(outcomes[2].status), SIGSEGV);
    EXPECT_EQ(outcomes[2].exit_code(), 128 + SIGSEGV);
}

TEST(SpawnFunction, AHangIsKilledAtTheDeadlineWithWhatItStartedAndTheOthersFinish)
{
    test_support::TempDir dir;
    const auto pid_file = dir / "grandchild";
    base::SpawnOptions options;
    options.own_group = true;
    std::vector<base::Child> children;
    children.push_back(base::spawn_function(
        [&] {
            // Starts a process of its own, then hangs: both must go at the deadline.
            const pid_t grandchild = fork();
            if (grandchild == 0) {
                pause();
                _exit(0);
            }
            std::ofstream(pid_file) << grandchild;
            pause();
            return std::string();
        },
        options));
    children.push_back(base::spawn_function([] { return std::string("quick"); }, options));
    const auto start = std::chrono::steady_clock::now();
    const auto outcomes = base::wait_for_children(children, std::chrono::milliseconds(500));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    EXPECT_TRUE(outcomes[0].timed_out);
    EXPECT_TRUE(outcomes[0].reaped);
    EXPECT_FALSE(outcomes[1].timed_out);
    EXPECT_EQ(outcomes[1].output, "quick");
    pid_t grandchild = 0;
    std::ifstream(pid_file) >> grandchild;
    ASSERT_GT(grandchild, 0);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
        // Not our child: it is gone once kill(0) fails (a zombie is reaped by init quickly).
        std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        gone = text.empty() || text.find(") Z ") != std::string::npos;
        if (!gone) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    EXPECT_TRUE(gone) << "the hanging child's own child outlived the deadline";
}

/// Waits up to 10 s for the supervised program to end; the last event (exited, unless it did not).
base::Supervisor::Event until_exit(base::Supervisor& supervisor)
{
    base::Supervisor::Event event;
    for (int i = 0; i < 100 && !event.exited; ++i) {
        event = supervisor.wait(std::chrono::milliseconds(100));
    }
    return event;
}

TEST(Supervisor, PassesOnASignalAndReportsTheExitStatus)
{
    base::Supervisor supervisor;
    supervisor.start({"/bin/sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"}, true, "");
    EXPECT_TRUE(supervisor.started());
    auto event = supervisor.wait(std::chrono::milliseconds(100));
    EXPECT_FALSE(event.exited);
    EXPECT_EQ(event.signal, 0);
    kill(getpid(), SIGTERM); // blocked by the supervisor: delivered through wait()
    event = supervisor.wait(std::chrono::seconds(5));
    EXPECT_EQ(event.signal, SIGTERM);
    EXPECT_FALSE(event.from_terminal);
    supervisor.child().signal(event.signal);
    event = until_exit(supervisor);
    EXPECT_TRUE(event.exited);
    EXPECT_EQ(event.exit_code, 7);
}

TEST(Supervisor, AProgramThatCannotRunSaysWhyAndExits127)
{
    base::Supervisor supervisor;
    supervisor.start({"gpukit-no-such-program"}, false, "test: cannot run it: ");
    const auto event = until_exit(supervisor);
    EXPECT_TRUE(event.exited);
    EXPECT_EQ(event.exit_code, 127);
}

TEST(SpawnProgram, ADetachedProgramIsNobodysChildAndKeepsNoDescriptor)
{
    test_support::TempDir dir;
    const auto out = dir / "fds";
    // The descriptor of a file opened here must not reach the daemon.
    std::FILE* held = std::fopen((dir / "held").c_str(), "w");
    ASSERT_NE(held, nullptr);
    base::SpawnOptions options;
    options.detach = true;
    const auto before = std::chrono::steady_clock::now();
    base::spawn_program({"/bin/sh", "-c", "sleep 0.2; ls /proc/self/fd > " + out.string()}, options);
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(1)) << "waited for the daemon";
    std::fclose(held);
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child left to reap";
    std::string listed;
    for (int i = 0; i < 300 && listed.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::ifstream in(out);
        std::getline(in, listed, '\0');
    }
    // 0, 1, 2 and the one ls opens to read the directory: nothing inherited.
    EXPECT_EQ(listed, "0\n1\n2\n3\n");
}

} // namespace

// A call that never returns (a wedged driver) ends the process at the deadline with its message,
// its cleanup and its exit status; one that returns in time leaves nothing armed.
TEST(CallDeadline, EndsAStuckCallWithItsMessageAndStatus)
{
    static int cleaned = -1;
    test_support::TempDir dir;
    const std::string log = (dir / "stderr").string();
    std::vector<base::Child> children;
    children.push_back(base::spawn_function(
        [&log] {
            const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            {
                const base::CallDeadline quick(5, "not this one\n", 4);
            }
            const base::CallDeadline deadline(1, "an NVML call did not return\n", 3, [] {
                cleaned = 1;
                [[maybe_unused]] auto n = write(STDOUT_FILENO, "cleaned\n", 8);
            });
            while (true) {
                pause();
            }
            return std::string();
        },
        base::SpawnOptions{}));
    const auto start = std::chrono::steady_clock::now();
    const auto outcome = base::wait_for_children(children, std::chrono::seconds(20)).front();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_FALSE(outcome.timed_out);
    EXPECT_TRUE(outcome.exited(3)) << outcome.exit_code();
    std::ifstream in(log);
    const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(written, "an NVML call did not return\ncleaned\n");
    EXPECT_EQ(cleaned, -1) << "the cleanup ran in the child only";
}

TEST(AfterExit, TheWatcherActsWhenTheProcessEndsUnlessToldItIsNotNeeded)
{
    // A process starts a watcher whose action writes a file, then ends: killed (the action runs),
    // or after saying the action is not needed (it does not).
    test_support::TempDir dir;
    auto run = [&](const std::string& name, bool not_needed) {
        const std::string file = (dir.path() / name).string();
        const pid_t pid = fork();
        if (pid == 0) {
            base::UniqueFd watcher = base::after_exit([&file] { std::ofstream(file) << "acted"; });
            if (watcher.get() < 0) {
                _exit(1);
            }
            if (not_needed) {
                base::not_needed_after_exit(watcher);
                _exit(0);
            }
            raise(SIGKILL);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        return status;
    };
    const int killed = run("killed", false);
    EXPECT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL);
    const int told = run("told", true);
    EXPECT_TRUE(WIFEXITED(told) && WEXITSTATUS(told) == 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!std::filesystem::exists(dir.path() / "killed") && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "killed")) << "the watcher did not act after kill -9";
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the other watcher has ended by now
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "told")) << "the watcher acted though told not to";
}
