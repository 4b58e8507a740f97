// MappedWindow: windows of a file at any offset, and a file that shrinks under its reader reads
// as zeros past its new end (counted) instead of killing the process with SIGBUS.
#include "base/mapped_file.hpp"
#include "base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using base::MappedWindow;
using test_support::TempDir;

std::string pattern(std::size_t size)
{
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) {
        s[i] = static_cast<char>('a' + i % 26);
    }
    return s;
}

base::UniqueFd write_and_open(const std::filesystem::path& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary) << text;
    return base::UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

TEST(MappedWindow, MapsAnyOffsetAndSize)
{
    TempDir dir;
    const std::string text = pattern(5 * 4096 + 123);
    const auto fd = write_and_open(dir / "f", text);
    ASSERT_GE(fd.get(), 0);
    MappedWindow w;
    for (const auto& [offset, size] :
        {std::pair<std::size_t, std::size_t>{0, text.size()}, {1, 10}, {4095, 2}, {4096, 4096}, {8000, 12000}}) {
        ASSERT_TRUE(w.map(fd.get(), offset, size)) << offset;
        EXPECT_EQ(w.bytes(), std::string_view(text).substr(offset, size)) << offset;
    }
    ASSERT_TRUE(w.map(fd.get(), 100, 0));
    EXPECT_TRUE(w.bytes().empty());
    w.unmap();
    EXPECT_TRUE(w.bytes().empty());
}

TEST(MappedWindow, AFileThatCannotBeMappedSaysSo)
{
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const base::UniqueFd read_end(fds[0]);
    const base::UniqueFd write_end(fds[1]);
    MappedWindow w;
    EXPECT_FALSE(w.map(read_end.get(), 0, 100));
    EXPECT_TRUE(w.bytes().empty());
}

TEST(MappedWindow, PagesPastTheEndOfAShrunkenFileReadAsZeros)
{
    TempDir dir;
    const std::string text = pattern(4 * 4096);
    const auto fd = write_and_open(dir / "log", text);
    MappedWindow w;
    ASSERT_TRUE(w.map(fd.get(), 10, text.size() - 10));
    const std::uint64_t lost = MappedWindow::pages_lost();
    // copytruncate: the file is cut to one page while it is mapped.
    ASSERT_EQ(truncate((dir / "log").c_str(), 4096), 0);
    const std::string_view bytes = w.bytes();
    EXPECT_EQ(bytes.substr(0, 100), std::string_view(text).substr(10, 100)) << "the page still in the file";
    EXPECT_EQ(bytes[2 * 4096], '\0');
    EXPECT_EQ(bytes.back(), '\0');
    EXPECT_EQ(bytes.find_first_not_of('\0', 4096 - 10), std::string_view::npos);
    EXPECT_GT(MappedWindow::pages_lost(), lost);
}

// Killed by SIGBUS; under AddressSanitizer, whose handler was there first and is passed the
// signal, its report and exit status 1.
bool died_of_sigbus(int status)
{
#if defined(__SANITIZE_ADDRESS__)
    constexpr bool sanitized = true;
#elif defined(__has_feature)
    constexpr bool sanitized = __has_feature(address_sanitizer);
#else
    constexpr bool sanitized = false;
#endif
    return (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
        (sanitized && WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

TEST(MappedWindowDeathTest, ASigbusNotOfAWindowStillKills)
{
    TempDir dir;
    const auto fd = write_and_open(dir / "f", pattern(100));
    MappedWindow w;
    ASSERT_TRUE(w.map(fd.get(), 0, 100)); // installs the handler
    EXPECT_EXIT(raise(SIGBUS), died_of_sigbus, "");
    // A fault in a mapping of someone else's, past the end of its shrunken file.
    EXPECT_EXIT(
        {
            void* other = mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd.get(), 0);
            if (other != MAP_FAILED && ftruncate(open((dir / "f").c_str(), O_WRONLY), 0) == 0) {
                std::printf("%d", static_cast<volatile const char*>(other)[10]);
            }
            std::exit(0);
        },
        died_of_sigbus, "");
}

} // namespace
