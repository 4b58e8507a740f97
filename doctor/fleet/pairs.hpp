#pragma once

// gpudoctor fleet, the search for a slow link between nodes: the nodes are paired and every pair
// measures its all-reduce bus bandwidth at once; each node of a slow pair is then measured again
// beside a node known to be good, which tells a bad node (slow beside anyone) from a bad link
// (both of its ends fast beside others). Pure: a round's measurement comes from the caller.

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace doctor::fleet {

using NodePair = std::pair<std::size_t, std::size_t>;

/// One round: the pairs measured at once, and each pair's bus bandwidth (GB/s; below 0: it failed).
struct PairRound {
    std::vector<NodePair> pairs;
    std::vector<double> gbps;
};

struct PairSearch {
    std::vector<PairRound> rounds;
    double threshold_gbps = 0; ///< the first round's upper quartile × the fraction: below it a pair is slow
    std::vector<std::size_t> bad_nodes; ///< slow beside a good node, in order
    std::vector<NodePair> bad_links; ///< a slow pair whose two nodes are each fast beside a good node
    /// Nodes of slow pairs not yet told apart when the rounds ran out (too few good nodes to pair
    /// them with), or every node when no pair was fast (nothing to compare against).
    std::vector<std::size_t> unresolved;
};

/// Measures the pairs of one round at once; returns one bus bandwidth per pair, in their order.
using MeasurePairs = std::function<std::vector<double>(const std::vector<NodePair>& pairs)>;

/// The rounds for `nodes` nodes: first (0,1), (2,3), ... (an odd last node waits for the next
/// round); then every node of a slow pair, and an odd one, beside a distinct node of a fast
/// pair, as many as there are good nodes per round, until each is told apart or `max_rounds`
/// (at least 2; 0: ceil(log2(nodes)) + 1) have run. A pair is slow below the first round's
/// upper quartile × `fraction` (up to three quarters of the pairs may be slow; a median would
/// call the healthy ones slow once half are not); a failed measurement is slow.
PairSearch search_pairs(std::size_t nodes, double fraction, const MeasurePairs& measure, std::size_t max_rounds = 0);

} // namespace doctor::fleet
