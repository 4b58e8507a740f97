#include "launcher/master_address.hpp"

#include <gtest/gtest.h>

using launcher::AddressLookup;
using launcher::choose_master_address;

namespace {

AddressLookup lookup(std::vector<std::string> resolved, std::vector<std::pair<std::string, std::string>> local = {})
{
    return AddressLookup{[resolved](const std::string&) { return resolved; }, [local] { return local; }};
}

} // namespace

TEST(MasterAddress, ThisNodeAloneUsesLoopback)
{
    auto chosen = choose_master_address("node7", true, true, lookup({"10.0.0.7"}));
    EXPECT_EQ(chosen.address, "127.0.0.1");
    EXPECT_EQ(chosen.note, "");
}

TEST(MasterAddress, LiteralsAreUsedAsGiven)
{
    EXPECT_EQ(choose_master_address("10.213.0.1", false, false, lookup({})).address, "10.213.0.1");
    EXPECT_EQ(choose_master_address("[fe80::2]", false, false, lookup({})).address, "fe80::2");
}

TEST(MasterAddress, NamesResolveToTheirFirstNonLoopbackAddress)
{
    auto chosen = choose_master_address("n01", false, false, lookup({"127.0.1.1", "10.0.0.1", "fd00::1"}));
    EXPECT_EQ(chosen.address, "10.0.0.1");
    EXPECT_EQ(chosen.note, "");
}

TEST(MasterAddress, OwnNameOnLoopbackBecomesThisHostsInterfaceAddress)
{
    // Debian's /etc/hosts maps the machine's own name to 127.0.1.1: no other host can reach that.
    auto chosen = choose_master_address("head", true, false, lookup({"127.0.1.1"}, {{"192.168.5.10", "eth0"}}));
    EXPECT_EQ(chosen.address, "192.168.5.10");
    EXPECT_EQ(chosen.note,
        "head resolves to 127.0.1.1 here, which other hosts cannot reach; MASTER_ADDR is this host's 192.168.5.10 "
        "(eth0); pass --master-addr to choose another");
}

TEST(MasterAddress, UnresolvableNamesPassThroughWithANote)
{
    auto chosen = choose_master_address("n01", false, false, lookup({}));
    EXPECT_EQ(chosen.address, "n01");
    EXPECT_NE(chosen.note.find("does not resolve here"), std::string::npos) << chosen.note;
    auto remote_loopback = choose_master_address("n02", false, false, lookup({"127.0.0.5"}));
    EXPECT_EQ(remote_loopback.address, "n02");
    EXPECT_NE(remote_loopback.note.find("other hosts cannot reach"), std::string::npos);
}

TEST(MasterAddress, LiteralAndLoopbackChecks)
{
    EXPECT_TRUE(launcher::is_address_literal("10.1.2.3"));
    EXPECT_TRUE(launcher::is_address_literal("::1"));
    EXPECT_TRUE(launcher::is_address_literal("[::1]"));
    EXPECT_FALSE(launcher::is_address_literal("n01"));
    EXPECT_FALSE(launcher::is_address_literal("10.1.2"));
    EXPECT_TRUE(launcher::is_loopback("127.0.1.1"));
    EXPECT_TRUE(launcher::is_loopback("::1"));
    EXPECT_FALSE(launcher::is_loopback("10.0.0.1"));
    EXPECT_FALSE(launcher::is_loopback("n01"));
}

TEST(MasterAddress, TheSystemLookupResolvesLocalhost)
{
    auto found = launcher::system_address_lookup().resolve("localhost");
    ASSERT_FALSE(found.empty());
    EXPECT_TRUE(launcher::is_loopback(found.front())) << found.front();
    EXPECT_TRUE(launcher::system_address_lookup().resolve("no-such-host.invalid").empty());
}
