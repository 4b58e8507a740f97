// The line scanner against a plain line-by-line reading: every line holding "NCCL" (and the line
// after one that ends in a record prefix) with its offset and number, at every position relative
// to the 16-byte steps of the vector loop.
#include "base/nccl/line_scan.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace {

using base::nccl::LineRef;
using base::nccl::LineScanner;

std::vector<LineRef> plain_reading(const std::string& text)
{
    std::vector<LineRef> out;
    std::size_t start = 0;
    std::uint64_t number = 0;
    bool next = false;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            end = text.size();
        }
        ++number;
        const std::string line = text.substr(start, end - start);
        if (next || line.find("NCCL") != std::string::npos) {
            out.push_back(LineRef{start, end - start, number});
            const std::string tail = line.substr(line.size() > 16 ? line.size() - 16 : 0);
            next = tail.find("NCCL ") != std::string::npos;
        }
        start = end + 1;
    }
    return out;
}

std::vector<LineRef> scanned(const std::string& text, std::uint64_t* lines = nullptr)
{
    LineScanner scanner;
    std::vector<LineRef> out;
    scanner.scan(text.data(), text.size(), out);
    if (lines != nullptr) {
        *lines = scanner.lines();
    }
    return out;
}

void expect_same(const std::vector<LineRef>& a, const std::vector<LineRef>& b, const std::string& what)
{
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].offset, b[i].offset) << what << " line " << i;
        EXPECT_EQ(a[i].size, b[i].size) << what << " line " << i;
        EXPECT_EQ(a[i].number, b[i].number) << what << " line " << i;
    }
}

} // namespace

TEST(NcclLineScan, FindsNcclAtEveryOffsetAndCountsLines)
{
    for (std::size_t pad = 0; pad < 40; ++pad) {
        for (std::size_t before = 0; before < 4; ++before) {
            std::string text;
            for (std::size_t i = 0; i < before; ++i) {
                text += std::string(pad + i, 'x') + "\n";
            }
            text += std::string(pad, 'y') + "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n";
            text += std::string(pad % 7, 'z') + "\n\nNCC\nCCL\nN\n";
            text += "tail without newline NCCL";
            std::uint64_t lines = 0;
            expect_same(scanned(text, &lines), plain_reading(text),
                "pad " + std::to_string(pad) + " before " + std::to_string(before));
            EXPECT_EQ(lines, before + 7);
        }
    }
}

TEST(NcclLineScan, TakesTheLineAfterARecordPrefix)
{
    const std::string text = "h:1:2 [0] NCCL INFO \nRing 00 : 0 -> 1 via P2P/IPC\nnot this one\n";
    const auto refs = scanned(text);
    ASSERT_EQ(refs.size(), 2U);
    EXPECT_EQ(text.substr(refs[1].offset, refs[1].size), "Ring 00 : 0 -> 1 via P2P/IPC");
    EXPECT_EQ(refs[1].number, 2U);
}

TEST(NcclLineScan, SplitBlocksGiveTheSameLines)
{
    std::string text;
    for (int i = 0; i < 200; ++i) {
        text += i % 3 == 0
            ? "host:10:11 [0] NCCL INFO Channel " + std::to_string(i) + " : 0[0] -> 1[1] via SHM/direct\n"
            : std::string(static_cast<std::size_t>(i % 37), 'a') + "\n";
    }
    const auto whole = scanned(text);
    for (std::size_t cut = text.find('\n', 1); cut != std::string::npos; cut = text.find('\n', cut + 97)) {
        LineScanner scanner;
        std::vector<LineRef> parts;
        scanner.scan(text.data(), cut + 1, parts);
        const std::size_t first = parts.size();
        scanner.scan(text.data() + cut + 1, text.size() - cut - 1, parts);
        for (std::size_t i = first; i < parts.size(); ++i) {
            parts[i].offset += cut + 1;
        }
        expect_same(parts, whole, "cut at " + std::to_string(cut));
        EXPECT_EQ(scanner.lines(), 200U);
    }
}

TEST(NcclLineScan, SkipsTheRestOfACutLine)
{
    LineScanner scanner;
    std::vector<LineRef> out;
    const std::string head = std::string(100, 'q') + "NCCL" + std::string(50, 'q');
    scanner.scan_cut(head.data(), head.size(), out);
    const std::string rest = std::string(30, 'r') + " NCCL more of the same line\nnext NCCL line\n";
    scanner.scan(rest.data(), rest.size(), out);
    ASSERT_EQ(out.size(), 2U);
    EXPECT_EQ(out[0].number, 1U);
    EXPECT_EQ(out[1].number, 2U);
    EXPECT_EQ(rest.substr(out[1].offset, out[1].size), "next NCCL line");
    EXPECT_EQ(scanner.lines(), 2U);
}
