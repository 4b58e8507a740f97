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

TEST(LineTagger, TagLinesHoldsAnUnfinishedLineUntilItsEndOrAFlush)
{
    LineTagger tagger("[1] ", 16);
    // Python with PYTHONUNBUFFERED=1: print("rank", 1) is four writes.
    EXPECT_EQ(tagger.tag_lines("rank"), "");
    EXPECT_TRUE(tagger.holding());
    EXPECT_EQ(tagger.tag_lines(" "), "");
    EXPECT_EQ(tagger.tag_lines("1"), "");
    EXPECT_EQ(tagger.tag_lines("\nnext"), "[1] rank 1\n");
    EXPECT_EQ(tagger.flush(), "[1] next") << "a progress bar goes out when it has waited";
    EXPECT_FALSE(tagger.holding());
    EXPECT_EQ(tagger.tag_lines(" done\na\nb"), " done\n[1] a\n") << "the rest of a flushed line gets no prefix";
    EXPECT_EQ(tagger.tag_lines(std::string(20, 'x')), "[1] b" + std::string(20, 'x')) << "over the limit: all goes";
    EXPECT_EQ(tagger.tag_lines("\n"), "\n");
    EXPECT_EQ(tagger.flush(), "");
}

TEST(FailureReport, NamesTheRankHowItEndedAndItsLastLines)
{
    const auto exited = launcher::RankFailure::of(1, "n02", 1, 3 << 8, 12.44, {"Traceback", "ValueError: \x1b[31mbad"});
    EXPECT_EQ(exited.exit_status, 3);
    EXPECT_EQ(launcher::failure_report(exited),
        "gpurun: rank 1 (n02, local rank 1) failed: exit status 3 after 12.4 s; last lines of its stderr:\n"
        "  | Traceback\n  | ValueError: \\x1b[31mbad\n");
    const auto crashed = launcher::RankFailure::of(0, "n01", 0, SIGSEGV, 0.31, {});
    EXPECT_EQ(crashed.exit_status, 128 + SIGSEGV);
    EXPECT_EQ(launcher::failure_report(crashed),
        "gpurun: rank 0 (n01, local rank 0) failed: signal 11 (Segmentation fault) after 0.3 s; it wrote nothing "
        "to stderr\n");
    EXPECT_EQ(launcher::failure_report(exited, "failed first", false),
        "gpurun: rank 1 (n02, local rank 1) failed first: exit status 3 after 12.4 s\n");
}

/// Feeds `stream` to a scanner in pieces of `piece` bytes; returns what passed through.
std::string scan(launcher::FailureScanner& scanner, const std::string& stream, std::size_t piece)
{
    std::string out;
    for (std::size_t at = 0; at < stream.size(); at += piece) {
        out += scanner.feed(std::string_view(stream).substr(at, piece));
    }
    return out + scanner.finish();
}

TEST(FailureScanner, TakesTheHelpersReportsOutOfTheStreamInAnyPieces)
{
    const auto first = launcher::RankFailure::of(5, "gpu-node-17.cluster", 1, 3 << 8, 12.44, {"Traceback", "bad \x1b"});
    const auto second = launcher::RankFailure::of(2, "n01", 2, SIGKILL, 13.0, {});
    const std::string stream = "epoch 1 loss 0.3\n" + launcher::failure_report(first) + "step 2\n" +
        "  | not after a report\n" + "progress 10%\rprogress 20%\r" + "gpurun: rank 2 is ready\n" +
        launcher::failure_report(second) + "  | not rank 2's: its report said it wrote nothing\n" + "end";
    for (std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{64}, stream.size()}) {
        launcher::FailureScanner scanner;
        const std::string out = scan(scanner, stream, piece);
        EXPECT_EQ(out,
            "epoch 1 loss 0.3\nstep 2\n  | not after a report\nprogress 10%\rprogress 20%\rgpurun: rank 2 is "
            "ready\n  | not rank 2's: its report said it wrote nothing\nend")
            << piece;
        const auto& found = scanner.failures();
        ASSERT_EQ(found.size(), 2U) << piece;
        EXPECT_EQ(found[0].rank, 5U);
        EXPECT_EQ(found[0].host, "gpu-node-17.cluster");
        EXPECT_EQ(found[0].local_rank, 1U);
        EXPECT_EQ(found[0].ending, "exit status 3");
        EXPECT_EQ(found[0].exit_status, 3);
        EXPECT_DOUBLE_EQ(found[0].seconds, 12.4);
        EXPECT_EQ(found[0].tail, (std::deque<std::string>{"Traceback", "bad \\x1b"}));
        EXPECT_EQ(found[1].ending, "signal 9 (Killed)");
        EXPECT_EQ(found[1].exit_status, 137);
        EXPECT_TRUE(found[1].tail.empty());
    }
}

TEST(FailureScanner, TheHelpersTimeOrdersTheFailures)
{
    // rank 1 raised at :10.2 and its interpreter ended at :10.9; rank 0 saw the closed connection
    // and ended at :10.4, and its report came first.
    EXPECT_DOUBLE_EQ(launcher::failed_at(1000010.2, 1000010.9), 1000010.2);
    EXPECT_DOUBLE_EQ(launcher::failed_at(1000000.0, 1000010.9), 1000010.9) << "a line long before its end";
    EXPECT_DOUBLE_EQ(launcher::failed_at(0, 1000010.9), 1000010.9) << "it wrote nothing";
    auto zero = launcher::RankFailure::of(0, "n01", 0, 1 << 8, 3.0, {"RuntimeError: Connection closed by peer"});
    zero.at = 1000010.4;
    auto one = launcher::RankFailure::of(1, "n01", 1, 1 << 8, 2.8, {"ValueError: bad batch"});
    one.at = 1000010.2;
    const std::string helper = launcher::failure_report(one, "failed", true, true);
    EXPECT_EQ(helper.substr(0, helper.find('\n')),
        "gpurun: rank 1 (n01, local rank 1) failed: exit status 1 after 2.8 s, at 1000010.200; last lines of its "
        "stderr:");
    launcher::FailureScanner scanner;
    EXPECT_EQ(scanner.feed(launcher::failure_report(zero, "failed", true, true) + helper + "end\n"), "end\n");
    ASSERT_EQ(scanner.failures().size(), 2U);
    EXPECT_DOUBLE_EQ(scanner.failures()[1].at, 1000010.2);
    EXPECT_EQ(scanner.failures()[1].tail.back(), "ValueError: bad batch");
    EXPECT_EQ(launcher::first_failure(scanner.failures(), 2), 1U);
    EXPECT_EQ(launcher::first_failure(scanner.failures(), 1), 0U) << "only what has come counts";
    std::vector<launcher::RankFailure> unknown = {zero, one};
    unknown[1].at = 0;
    EXPECT_EQ(launcher::first_failure(unknown, 2), 0U) << "a failure without a time comes after those with one";
    unknown[0].at = 0;
    EXPECT_EQ(launcher::first_failure(unknown, 2), 0U) << "then the order they came in";
}

TEST(FailureScanner, AReportIsWholeWhenItsTailHasEnded)
{
    launcher::FailureScanner scanner;
    // The launcher may bring a report's lines in several reads.
    scanner.feed("gpurun: rank 1 (n02, local rank 1) failed: exit status 3 after 1.0 s; last lines of its stderr:\n");
    EXPECT_EQ(scanner.failures().size(), 1U);
    EXPECT_EQ(scanner.complete(), 0U) << "its tail may still come";
    scanner.feed("  | bad input\n");
    EXPECT_EQ(scanner.complete(), 0U);
    EXPECT_EQ(scanner.feed("step 3\n"), "step 3\n");
    EXPECT_EQ(scanner.complete(), 1U);
    EXPECT_EQ(scanner.failures()[0].tail, (std::deque<std::string>{"bad input"}));
    // A report without lines is whole at once; a tail that stops coming is ended by the caller.
    scanner.feed("gpurun: rank 0 (n01, local rank 0) failed: exit status 1 after 1.0 s; it wrote nothing to stderr\n");
    EXPECT_EQ(scanner.complete(), 2U);
    scanner.feed("gpurun: rank 2 (n01, local rank 2) failed: exit status 1 after 1.0 s; last lines of its stderr:\n");
    EXPECT_EQ(scanner.complete(), 2U);
    scanner.end_report();
    EXPECT_EQ(scanner.complete(), 3U);
    EXPECT_EQ(scanner.feed("  | late\n"), "  | late\n") << "after its end, a tail line is an ordinary line";
}

TEST(FailureScanner, PartialLinesPassAtOnceAndLookalikesStay)
{
    launcher::FailureScanner scanner;
    // A progress bar without a newline is not held back.
    EXPECT_EQ(scanner.feed("loading ["), "loading [");
    EXPECT_EQ(scanner.feed("####"), "####");
    EXPECT_EQ(scanner.feed("]\n"), "]\n");
    // The start of a possible report waits for its line's end; then it passes if it is none.
    EXPECT_EQ(scanner.feed("gpurun: ra"), "");
    EXPECT_EQ(scanner.feed("nk 1 (n01, local rank 0) failed: exit status x after 1.0 s\n"),
        "gpurun: rank 1 (n01, local rank 0) failed: exit status x after 1.0 s\n");
    EXPECT_EQ(scanner.feed("gpurun: note: something\n"), "gpurun: note: something\n");
    const std::string lookalikes[] = {
        "gpurun: rank 1 (n01, local rank 0) failed: exit status 300 after 1.0 s\n",
        "gpurun: rank 1 (n01, local rank 0) failed: signal 0 (x) after 1.0 s\n",
        "gpurun: rank 1 (n01, local rank 0) failed: exit status 1 after -1.0 s\n",
        "gpurun: rank 1 (n01, local rank 0) failed: exit status 1 after 1.0 s; more\n",
        "gpurun: rank 99999999999 (n01, local rank 0) failed: exit status 1 after 1.0 s\n",
        "gpurun: rank 1 (n01 local rank 0) failed: exit status 1 after 1.0 s\n",
    };
    for (const auto& line : lookalikes) {
        EXPECT_EQ(scanner.feed(line), line);
    }
    EXPECT_TRUE(scanner.failures().empty());
    // A line longer than 64 KiB that starts like a report passes through rather than waiting.
    const std::string long_line = "gpurun: rank " + std::string(70000, '7');
    EXPECT_EQ(scanner.feed(long_line), long_line);
    EXPECT_EQ(scanner.feed(" (n01)\n"), " (n01)\n");
    EXPECT_EQ(scanner.feed("gpurun"), "");
    EXPECT_EQ(scanner.finish(), "gpurun") << "what is held comes out at the end";
}

} // namespace
