#include "base/byte_size.hpp"

#include "base/error.hpp"

#include <gtest/gtest.h>

using base::format_bytes;
using base::parse_byte_size;

TEST(ByteSize, ParsesDecimalAndBinaryUnits)
{
    EXPECT_EQ(parse_byte_size("16GiB", "--gpu-mem"), 17179869184u); // 16 * 2^30
    EXPECT_EQ(parse_byte_size("80GB", "--gpu-mem"), 80000000000u);
    EXPECT_EQ(parse_byte_size("40000MiB", "--gpu-mem"), 41943040000u); // 40000 * 2^20
    EXPECT_EQ(parse_byte_size("512", "--gpu-mem"), 512u);
    EXPECT_EQ(parse_byte_size("512B", "--gpu-mem"), 512u);
    EXPECT_EQ(parse_byte_size("2KB", "--gpu-mem"), 2000u);
    EXPECT_EQ(parse_byte_size("2KiB", "--gpu-mem"), 2048u);
    EXPECT_EQ(parse_byte_size("3MB", "--gpu-mem"), 3000000u);
    EXPECT_EQ(parse_byte_size("1TB", "--gpu-mem"), 1000000000000u);
    EXPECT_EQ(parse_byte_size("1TiB", "--gpu-mem"), 1099511627776u);
}

TEST(ByteSize, BareLettersAreBinaryAndCaseDoesNotMatter)
{
    EXPECT_EQ(parse_byte_size("16G", "x"), 17179869184u);
    EXPECT_EQ(parse_byte_size("16g", "x"), 17179869184u);
    EXPECT_EQ(parse_byte_size("16gib", "x"), 17179869184u);
    EXPECT_EQ(parse_byte_size("16GIB", "x"), 17179869184u);
    EXPECT_EQ(parse_byte_size("1k", "x"), 1024u);
    EXPECT_EQ(parse_byte_size("1M", "x"), 1048576u);
    EXPECT_EQ(parse_byte_size("1T", "x"), 1099511627776u);
}

TEST(ByteSize, FractionsAndSpaces)
{
    EXPECT_EQ(parse_byte_size("1.5GiB", "x"), 1610612736u); // 1.5 * 2^30
    EXPECT_EQ(parse_byte_size("1.5 TiB", "x"), 1649267441664u); // 1.5 * 2^40
    EXPECT_EQ(parse_byte_size(" 0.5GiB ", "x"), 536870912u);
    EXPECT_EQ(parse_byte_size("0.1KB", "x"), 100u);
    EXPECT_EQ(parse_byte_size(".5KiB", "x"), 512u);
    EXPECT_EQ(parse_byte_size("2.KiB", "x"), 2048u);
    // A fraction of a byte is rounded down: 1.9 B is 1 B.
    EXPECT_EQ(parse_byte_size("1.9", "x"), 1u);
}

TEST(ByteSize, LimitIsTwoToTheSixty)
{
    EXPECT_EQ(parse_byte_size("1152921504606846976", "x"), std::uint64_t{1} << 60);
    EXPECT_EQ(parse_byte_size("1048576TiB", "x"), std::uint64_t{1} << 60); // 2^20 * 2^40
    EXPECT_THROW(parse_byte_size("1152921504606846977", "x"), base::Error);
    EXPECT_THROW(parse_byte_size("1048577TiB", "x"), base::Error);
    EXPECT_THROW(parse_byte_size("99999999999999999999999999", "x"), base::Error);
}

TEST(ByteSize, RejectsWhatIsNotASize)
{
    for (const char* bad : {"", "GiB", "-1GiB", "+1GiB", "1e9", "16 GiBs", "16XB", "0", "0GiB", "0.0001B", "1..5G",
             "16 G B", "abc", "nan", "inf"}) {
        EXPECT_THROW(parse_byte_size(bad, "--gpu-mem"), base::Error) << bad;
    }
}

TEST(ByteSize, ErrorNamesTheValueAndTheFix)
{
    try {
        parse_byte_size("16XB", "--gpu-mem");
        FAIL() << "no error";
    } catch (const base::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("--gpu-mem 16XB: unknown unit 'XB'"), std::string::npos) << message;
        EXPECT_NE(message.find("such as 16GiB, 80GB or 40000MiB"), std::string::npos) << message;
    }
    try {
        parse_byte_size("0", "--gpu-mem");
        FAIL() << "no error";
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("--gpu-mem 0: zero bytes"), std::string::npos) << e.what();
    }
}

TEST(ByteSize, FormatsWithBinaryUnits)
{
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(900), "900 B");
    EXPECT_EQ(format_bytes(1023), "1023 B");
    EXPECT_EQ(format_bytes(1024), "1 KiB");
    EXPECT_EQ(format_bytes(1536), "1.50 KiB");
    EXPECT_EQ(format_bytes(536870912), "512 MiB");
    EXPECT_EQ(format_bytes(17179869184u), "16 GiB");
    // 15.77 GiB: a V100-16GB as NVML reports it, 16160 MiB.
    EXPECT_EQ(format_bytes(16160ull << 20), "15.78 GiB");
    EXPECT_EQ(format_bytes(1610612736u), "1.50 GiB");
    EXPECT_EQ(format_bytes(std::uint64_t{1} << 40), "1 TiB");
    EXPECT_EQ(format_bytes(std::uint64_t{1} << 60), "1048576 TiB"); // the largest unit it can read back
    // Just under 1 GiB rounds up to the next unit rather than printing "1024.00 MiB".
    EXPECT_EQ(format_bytes((std::uint64_t{1} << 30) - 1), "1.00 GiB");
}

TEST(ByteSize, FormatAndParseAgree)
{
    for (std::uint64_t bytes :
        {std::uint64_t{512}, std::uint64_t{1} << 20, std::uint64_t{24} << 30, std::uint64_t{1} << 60}) {
        EXPECT_EQ(parse_byte_size(format_bytes(bytes), "x"), bytes);
    }
}
