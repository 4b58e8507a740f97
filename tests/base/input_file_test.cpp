#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/sysroot.hpp"
#include "tests/support/temp_dir.hpp"

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace {

std::string error_of(const std::string& path, std::size_t limit = base::input_file_limit)
{
    try {
        base::read_input_file(path, "hostfile", limit);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

TEST(InputFile, ReadsAFileWhole)
{
    test_support::TempDir dir;
    std::string text(200000, 'x');
    text += "\nlast line\n";
    std::ofstream(dir / "hosts", std::ios::binary) << text;
    EXPECT_EQ(base::read_input_file((dir / "hosts").string(), "hostfile"), text);
    std::ofstream(dir / "empty");
    EXPECT_EQ(base::read_input_file((dir / "empty").string(), "hostfile"), "");
}

TEST(InputFile, MissingFilesAndDirectoriesAreErrors)
{
    test_support::TempDir dir;
    EXPECT_EQ(error_of((dir / "missing").string()),
        "cannot read hostfile " + (dir / "missing").string() + ": No such file or directory");
    EXPECT_EQ(error_of(dir.path().string()), "hostfile " + dir.path().string() + ": it is a directory; give a file");
}

TEST(InputFile, MoreThanTheLimitIsAnErrorAndEndlessInputEnds)
{
    test_support::TempDir dir;
    std::ofstream(dir / "big", std::ios::binary) << std::string(101, 'x');
    EXPECT_EQ(error_of((dir / "big").string(), 100),
        "hostfile " + (dir / "big").string() +
            ": longer than 100 bytes, more than such a file ever holds; is it the right file?");
    EXPECT_EQ(base::read_input_file((dir / "big").string(), "hostfile", 101).size(), 101U) << "the limit is allowed";
    // A pipe that never ends: the read stops at the limit.
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    std::thread writer([&] {
        sigset_t pipe_signal; // the read end is closed under it: EPIPE, not the signal
        sigemptyset(&pipe_signal);
        sigaddset(&pipe_signal, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
        const std::string chunk(65536, 'x');
        while (write(fds[1], chunk.data(), chunk.size()) > 0) { }
    });
    EXPECT_EQ(error_of("/dev/fd/" + std::to_string(fds[0])),
        "hostfile /dev/fd/" + std::to_string(fds[0]) +
            ": longer than 64 MiB, more than such a file ever holds; is it the right file?");
    close(fds[0]);
    writer.join();
    close(fds[1]);
}

TEST(InputFile, DevicesAndSocketsAreRefused)
{
    // /dev/zero never ends and a disk is no hostfile: refused before reading.
    EXPECT_EQ(error_of("/dev/zero"), "hostfile /dev/zero: it is a device, not a file; give a file");
    EXPECT_EQ(error_of("/dev/null"), "hostfile /dev/null: it is a device, not a file; give a file");
}

TEST(InputFile, AFifoIsReadAsAStream)
{
    // As bash's <(command) gives it.
    test_support::TempDir dir;
    const auto fifo = dir / "fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] {
        std::ofstream out(fifo, std::ios::binary);
        for (int i = 0; i < 1000; ++i) {
            out << "node" << i << " slots=8\n";
        }
    });
    const std::string text = base::read_input_file(fifo.string(), "hostfile");
    writer.join();
    EXPECT_EQ(text.rfind("node0 slots=8\n", 0), 0U);
    EXPECT_EQ(text.size(), 15890U);
}

TEST(InputFile, AFifoWaitsForItsWriterAWhileNotForEver)
{
    test_support::TempDir dir;
    const auto fifo = dir / "fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    // A writer that comes late is waited for.
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::ofstream(fifo, std::ios::binary) << "node0 slots=8\n";
    });
    EXPECT_EQ(base::read_input_file(fifo.string(), "hostfile"), "node0 slots=8\n");
    late.join();
    // None at all: an error after the wait, where opening it blocked for ever.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(error_of(fifo.string()),
        "hostfile " + fifo.string() +
            ": a FIFO that no process wrote to within 10 s; start its writer first, or give a file");
    EXPECT_GE(std::chrono::steady_clock::now() - start, base::fifo_writer_wait);
}

} // namespace

TEST(InputFiles, DirectoriesBecomeTheirFilesInNaturalOrder)
{
    test_support::TempDir dir;
    std::filesystem::create_directories(dir / "logs/sub");
    for (const char* name : {"rank10.sqlite", "rank2.sqlite", "notes.txt", "sub/rank3.sqlite"}) {
        std::ofstream(dir / "logs" / name) << "x";
    }
    const std::string logs = (dir / "logs").string();
    const auto sqlite = [](const std::string& path) { return path.ends_with(".sqlite"); };
    const auto any = [](const std::string&) { return true; };
    std::vector<std::string> skipped;
    EXPECT_EQ(base::input_files({"-", logs, "a.sqlite"}, sqlite, "holds none", &skipped),
        (std::vector<std::string>{"-", logs + "/rank2.sqlite", logs + "/rank10.sqlite", "a.sqlite"}));
    EXPECT_EQ(skipped, std::vector<std::string>{logs + "/notes.txt"}) << "a file named on the line is never skipped";
    EXPECT_EQ(base::input_files({logs}, any, "holds none").size(), 3U) << "every file, no subdirectory";
    std::filesystem::create_directories(dir / "empty");
    try {
        base::input_files({(dir / "empty").string()}, any, "holds no files");
        ADD_FAILURE() << "an empty directory is an error";
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()), (dir / "empty").string() + " holds no files");
    }
    EXPECT_TRUE(base::natural_less("rank2", "rank10"));
    EXPECT_FALSE(base::natural_less("rank10", "rank2"));
    EXPECT_TRUE(base::natural_less("a01", "a2"));
}

// Reads under --sysroot take regular files only, up to a ceiling: a proc/modules linked to
// /dev/zero was read until the collector's deadline (4.2 GB), and a FIFO blocked it.
TEST(Sysroot, ReadsRegularFilesOnlyAndUpToTheCeiling)
{
    test_support::TempDir dir;
    std::filesystem::create_directories(dir / "proc");
    std::filesystem::create_directories(dir / "sys");
    std::ofstream(dir / "proc/cmdline") << "quiet\n";
    std::filesystem::create_symlink("/dev/zero", dir / "proc/modules");
    ASSERT_EQ(mkfifo((dir / "proc/mounts").c_str(), 0600), 0);
    std::ofstream(dir / "sys/big", std::ios::binary) << std::string(base::Sysroot::sysroot_file_limit + 1, 'x');
    const base::Sysroot root(dir.path());
    EXPECT_EQ(root.read("/proc/cmdline"), "quiet\n");
    EXPECT_EQ(root.read("/proc/modules"), std::nullopt);
    EXPECT_EQ(root.read("/proc/mounts"), std::nullopt);
    EXPECT_EQ(root.read("/sys/big"), std::nullopt);
    EXPECT_EQ(root.read("/proc/missing"), std::nullopt);
}
