#include "base/error.hpp"
#include "base/launchers/node_list.hpp"
#include "tests/support/error_of.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

using base::launchers::compress_count_list;
using base::launchers::expand_count_list;
using base::launchers::expand_node_list;
using test_support::error_of;

using Names = std::vector<std::string>;
using Counts = std::vector<unsigned>;

namespace {

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

} // namespace

TEST(NodeList, PlainNamesInOrderWithDuplicates)
{
    EXPECT_EQ(expand_node_list("cpu7"), (Names{"cpu7"}));
    EXPECT_EQ(expand_node_list("b,a,b"), (Names{"b", "a", "b"}));
    EXPECT_EQ(expand_node_list("node-1.rack_2.example"), (Names{"node-1.rack_2.example"}));
}

TEST(NodeList, RangesAndSingleNumbersInBrackets)
{
    EXPECT_EQ(
        expand_node_list("gpu[001-004,010],cpu7"), (Names{"gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "cpu7"}));
    EXPECT_EQ(expand_node_list("n[3]"), (Names{"n3"}));
    EXPECT_EQ(expand_node_list("n[5-5]"), (Names{"n5"}));
    EXPECT_EQ(expand_node_list("[1-2]x"), (Names{"1x", "2x"}));
    EXPECT_EQ(expand_node_list("n[3,1]"), (Names{"n3", "n1"}));
}

TEST(NodeList, PaddingComesFromTheLowerBound)
{
    EXPECT_EQ(expand_node_list("n[08-10]"), (Names{"n08", "n09", "n10"}));
    EXPECT_EQ(expand_node_list("n[8-10]"), (Names{"n8", "n9", "n10"}));
    const auto unpadded = expand_node_list("n[1-10]");
    ASSERT_EQ(unpadded.size(), 10U);
    EXPECT_EQ(unpadded.front(), "n1");
    EXPECT_EQ(unpadded[8], "n9");
    EXPECT_EQ(unpadded.back(), "n10");
    const auto padded = expand_node_list("n[001-100]");
    ASSERT_EQ(padded.size(), 100U);
    EXPECT_EQ(padded.front(), "n001");
    EXPECT_EQ(padded[98], "n099");
    EXPECT_EQ(padded.back(), "n100");
    EXPECT_EQ(expand_node_list("n[0-1]"), (Names{"n0", "n1"}));
    EXPECT_EQ(expand_node_list("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
}

TEST(NodeList, SeveralGroupsMultiplyLastFastest)
{
    EXPECT_EQ(expand_node_list("r[1-2]n[1-2]"), (Names{"r1n1", "r1n2", "r2n1", "r2n2"}));
    EXPECT_EQ(
        expand_node_list("r[1-2]n[01,03]-ib,login"), (Names{"r1n01-ib", "r1n03-ib", "r2n01-ib", "r2n03-ib", "login"}));
}

TEST(NodeList, BracketErrorsQuoteTheName)
{
    EXPECT_EQ(error_of([] { expand_node_list("gpu[1-4,cpu7"); }),
        "host list 'gpu[1-4,cpu7': the '[' in 'gpu[1-4,cpu7' is never closed; end the ranges with ']', as in "
        "name[1-4,7]");
    EXPECT_TRUE(contains(
        error_of([] { expand_node_list("a,n[1[2]]"); }), "'[' inside brackets in 'n[1[2]]'; brackets do not nest"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n1],b"); }), "']' without '[' in 'n1]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[]"); }), "empty range in '[]' of 'n[]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1,,2]"); }), "empty range in '[1,,2]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1,]"); }), "empty range in '[1,]'"));
}

TEST(NodeList, RangeErrorsSayWhatToWrite)
{
    EXPECT_EQ(error_of([] { expand_node_list("n[10-08]"); }),
        "host list 'n[10-08]': range '10-08' in 'n[10-08]' ends below its start; write the smaller number first, "
        "as in [08-10]");
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[a-3]"); }),
        "'a-3' in '[a-3]' of 'n[a-3]' is not a number or a range; write digits as in [1-4,7]"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1-]"); }), "'1-' in '[1-]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[-1]"); }), "'-1' in '[-1]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1-2-3]"); }), "'1-2-3' in '[1-2-3]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[ 1]"); }), "' 1' in '[ 1]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1-99999999999999999999999]"); }),
        "'99999999999999999999999' in 'n[1-99999999999999999999999]' is too large a number"));
}

TEST(NodeList, EmptyNamesAreErrors)
{
    const std::string why = "empty name (a comma at an end, or two together); separate names with one comma, as in a,b";
    EXPECT_EQ(error_of([] { expand_node_list("a,,b"); }), "host list 'a,,b': " + why);
    EXPECT_EQ(error_of([] { expand_node_list(",a"); }), "host list ',a': " + why);
    EXPECT_EQ(error_of([] { expand_node_list("a,"); }), "host list 'a,': " + why);
    EXPECT_EQ(error_of([] { expand_node_list(""); }), "host list is empty; write names such as gpu[01-04],cpu7");
}

TEST(NodeList, HostNameCharacters)
{
    EXPECT_EQ(error_of([] { expand_node_list("a b"); }),
        "host list 'a b': ' ' in 'a b' cannot be in a host name; host names have letters, digits, '-', '.' and '_', "
        "with ranges in brackets as in gpu[01-04]");
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n:1"); }), "':' in 'n:1' cannot be in a host name"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("$(x)"); }), "'$' in '$(x)' cannot be in a host name"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list(std::string("n\x01", 2)); }), "'\\x01' in"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("ok,-n[1-2]"); }),
        "host name '-n[1-2]' starts with '-'; a host name starts with a letter or digit"));
    EXPECT_EQ(expand_node_list("n-[1-2]"), (Names{"n-1", "n-2"}));
    EXPECT_TRUE(contains(
        error_of([] { expand_node_list(std::string(250, 'a') + "[1-1000]"); }), "names longer than 253 characters"));
    EXPECT_EQ(expand_node_list(std::string(250, 'a') + "[1-999]").back(), std::string(250, 'a') + "999");
    EXPECT_TRUE(contains(
        error_of([] { expand_node_list("n[" + std::string(300, '0') + "1]"); }), "names longer than 253 characters"));
}

TEST(NodeList, TooManyNamesFailBeforeAnyIsBuilt)
{
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[0-4294967295]"); }),
        "host list 'n[0-4294967295]': more than 1000000 names; check the ranges in 'n[0-4294967295]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("a[1-100000]b[1-100000]"); }), "more than 1000000 names"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[0-18446744073709551615]"); }), "more than 1000000 names"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1-600000],m[1-600000]"); }),
        "more than 1000000 names; check the ranges in 'm[1-600000]'"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("n[1-3,5-6]", 4); }), "more than 4 names"));
    EXPECT_TRUE(contains(error_of([] { expand_node_list("a,b,c", 2); }), "more than 2 names; check the ranges in 'c'"));
    EXPECT_EQ(expand_node_list("n[1-4]", 4).size(), 4U);
    EXPECT_EQ(expand_node_list("n[1-1000]m[1-1000]").size(), base::launchers::node_list_limit);
}

TEST(NodeList, LongListsTakeLinearTime)
{
    // 300,000 names in a 600 KB list: copying the list once per name would not finish.
    std::string list;
    for (int i = 0; i < 300000; ++i) {
        list += i == 0 ? "a" : ",a";
    }
    const auto names = expand_node_list(list);
    ASSERT_EQ(names.size(), 300000U);
    EXPECT_EQ(names.back(), "a");
}

TEST(CountList, ExpandsRepeats)
{
    EXPECT_EQ(expand_count_list("2(x3),1"), (Counts{2, 2, 2, 1}));
    EXPECT_EQ(expand_count_list("4"), (Counts{4}));
    EXPECT_EQ(expand_count_list("1,2(x1),0"), (Counts{1, 2, 0}));
    EXPECT_EQ(expand_count_list("4294967295(x2)"), (Counts{4294967295U, 4294967295U}));
}

TEST(CountList, ErrorsNameTheEntry)
{
    const std::string how = "write N, or N(xM) for N repeated M times, as in 2(x3),1";
    EXPECT_EQ(error_of([] { expand_count_list("2(x3,1"); }), "count list '2(x3,1': '2(x3' is not a count; " + how);
    EXPECT_TRUE(contains(error_of([] { expand_count_list("2x3"); }), "'2x3' is not a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("(x3)"); }), "'(x3)' is not a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("2(x)"); }), "'2(x)' is not a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("2(3)"); }), "'2(3)' is not a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("-1"); }), "'-1' is not a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("2(x3)x"); }), "'2(x3)x' is not a count"));
    EXPECT_EQ(error_of([] { expand_count_list("2(x0)"); }),
        "count list '2(x0)': '2(x0)' repeats a count 0 times; write a repeat of 1 or more, or leave it out");
    EXPECT_TRUE(contains(error_of([] { expand_count_list("1,,2"); }), "empty entry"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("1,"); }), "empty entry"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list(""); }), "count list is empty"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("4294967296"); }), "'4294967296' is too large a count"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("99999999999999999999999"); }), "too large a count"));
}

TEST(CountList, TooManyCountsFailBeforeAnyIsBuilt)
{
    EXPECT_EQ(error_of([] { expand_count_list("1(x4294967296)"); }),
        "count list '1(x4294967296)': more than 1000000 counts; check the repeat in '1(x4294967296)'");
    EXPECT_TRUE(contains(error_of([] { expand_count_list("1(x99999999999999999999999)"); }), "more than 1000000"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("1(x600000),2(x600000)"); }), "'2(x600000)'"));
    EXPECT_TRUE(contains(error_of([] { expand_count_list("1(x2),3", 2); }), "more than 2 counts"));
    EXPECT_EQ(expand_count_list("1(x1000000)").size(), base::launchers::node_list_limit);
}

TEST(CountList, CompressIsTheInverse)
{
    EXPECT_EQ(compress_count_list({2, 2, 2, 1}), "2(x3),1");
    EXPECT_EQ(compress_count_list({}), "");
    EXPECT_EQ(compress_count_list({5}), "5");
    EXPECT_EQ(compress_count_list({1, 2, 2, 1, 1}), "1,2(x2),1(x2)");
    for (const char* text : {"2(x3),1", "4", "1,2(x2),1(x2)", "0(x7)", "8,4(x2),8(x3)"}) {
        EXPECT_EQ(compress_count_list(expand_count_list(text)), text);
    }
    // Uncompressed or split runs come back in Slurm's form and expand to the same counts.
    for (const char* text : {"2,2,2,1", "3(x1)", "1(x2),1(x3)"}) {
        const auto counts = expand_count_list(text);
        EXPECT_EQ(expand_count_list(compress_count_list(counts)), counts) << text;
    }
    EXPECT_EQ(compress_count_list(expand_count_list("1(x2),1(x3)")), "1(x5)");
}
