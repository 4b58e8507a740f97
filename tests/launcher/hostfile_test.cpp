#include "launcher/hostfile.hpp"
#include "probes/error.hpp"
#include "tests/support/error_of.hpp"

#include <functional>
#include <gtest/gtest.h>

using launcher::HostSlots;

using test_support::error_of;

TEST(HostList, ParsesHostsWithAndWithoutSlots)
{
    auto hosts = launcher::parse_host_list("n01:8, n02:8,n03");
    ASSERT_EQ(hosts.size(), 3U);
    EXPECT_EQ(hosts[0], (HostSlots{"n01", 8}));
    EXPECT_EQ(hosts[2], (HostSlots{"n03", std::nullopt}));
    auto v6 = launcher::parse_host_list("[fe80::1]:4");
    EXPECT_EQ(v6[0], (HostSlots{"[fe80::1]", 4}));
}

TEST(HostList, RejectsBadEntries)
{
    EXPECT_NE(error_of([] { launcher::parse_host_list("n01:x"); }).find("bad slot count 'x'"), std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_host_list("n01:0"); }).find("bad slot count"), std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_host_list("n01,,n02"); }).find("empty host entry"), std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_host_list("a b"); }).find("not a host name"), std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_host_list("$(reboot)"); }).find("not a host name"), std::string::npos);
}

TEST(Hostfile, OpenMpiAndHydraFormsCommentsAndBlankLines)
{
    auto hosts = launcher::parse_hostfile("# cluster\n\nn01 slots=8 max_slots=8\r\nn02:4   # four\n  n03\n", "hf");
    ASSERT_EQ(hosts.size(), 3U);
    EXPECT_EQ(hosts[0], (HostSlots{"n01", 8}));
    EXPECT_EQ(hosts[1], (HostSlots{"n02", 4}));
    EXPECT_EQ(hosts[2], (HostSlots{"n03", std::nullopt}));
}

TEST(Hostfile, ErrorsNameFileAndLine)
{
    EXPECT_EQ(error_of([] { launcher::parse_hostfile("n01 slots=8\nn02 cpus=4\n", "hosts.txt"); }),
        "hosts.txt:2: unknown word 'cpus=4'; a hostfile line is 'host slots=N' or 'host:N'");
    EXPECT_NE(
        error_of([] { launcher::parse_hostfile("n01 slots=\n", "h"); }).find("h:1: 'slots=' needs a positive number"),
        std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_hostfile("n01 slots=2 slots=3\n", "h"); }).find("slots given twice"),
        std::string::npos);
    EXPECT_NE(error_of([] { launcher::parse_hostfile("# only comments\n", "h"); }).find("no hosts"), std::string::npos);
    EXPECT_NE(
        error_of([] { launcher::parse_hostfile(std::string("n01\0x", 5), "h"); }).find("binary"), std::string::npos);
    EXPECT_NE(
        error_of([] { launcher::read_hostfile("/nonexistent/hosts"); }).find("cannot read hostfile /nonexistent/hosts"),
        std::string::npos);
}
