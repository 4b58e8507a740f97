#include "probes/command.hpp"

#include <chrono>
#include <gtest/gtest.h>
#include <random>
#include <string>

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
            probes::KeptOutput kept(10, 20);
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
    probes::KeptOutput kept(4, 3);
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
    auto r = probes::run_command(
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

} // namespace
