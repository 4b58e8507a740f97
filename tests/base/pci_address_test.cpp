#include "base/pci_address.hpp"

#include <gtest/gtest.h>

using base::PciAddress;

TEST(PciAddress, OneParserForNvmlCudaAndSysfsSpellings)
{
    auto nvml = PciAddress::parse("00000000:1B:00.0");
    auto cuda = PciAddress::parse("0000:1B:00.0");
    auto sysfs = PciAddress::parse("0000:1b:00.0\n");
    auto short_form = PciAddress::parse("1b:00.0");
    ASSERT_TRUE(nvml && cuda && sysfs && short_form);
    EXPECT_EQ(*nvml, *cuda);
    EXPECT_EQ(*cuda, *sysfs);
    EXPECT_EQ(*sysfs, *short_form);
    EXPECT_EQ(nvml->to_string(), "0000:1b:00.0");
}

TEST(PciAddress, KeepsNonZeroDomains)
{
    auto lassen = PciAddress::parse("0035:03:00.0");
    ASSERT_TRUE(lassen);
    EXPECT_EQ(lassen->domain, 0x35U);
    EXPECT_EQ(lassen->to_string(), "0035:03:00.0");
    auto wide = PciAddress::parse("10000:01:00.1");
    ASSERT_TRUE(wide);
    EXPECT_EQ(wide->to_string(), "10000:01:00.1");
}

TEST(PciAddress, OrdersByDomainBusDeviceFunction)
{
    EXPECT_LT(*PciAddress::parse("0000:07:00.0"), *PciAddress::parse("0000:0f:00.0"));
    EXPECT_LT(*PciAddress::parse("0000:ff:00.0"), *PciAddress::parse("0001:00:00.0"));
}

TEST(PciAddress, RejectsWhatIsNotAnAddress)
{
    for (const char* bad :
        {"", "GPU-1234", "0000:1b:00", "0000:1g:00.0", "0000:1b:20.0", "0000:1b:00.8", ":1b:00.0", "0000:100:00.0"}) {
        EXPECT_FALSE(PciAddress::parse(bad)) << bad;
    }
}
