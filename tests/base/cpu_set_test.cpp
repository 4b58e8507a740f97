#include "base/cpu_set.hpp"
#include "base/error.hpp"

#include <gtest/gtest.h>

using base::CpuSet;

TEST(CpuSet, ParsesLinuxCpulists)
{
    EXPECT_EQ(CpuSet::parse("0-3,8,10-11\n"), (CpuSet{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ(CpuSet::parse("5"), (CpuSet{5}));
    EXPECT_TRUE(CpuSet::parse("").empty());
    EXPECT_TRUE(CpuSet::parse("\n").empty());
}

TEST(CpuSet, FormatsRangesLikeTheKernel)
{
    EXPECT_EQ(CpuSet::parse("48-63,176-191").to_list(), "48-63,176-191");
    EXPECT_EQ((CpuSet{3, 1, 2, 7}).to_list(), "1-3,7");
    EXPECT_EQ(CpuSet().to_list(), "");
}

TEST(CpuSet, RejectsGarbageWithTheTextInTheMessage)
{
    for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "1 2", "99999999999", "0-4000000000"}) {
        try {
            CpuSet::parse(bad);
            ADD_FAILURE() << "accepted " << bad;
        } catch (const base::Error& e) {
            EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        }
    }
}

TEST(CpuSet, SetOperations)
{
    CpuSet a{0, 1, 2, 3};
    CpuSet b{2, 3, 4};
    EXPECT_EQ(a.intersect(b), (CpuSet{2, 3}));
    EXPECT_EQ(a.unite(b), (CpuSet{0, 1, 2, 3, 4}));
    EXPECT_EQ(a.minus(b), (CpuSet{0, 1}));
    EXPECT_TRUE(a.intersects(b));
    EXPECT_FALSE(a.intersects(CpuSet{9}));
    EXPECT_TRUE(a.includes(CpuSet{1, 2}));
    EXPECT_FALSE(a.includes(b));
}
