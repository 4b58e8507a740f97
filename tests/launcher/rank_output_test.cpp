// What the rank helper makes of a rank's output: tags, the kept tail, the failure report.
#include "launcher/rank_output.hpp"

#include <csignal>
#include <gtest/gtest.h>
#include <sys/wait.h>

namespace {

using launcher::LineTagger;
using launcher::TailLines;

TEST(LineTagger, EveryLineGetsOnePrefixHoweverTheBytesArrive)
{
    LineTagger t("[3] ");
    std::string out = t.tag("a\nb");
    out += t.tag("c\n");
    out += t.tag("\n");
    out += t.tag("");
    out += t.tag("d");
    EXPECT_EQ(out, "[3] a\n[3] bc\n[3] \n[3] d");
    LineTagger whole("[3] ");
    EXPECT_EQ(whole.tag("a\nbc\n\nd"), out) << "the same as in one piece";
}

TEST(LineTagger, BinaryAndLongLinesPassUnchangedButForThePrefix)
{
    LineTagger t("[0] ");
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
        bytes += static_cast<char>(b);
    }
    const std::string out = t.tag(bytes);
    EXPECT_EQ(out.substr(0, 4), "[0] ");
    EXPECT_EQ(out.size(), bytes.size() + 8) << "one prefix at the start, one after the newline byte";
    LineTagger big("[1] ");
    const std::string line(3U << 20, 'x');
    std::string joined;
    for (std::size_t at = 0; at < line.size(); at += 65536) {
        joined += big.tag(std::string_view(line).substr(at, 65536));
    }
    EXPECT_EQ(joined, "[1] " + line) << "a 3 MiB line in 64 KiB pieces has one prefix";
}

TEST(TailLines, KeepsTheLastLinesCutToTheirLength)
{
    TailLines tail(3, 8);
    tail.add("one\ntwo\nthr");
    tail.add("ee\nfour\nfive-and-more-bytes\nsix");
    const auto lines = tail.lines();
    ASSERT_EQ(lines.size(), 3U);
    EXPECT_EQ(lines[0], "four");
    EXPECT_EQ(lines[1], "five-and ...");
    EXPECT_EQ(lines[2], "six") << "the unfinished last line counts";
    TailLines empty;
    EXPECT_TRUE(empty.lines().empty());
}

TEST(FailureReport, NamesTheRankHowItEndedAndItsLastLines)
{
    EXPECT_EQ(launcher::failure_report(1, "n02", 1, 3 << 8, 12.44, {"Traceback", "ValueError: \x1b[31mbad"}),
        "gpurun: rank 1 (n02, local rank 1) failed: exit status 3 after 12.4 s; last lines of its stderr:\n"
        "  | Traceback\n  | ValueError: \\x1b[31mbad\n");
    EXPECT_EQ(launcher::failure_report(0, "n01", 0, SIGSEGV, 0.31, {}),
        "gpurun: rank 0 (n01, local rank 0) failed: signal 11 (Segmentation fault) after 0.3 s; it wrote nothing "
        "to stderr\n");
}

} // namespace
