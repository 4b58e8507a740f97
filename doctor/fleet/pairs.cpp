#include "doctor/fleet/pairs.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace doctor::fleet {

namespace {

/// The upper quartile (linear between neighbours): a healthy pair's bandwidth while up to three
/// quarters of the pairs are slow, and not pulled up by one pair faster than the rest.
double upper_quartile(std::vector<double> values)
{
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const double at = 0.75 * static_cast<double>(values.size() - 1);
    const auto low = static_cast<std::size_t>(at);
    const std::size_t high = std::min(low + 1, values.size() - 1);
    return values[low] + (values[high] - values[low]) * (at - static_cast<double>(low));
}

/// Measures one round and keeps it; the bandwidths, failures as 0.
std::vector<double> run_round(PairSearch& search, std::vector<NodePair> pairs, const MeasurePairs& measure)
{
    PairRound round{std::move(pairs), {}};
    round.gbps = measure(round.pairs);
    round.gbps.resize(round.pairs.size(), -1); // a measurement that gave fewer answers failed for the rest
    std::vector<double> gbps = round.gbps;
    std::replace_if(
        gbps.begin(), gbps.end(), [](double g) { return !(g >= 0); }, 0.0);
    search.rounds.push_back(std::move(round));
    return gbps;
}

} // namespace

PairSearch search_pairs(std::size_t nodes, double fraction, const MeasurePairs& measure, std::size_t max_rounds)
{
    PairSearch search;
    if (nodes < 2) {
        return search;
    }
    if (max_rounds == 0) {
        max_rounds = static_cast<std::size_t>(std::ceil(std::log2(static_cast<double>(nodes)))) + 1;
    }
    max_rounds = std::max<std::size_t>(max_rounds, 2);

    std::vector<NodePair> first;
    for (std::size_t a = 0; a + 1 < nodes; a += 2) {
        first.emplace_back(a, a + 1);
    }
    const std::vector<double> gbps = run_round(search, first, measure);
    search.threshold_gbps = upper_quartile(gbps) * fraction;
    std::vector<std::size_t> good; // partners for the suspects, in the order they proved good
    std::vector<NodePair> slow_pairs;
    std::vector<std::size_t> pending; // to be measured beside a good node
    for (std::size_t i = 0; i < first.size(); ++i) {
        if (gbps[i] >= search.threshold_gbps && gbps[i] > 0) {
            good.insert(good.end(), {first[i].first, first[i].second});
        } else {
            slow_pairs.push_back(first[i]);
            pending.insert(pending.end(), {first[i].first, first[i].second});
        }
    }
    if (nodes % 2 == 1) {
        pending.push_back(nodes - 1); // the odd node has not been measured yet
    }
    if (good.empty()) {
        // Every pair is slow (or failed): nothing here is known to be good to compare against.
        for (std::size_t n = 0; n < nodes; ++n) {
            search.unresolved.push_back(n);
        }
        return search;
    }
    std::set<std::size_t> cleared;
    std::set<std::size_t> bad;
    while (!pending.empty() && search.rounds.size() < max_rounds) {
        const std::size_t k = std::min(pending.size(), good.size());
        std::vector<NodePair> pairs;
        for (std::size_t i = 0; i < k; ++i) {
            pairs.emplace_back(pending[i], good[i]);
        }
        const std::vector<double> round = run_round(search, pairs, measure);
        for (std::size_t i = 0; i < k; ++i) {
            const std::size_t suspect = pairs[i].first;
            if (round[i] >= search.threshold_gbps && round[i] > 0) {
                cleared.insert(suspect);
                good.push_back(suspect); // one more partner for the next round
            } else {
                bad.insert(suspect);
            }
        }
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(k));
    }
    search.bad_nodes.assign(bad.begin(), bad.end());
    for (const auto& [a, b] : slow_pairs) {
        if (cleared.count(a) != 0 && cleared.count(b) != 0) {
            search.bad_links.emplace_back(a, b);
        }
    }
    search.unresolved = pending;
    std::sort(search.unresolved.begin(), search.unresolved.end());
    return search;
}

} // namespace doctor::fleet
