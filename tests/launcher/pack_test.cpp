#include "launcher/pack.hpp"
#include "tests/support/error_of.hpp"

#include <gtest/gtest.h>

using base::launchers::HostSlots;
using launcher::HostCapacity;
using launcher::LeftOutHost;
using test_support::error_of;

TEST(Pack, TakesTheHostsWithTheMostFreeGpusAndKeepsTheirOrder)
{
    auto choice = launcher::pack_hosts({{"n01", 2}, {"n02", 8}, {"n03", 0}, {"n04", 6}, {"n05", 8}}, 12);
    EXPECT_EQ(choice.chosen, (std::vector<HostSlots>{{"n02", 8}, {"n05", 8}}));
    EXPECT_EQ(choice.left_out,
        (std::vector<LeftOutHost>{{"n01", "2 free GPUs; not needed: the job fits on 2 hosts"}, {"n03", "no free GPUs"},
            {"n04", "6 free GPUs; not needed: the job fits on 2 hosts"}}));
}

TEST(Pack, TiesGoToTheHostfileOrder)
{
    auto choice = launcher::pack_hosts({{"a", 4}, {"b", 4}, {"c", 4}}, 5);
    EXPECT_EQ(choice.chosen, (std::vector<HostSlots>{{"a", 4}, {"b", 4}}));
    ASSERT_EQ(choice.left_out.size(), 1U);
    EXPECT_EQ(choice.left_out[0].name, "c");
    auto one = launcher::pack_hosts({{"a", 1}, {"b", 4}, {"c", 4}}, 4);
    EXPECT_EQ(one.chosen, (std::vector<HostSlots>{{"b", 4}}));
}

TEST(Pack, EveryHostNeeded)
{
    auto choice = launcher::pack_hosts({{"a", 3}, {"b", 5}}, 8);
    EXPECT_EQ(choice.chosen, (std::vector<HostSlots>{{"a", 3}, {"b", 5}}));
    EXPECT_TRUE(choice.left_out.empty());
}

TEST(Pack, TooFewFreeGpusIsAnError)
{
    EXPECT_EQ(error_of([] {
        launcher::pack_hosts({{"a", 3}, {"b", 0}}, 4);
    }),
        "--pack: 4 ranks, but the 2 hosts have only 3 free GPUs together; add hosts, free GPUs, or lower -np");
    EXPECT_NE(error_of([] { launcher::pack_hosts({}, 1); }), "");
}

TEST(Pack, FewestHostsIsMinimal)
{
    // Exhaustive check on small cases: no subset smaller than the answer holds the job.
    const std::vector<HostCapacity> hosts{{"a", 3}, {"b", 1}, {"c", 4}, {"d", 2}, {"e", 0}};
    for (unsigned ranks = 1; ranks <= 11; ++ranks) {
        unsigned best = 0;
        for (unsigned mask = 1; mask < (1U << hosts.size()); ++mask) {
            unsigned held = 0;
            unsigned count = 0;
            for (unsigned i = 0; i < hosts.size(); ++i) {
                if ((mask & (1U << i)) != 0) {
                    held += hosts[i].free;
                    ++count;
                }
            }
            if (held >= ranks && (best == 0 || count < best)) {
                best = count;
            }
        }
        EXPECT_EQ(launcher::fewest_hosts(hosts, ranks), best) << ranks << " ranks";
    }
    EXPECT_EQ(launcher::fewest_hosts(hosts, 11), 0U) << "10 free GPUs cannot hold 11 ranks";
}
