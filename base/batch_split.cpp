#include "base/batch_split.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <numeric>

namespace base {

namespace {

void check_speeds(const std::vector<double>& speeds)
{
    if (speeds.empty()) {
        throw Error("speeds: none given; give one relative speed per GPU, like 1,2,2");
    }
    for (std::size_t i = 0; i < speeds.size(); ++i) {
        if (!std::isfinite(speeds[i]) || !(speeds[i] > 0)) {
            throw Error(
                fmt::format("speed of GPU {} is {}: expected a finite number above 0; give relative speeds like 1,2,2",
                    i, speeds[i]));
        }
    }
}

// Each speed's exact share of `total`, B·s_i/Σs. The speeds are scaled by their largest first, so
// that their sum stays finite whatever their size.
std::vector<double> shares(double total, const std::vector<double>& speeds, const std::vector<std::size_t>& which)
{
    double largest = 0;
    for (std::size_t i : which) {
        largest = std::max(largest, speeds[i]);
    }
    double sum = 0;
    for (std::size_t i : which) {
        sum += speeds[i] / largest;
    }
    std::vector<double> out;
    out.reserve(which.size());
    for (std::size_t i : which) {
        out.push_back(total * (speeds[i] / largest) / sum);
    }
    return out;
}

// Largest-remainder rounding of `quotas` to integers that sum to `total`: every value gets its
// floor, and the units left go to the largest fractional parts, the earlier GPU first on a tie.
// Fractional parts are compared on a 1e-9 grid, so that shares equal up to floating-point noise
// (19.2 and 19.200000000000003) count as a tie.
std::vector<unsigned> round_to_total(unsigned total, const std::vector<double>& quotas)
{
    std::vector<unsigned> out(quotas.size());
    std::vector<std::int64_t> remainder(quotas.size());
    std::uint64_t floors = 0;
    for (std::size_t i = 0; i < quotas.size(); ++i) {
        const double q = std::max(0.0, quotas[i]);
        const double whole = std::floor(q);
        out[i] = static_cast<unsigned>(std::min(whole, static_cast<double>(total)));
        remainder[i] = std::llround((q - whole) * 1e9);
        floors += out[i];
    }
    std::vector<std::size_t> order(quotas.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(
        order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
    // Floating-point noise could leave the floors a unit over the total: take it back from the
    // smallest fractional parts.
    for (std::size_t k = order.size(); floors > total && k > 0; --k) {
        if (out[order[k - 1]] > 0) {
            --out[order[k - 1]];
            --floors;
        }
    }
    for (std::size_t k = 0; floors < total; ++k) {
        ++out[order[k % order.size()]];
        ++floors;
    }
    return out;
}

std::string number(double value)
{
    return fmt::format("{:.4g}", value);
}

} // namespace

BatchSplit split_batch(unsigned global_batch, const std::vector<double>& speeds, const std::vector<unsigned>& caps)
{
    check_speeds(speeds);
    if (global_batch == 0) {
        throw Error("global batch 0: expected at least 1 sample");
    }
    if (!caps.empty() && caps.size() != speeds.size()) {
        throw Error(fmt::format("{} caps for {} GPUs: give one cap per GPU (0 = no cap)", caps.size(), speeds.size()));
    }
    const std::size_t n = speeds.size();
    auto cap_of = [&](std::size_t i) { return caps.empty() ? 0U : caps[i]; };
    const bool all_capped = std::none_of(caps.begin(), caps.end(), [](unsigned c) { return c == 0; });
    if (!caps.empty() && all_capped) {
        const std::uint64_t room = std::accumulate(caps.begin(), caps.end(), std::uint64_t{0});
        if (room < global_batch) {
            throw Error(fmt::format("global batch {}: the GPUs hold only {} samples together (at most {} per GPU); "
                                    "lower the global batch to {} or add GPUs",
                global_batch, room, fmt::join(caps, ", "), room));
        }
    }

    std::vector<std::size_t> all(n);
    std::iota(all.begin(), all.end(), std::size_t{0});
    const std::vector<double> fair = shares(global_batch, speeds, all);

    // Water-filling: a GPU whose share exceeds its cap gets the cap; the rest is shared again among
    // the others by speed, until no share exceeds a cap.
    BatchSplit split;
    split.per_gpu.assign(n, 0);
    std::vector<bool> capped(n, false);
    std::vector<std::size_t> open = all;
    std::uint64_t left = global_batch;
    for (;;) {
        const std::vector<double> q = shares(static_cast<double>(left), speeds, open);
        std::vector<std::size_t> still_open;
        for (std::size_t k = 0; k < open.size(); ++k) {
            const std::size_t i = open[k];
            if (cap_of(i) != 0 && q[k] > cap_of(i)) {
                capped[i] = true;
                split.per_gpu[i] = cap_of(i);
                left -= cap_of(i);
            } else {
                still_open.push_back(i);
            }
        }
        if (still_open.size() == open.size()) {
            const std::vector<unsigned> rounded = round_to_total(static_cast<unsigned>(left), q);
            for (std::size_t k = 0; k < open.size(); ++k) {
                split.per_gpu[open[k]] = rounded[k];
            }
            break;
        }
        open = std::move(still_open);
        if (open.empty() || left == 0) {
            break;
        }
    }

    for (std::size_t i = 0; i < n; ++i) {
        split.loss_weight.push_back(static_cast<double>(n) * split.per_gpu[i] / global_batch);
        if (capped[i]) {
            split.notes.push_back(fmt::format("GPU {} is capped at {} (its share by speed is {}); the rest went to "
                                              "the other GPUs by speed",
                i, cap_of(i), number(fair[i])));
        } else if (split.per_gpu[i] == 0) {
            split.notes.push_back(fmt::format("GPU {} gets no samples (its share by speed is {}): it only joins the "
                                              "gradient all-reduce; raise the global batch to give it work",
                i, number(fair[i])));
        }
    }
    return split;
}

std::vector<unsigned> split_layers(unsigned layers, const std::vector<double>& speeds)
{
    check_speeds(speeds);
    if (layers == 0) {
        throw Error("layers 0: expected at least 1 layer");
    }
    std::vector<std::size_t> all(speeds.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    const std::vector<double> q = shares(layers, speeds, all);
    std::vector<unsigned> stages = round_to_total(layers, q);
    if (layers < speeds.size()) {
        return stages;
    }
    // Every stage needs a layer: a GPU left without one takes it from the stage that holds the most
    // above its share (the earlier one on a tie).
    for (std::size_t i = 0; i < stages.size(); ++i) {
        if (stages[i] != 0) {
            continue;
        }
        std::size_t donor = stages.size();
        for (std::size_t j = 0; j < stages.size(); ++j) {
            if (stages[j] >= 2 && (donor == stages.size() || stages[j] - q[j] > stages[donor] - q[donor])) {
                donor = j;
            }
        }
        --stages[donor];
        ++stages[i];
    }
    return stages;
}

std::vector<double> parse_speeds(const std::string& text, const std::string& what)
{
    constexpr const char* hint = "give relative speeds as positive numbers, like 1,2,2 or 0.5,1,1";
    if (text.find_first_not_of(" \t") == std::string::npos) {
        throw Error(fmt::format("{} '{}': no speeds; {}", what, text, hint));
    }
    std::vector<double> speeds;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (item.empty()) {
            throw Error(fmt::format("{} {}: speed {} is empty; {}", what, text, speeds.size() + 1, hint));
        }
        double value = 0;
        const char* end = item.data() + item.size();
        auto [ptr, ec] = std::from_chars(item.data(), end, value);
        if (ec == std::errc::result_out_of_range && ptr == end) {
            throw Error(fmt::format("{} {}: '{}' is out of range; {}", what, text, item, hint));
        }
        if (ec != std::errc() || ptr != end) {
            throw Error(fmt::format("{} {}: '{}' is not a number; {}", what, text, item, hint));
        }
        if (!std::isfinite(value)) {
            throw Error(fmt::format("{} {}: '{}' is not a finite number; {}", what, text, item, hint));
        }
        if (!(value > 0)) {
            throw Error(fmt::format("{} {}: speed {} is not above 0; {}", what, text, item, hint));
        }
        speeds.push_back(value);
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return speeds;
}

} // namespace base
