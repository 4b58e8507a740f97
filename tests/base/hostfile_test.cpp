#include "base/error.hpp"
#include "base/launchers/hostfile.hpp"
#include "tests/support/error_of.hpp"

#include <functional>
#include <gtest/gtest.h>

using base::launchers::HostSlots;

using test_support::error_of;

TEST(HostList, ParsesHostsWithAndWithoutSlots)
{
    auto hosts = base::launchers::parse_host_list("n01:8, n02:8,n03");
    ASSERT_EQ(hosts.size(), 3U);
    EXPECT_EQ(hosts[0], (HostSlots{"n01", 8}));
    EXPECT_EQ(hosts[2], (HostSlots{"n03", std::nullopt}));
    auto v6 = base::launchers::parse_host_list("[fe80::1]:4");
    EXPECT_EQ(v6[0], (HostSlots{"[fe80::1]", 4}));
}

TEST(HostList, RejectsBadEntries)
{
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("n01:x"); }).find("bad slot count 'x'"), std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_host_list("n01:0"); }).find("bad slot count"), std::string::npos);
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("n01,,n02"); }).find("empty host entry"), std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_host_list("a b"); }).find("not a host name"), std::string::npos);
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("$(reboot)"); }).find("not a host name"), std::string::npos);
}

TEST(HostList, BracketsAndColonsOnlyAsAnIpv6Address)
{
    // These reached mpirun as hosts "[", "[]", "a:" and "a:4".
    // An entry is an IPv6 address only when its first brackets hold a ':'; otherwise the brackets
    // are a range, as in Slurm's "[1-3]".
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("["); }),
        "-H '[': host list '[': the '[' in '[' is never closed; end the ranges with ']', as in name[1-4,7]");
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("[]:2"); }).find("empty range in '[]'"), std::string::npos);
    EXPECT_EQ(base::launchers::parse_host_list("[1-2]:3"), (std::vector<HostSlots>{{"1", 3}, {"2", 3}}));
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("a::4"); }),
        "-H 'a::4': 'a:' is not a host name (an IPv6 address goes in brackets: [fe80::1]:4)");
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("a:4:4"); }),
        "-H 'a:4:4': 'a:4' is not a host name (an IPv6 address goes in brackets: [fe80::1]:4)");
    EXPECT_EQ(base::launchers::parse_host_list("[::1],[fe80::1:2]:2,10.0.0.1:8,n-1.example_site.org")[1],
        (HostSlots{"[fe80::1:2]", 2}));
}

TEST(Hostfile, OpenMpiAndHydraFormsCommentsAndBlankLines)
{
    auto hosts =
        base::launchers::parse_hostfile("# cluster\n\nn01 slots=8 max_slots=8\r\nn02:4   # four\n  n03\n", "hf");
    ASSERT_EQ(hosts.size(), 3U);
    EXPECT_EQ(hosts[0], (HostSlots{"n01", 8}));
    EXPECT_EQ(hosts[1], (HostSlots{"n02", 4}));
    EXPECT_EQ(hosts[2], (HostSlots{"n03", std::nullopt}));
}

TEST(Hostfile, ErrorsNameFileAndLine)
{
    EXPECT_EQ(error_of([] { base::launchers::parse_hostfile("n01 slots=8\nn02 cpus=4\n", "hosts.txt"); }),
        "hosts.txt:2: unknown word 'cpus=4'; a hostfile line is 'host slots=N' or 'host:N'");
    EXPECT_NE(error_of([] {
        base::launchers::parse_hostfile("n01 slots=\n", "h");
    }).find("h:1: 'slots=' needs a whole number from 1 to 1000000"),
        std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_hostfile("n01 slots=2 slots=3\n", "h"); }).find("slots given twice"),
        std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_hostfile("# only comments\n", "h"); }).find("no hosts"),
        std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_hostfile(std::string("n01\0x", 5), "h"); }).find("binary"),
        std::string::npos);
    EXPECT_NE(error_of([] {
        base::launchers::read_hostfile("/nonexistent/hosts");
    }).find("cannot read hostfile /nonexistent/hosts"),
        std::string::npos);
}

TEST(HostList, SlurmRangesExpandWithTheSameSlots)
{
    auto hosts = base::launchers::parse_host_list("gpu[01-04]:8,cpu7");
    ASSERT_EQ(hosts.size(), 5U);
    EXPECT_EQ(hosts[0], (HostSlots{"gpu01", 8}));
    EXPECT_EQ(hosts[3], (HostSlots{"gpu04", 8}));
    EXPECT_EQ(hosts[4], (HostSlots{"cpu7", std::nullopt}));
    // Commas inside brackets separate ranges, not entries.
    auto split = base::launchers::parse_host_list("n[1-2,7]:4, r[1-2]n[1-2] ,login:1");
    ASSERT_EQ(split.size(), 8U);
    EXPECT_EQ(split[2], (HostSlots{"n7", 4}));
    EXPECT_EQ(split[3], (HostSlots{"r1n1", std::nullopt}));
    EXPECT_EQ(split[6], (HostSlots{"r2n2", std::nullopt}));
    EXPECT_EQ(split[7], (HostSlots{"login", 1}));
    // An entry starting with '[' is still an IPv6 address, also next to a range.
    auto mixed = base::launchers::parse_host_list("[fe80::1]:4,gpu[1-2]:2,[::1]");
    ASSERT_EQ(mixed.size(), 4U);
    EXPECT_EQ(mixed[0], (HostSlots{"[fe80::1]", 4}));
    EXPECT_EQ(mixed[2], (HostSlots{"gpu2", 2}));
    EXPECT_EQ(mixed[3], (HostSlots{"[::1]", std::nullopt}));
}

TEST(HostList, RangeErrorsNameTheEntryAndTheRange)
{
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("gpu[04-01]:8"); }),
        "-H 'gpu[04-01]:8': host list 'gpu[04-01]': range '04-01' in 'gpu[04-01]' ends below its start; write the "
        "smaller number first, as in [01-04]");
    EXPECT_NE(error_of([] {
        base::launchers::parse_host_list("gpu[1-4:8,cpu7");
    }).find("the '[' in 'gpu[1-4:8,cpu7' is never closed"),
        std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_host_list("gpu1]:8"); }).find("']' without '['"), std::string::npos);
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("gpu[1:2]"); }).find("'1:2' in '[1:2]'"), std::string::npos);
    EXPECT_NE(
        error_of([] { base::launchers::parse_host_list("gpu[1-2]:0"); }).find("bad slot count '0'"), std::string::npos);
    EXPECT_NE(error_of([] { base::launchers::parse_host_list("n[1-600000],m[1-600000]"); }).find("more than"),
        std::string::npos);
}

TEST(HostList, ALimitCountsTheHostsOfTheWholeList)
{
    // An error quotes at most the first 200 bytes of the list and of the entry, control characters escaped.
    const std::string huge = std::string(100000, 'a') + ",,b\x1b";
    const std::string message = error_of([&] { base::launchers::parse_host_list(huge); });
    EXPECT_LT(message.size(), 600U) << message.substr(0, 400);
    EXPECT_NE(message.find("(first 200 of 100004 bytes)"), std::string::npos) << message.substr(0, 400);
    // Ranges and single names both count against the limit (the fuzzer uses a small one).
    EXPECT_EQ(base::launchers::parse_host_list("a[1-3],b", "-H", 1, 4).size(), 4U);
    EXPECT_NE(error_of([] { base::launchers::parse_host_list("a[1-3],b[1-2]", "-H", 1, 4); }).find("more than"),
        std::string::npos);
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("a[1-3],b,c", "-H", 1, 4); }),
        "-H 'a[1-3],b,c': more than 4 hosts");
    EXPECT_EQ(base::launchers::parse_hostfile("a[1-3]\nb\n", "hf", 4).size(), 4U);
    EXPECT_EQ(error_of([] { base::launchers::parse_hostfile("a[1-3]\nb\nc\n", "hf", 4); }), "hf:3: more than 4 hosts");
}

TEST(Hostfile, SlurmRangeInTheHostWord)
{
    auto hosts = base::launchers::parse_hostfile("gpu[01-02] slots=8\ncpu[1-2]:4\nlogin\n", "hf");
    ASSERT_EQ(hosts.size(), 5U);
    EXPECT_EQ(hosts[0], (HostSlots{"gpu01", 8}));
    EXPECT_EQ(hosts[1], (HostSlots{"gpu02", 8}));
    EXPECT_EQ(hosts[2], (HostSlots{"cpu1", 4}));
    EXPECT_EQ(hosts[3], (HostSlots{"cpu2", 4}));
    EXPECT_EQ(hosts[4], (HostSlots{"login", std::nullopt}));
    EXPECT_NE(
        error_of([] { base::launchers::parse_hostfile("n01\ngpu[2-1] slots=8\n", "hf"); }).find("hf:2: host list"),
        std::string::npos);
    EXPECT_EQ(error_of([] { base::launchers::parse_hostfile("gpu[1-2]:4 slots=8\n", "hf"); }),
        "hf:1: slots given twice for gpu[1-2]:4");
}

TEST(HostList, FreeGpuListsTakeZeroAndNameTheirOption)
{
    auto free = base::launchers::parse_host_list("n01:0,n[02-03]:4", "--free-gpus", 0);
    EXPECT_EQ(free, (std::vector<HostSlots>{{"n01", 0}, {"n02", 4}, {"n03", 4}}));
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("n01:x", "--free-gpus", 0); }),
        "--free-gpus 'n01:x': 'n01:x' has a bad count 'x'; write host:N with N a whole number from 0 to 1000000");
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("n01,,n02", "--free-gpus", 0); }),
        "--free-gpus 'n01,,n02': empty host entry (a comma at an end, or two together); write --free-gpus "
        "host1:N,host2:N");
}

TEST(HostList, RepeatedHostsAddTheirSlots)
{
    EXPECT_EQ(base::launchers::parse_host_list("a:2,b:1,a:3"), (std::vector<HostSlots>{{"a", 5}, {"b", 1}}));
    EXPECT_EQ(
        base::launchers::parse_hostfile("a slots=4\nb:2\na:4\n", "hf"), (std::vector<HostSlots>{{"a", 8}, {"b", 2}}));
    EXPECT_EQ(base::launchers::parse_host_list("n0:0,n0:3", "--free-gpus", 0), (std::vector<HostSlots>{{"n0", 3}}));
    EXPECT_EQ(error_of([] { base::launchers::parse_host_list("a,b,a:2"); }),
        "-H 'a,b,a:2': a is listed more than once, and not every time with a count; list it once, or give each entry "
        "its count (host:N)");
    EXPECT_NE(
        error_of([] { base::launchers::parse_hostfile("n1\nn1\n", "hf"); }).find("hf: n1 is listed more than once"),
        std::string::npos);
    // A range that repeats a host is the same host.
    EXPECT_EQ(base::launchers::parse_host_list("n[1-2]:2,n2:2"), (std::vector<HostSlots>{{"n1", 2}, {"n2", 4}}));
}
