// The search for a slow node or link among the nodes of a job, against simulated bus bandwidth:
// a pair is as fast as its slower node, times the factor of the link between them.
#include "doctor/fleet/pairs.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <vector>

using doctor::fleet::NodePair;
using doctor::fleet::search_pairs;

namespace {

/// A fleet whose pairs' all-reduce is min(node, node) × link; every node 180 GB/s unless set.
struct Fabric {
    explicit Fabric(std::size_t n) : nodes(n) { }
    std::size_t nodes = 0;
    std::map<std::size_t, double> node_gbps;
    std::map<NodePair, double> link_factor;
    std::size_t measured = 0; ///< pairs measured in all

    double node(std::size_t n) const { return node_gbps.count(n) != 0 ? node_gbps.at(n) : 180.0; }
    double pair(std::size_t a, std::size_t b) const
    {
        const NodePair key{std::min(a, b), std::max(a, b)};
        return std::min(node(a), node(b)) * (link_factor.count(key) != 0 ? link_factor.at(key) : 1.0);
    }
    doctor::fleet::MeasurePairs measure()
    {
        return [this](const std::vector<NodePair>& pairs) {
            std::vector<double> out;
            std::vector<bool> busy(nodes, false);
            for (const auto& [a, b] : pairs) {
                EXPECT_FALSE(busy[a] || busy[b]) << "a node in two pairs of one round";
                busy[a] = busy[b] = true;
                EXPECT_NE(a, b);
                out.push_back(pair(a, b));
                ++measured;
            }
            return out;
        };
    }
};

std::size_t log2_rounds(std::size_t n)
{
    return static_cast<std::size_t>(std::ceil(std::log2(static_cast<double>(n)))) + 1;
}

} // namespace

TEST(FleetPairs, AHealthyFleetTakesOneRound)
{
    Fabric f(16);
    const auto s = search_pairs(16, 0.6, f.measure());
    EXPECT_EQ(s.rounds.size(), 1U);
    EXPECT_EQ(s.rounds[0].pairs.size(), 8U);
    EXPECT_TRUE(s.bad_nodes.empty());
    EXPECT_TRUE(s.bad_links.empty());
    EXPECT_TRUE(s.unresolved.empty());
    EXPECT_DOUBLE_EQ(s.threshold_gbps, 180 * 0.6);
}

TEST(FleetPairs, OneBadNodeIsSlowBesideAGoodOneItsPartnerIsNot)
{
    Fabric f(16);
    f.node_gbps[5] = 40; // a NIC at a quarter of its rate
    const auto s = search_pairs(16, 0.6, f.measure());
    EXPECT_EQ(s.bad_nodes, (std::vector<std::size_t>{5}));
    EXPECT_TRUE(s.bad_links.empty()) << "node 4 is fine beside another node";
    EXPECT_TRUE(s.unresolved.empty());
    EXPECT_EQ(s.rounds.size(), 2U);
    EXPECT_LE(s.rounds.size(), log2_rounds(16));
    EXPECT_EQ(s.rounds[1].pairs.size(), 2U) << "only the slow pair's two nodes are measured again";
}

TEST(FleetPairs, OneBadLinkIsASlowPairOfTwoGoodNodes)
{
    Fabric f(8);
    f.link_factor[{2, 3}] = 0.3; // a bad cable or switch port between them
    const auto s = search_pairs(8, 0.6, f.measure());
    EXPECT_TRUE(s.bad_nodes.empty());
    EXPECT_EQ(s.bad_links, (std::vector<NodePair>{{2, 3}}));
    EXPECT_TRUE(s.unresolved.empty());
}

TEST(FleetPairs, TwoBadNodesInOnePairOrInTwo)
{
    {
        Fabric f(16);
        f.node_gbps[6] = 50;
        f.node_gbps[7] = 60; // the same first pair
        const auto s = search_pairs(16, 0.6, f.measure());
        EXPECT_EQ(s.bad_nodes, (std::vector<std::size_t>{6, 7}));
        EXPECT_TRUE(s.bad_links.empty());
    }
    {
        Fabric f(16);
        f.node_gbps[1] = 50;
        f.node_gbps[14] = 20;
        const auto s = search_pairs(16, 0.6, f.measure());
        EXPECT_EQ(s.bad_nodes, (std::vector<std::size_t>{1, 14}));
        EXPECT_TRUE(s.bad_links.empty());
        EXPECT_EQ(s.rounds.size(), 2U) << "four suspects, twelve good nodes: one more round";
    }
}

TEST(FleetPairs, TheOddNodeIsMeasuredBesideAGoodOne)
{
    Fabric f(7);
    f.node_gbps[6] = 30;
    const auto s = search_pairs(7, 0.6, f.measure());
    EXPECT_EQ(s.rounds[0].pairs, (std::vector<NodePair>{{0, 1}, {2, 3}, {4, 5}}));
    EXPECT_EQ(s.bad_nodes, (std::vector<std::size_t>{6}));
    Fabric healthy(7);
    EXPECT_TRUE(search_pairs(7, 0.6, healthy.measure()).bad_nodes.empty());
}

TEST(FleetPairs, ManySuspectsAndFewGoodNodesTakeMoreRoundsWithinTheLimit)
{
    // Four slow links among six pairs: eight suspects, four good nodes. The second round measures
    // four suspects; each one cleared is a partner in the third, which measures the rest.
    Fabric f(12);
    for (std::size_t a : {0, 2, 4, 6}) {
        f.link_factor[{a, a + 1}] = 0.2;
    }
    const auto s = search_pairs(12, 0.6, f.measure());
    EXPECT_TRUE(s.bad_nodes.empty());
    EXPECT_EQ(s.bad_links, (std::vector<NodePair>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_TRUE(s.unresolved.empty());
    ASSERT_EQ(s.rounds.size(), 3U);
    EXPECT_EQ(s.rounds[1].pairs, (std::vector<NodePair>{{0, 8}, {1, 9}, {2, 10}, {3, 11}}));
    EXPECT_EQ(s.rounds[2].pairs.size(), 4U);
    EXPECT_LE(s.rounds.size(), log2_rounds(12));
    // With two rounds only, the four not measured again are not told apart, and no link is
    // blamed on a node measured once.
    Fabric g(12);
    g.link_factor = f.link_factor;
    const auto cut = search_pairs(12, 0.6, g.measure(), 2);
    EXPECT_EQ(cut.unresolved, (std::vector<std::size_t>{4, 5, 6, 7}));
    EXPECT_EQ(cut.bad_links, (std::vector<NodePair>{{0, 1}, {2, 3}}));
}

TEST(FleetPairs, TwoNodesOrNoFastPairCannotBeToldApart)
{
    Fabric two(2);
    two.node_gbps[1] = 20;
    const auto s = search_pairs(2, 0.6, two.measure());
    // One pair is its own median: it is not slow against itself.
    EXPECT_TRUE(s.bad_nodes.empty());
    Fabric all(4);
    for (std::size_t n = 0; n < 4; ++n) {
        all.node_gbps[n] = 0; // every measurement failed
    }
    const auto none = search_pairs(4, 0.6, all.measure());
    EXPECT_EQ(none.unresolved, (std::vector<std::size_t>{0, 1, 2, 3}));
    EXPECT_TRUE(none.bad_nodes.empty());
    EXPECT_EQ(none.rounds.size(), 1U);
}

TEST(FleetPairs, AFailedMeasurementIsSlowAndTheRoundsStopAtTheLimit)
{
    Fabric f(8);
    f.node_gbps[3] = 10;
    std::size_t calls = 0;
    auto measure = [&](const std::vector<NodePair>& pairs) {
        ++calls;
        std::vector<double> out = f.measure()(pairs);
        if (calls == 1) {
            out.pop_back(); // the last pair of the first round gave no answer
        }
        return out;
    };
    const auto s = search_pairs(8, 0.6, measure, 2);
    EXPECT_EQ(s.rounds[0].gbps.back(), -1);
    EXPECT_EQ(s.bad_nodes, (std::vector<std::size_t>{3}));
    EXPECT_EQ(s.bad_links, (std::vector<NodePair>{{6, 7}})) << "both fine beside others: their pair failed";
    EXPECT_EQ(s.rounds.size(), 2U);
}
