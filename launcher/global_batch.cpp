#include "launcher/global_batch.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

namespace launcher {

namespace {

using base::Error;

bool every_rank_has_samples(const base::BatchSplit& split)
{
    return std::find(split.per_gpu.begin(), split.per_gpu.end(), 0U) == split.per_gpu.end();
}

// What to tell a user whose global batch leaves a rank empty. Rounding is not monotonic in the
// batch, so the search walks up from it; at Σs/min(s) every share is at least 1, which bounds it.
std::string batch_advice(unsigned global_batch, const std::vector<double>& speeds)
{
    const double largest = *std::max_element(speeds.begin(), speeds.end());
    double sum = 0;
    for (double s : speeds) {
        sum += s / largest;
    }
    // Less a hair, so that an exact ratio (1.0000001/1e-7) is not pushed up by its rounding error.
    const double ratio = sum / (*std::min_element(speeds.begin(), speeds.end()) / largest);
    const double enough = std::ceil(ratio * (1 - 1e-12));
    if (!(enough < static_cast<double>(std::numeric_limits<unsigned>::max())) ||
        global_batch == std::numeric_limits<unsigned>::max()) {
        return "raise the slowest ranks' speeds or leave those ranks out";
    }
    const unsigned bound = std::max(static_cast<unsigned>(enough), global_batch + 1);
    // A few million rank shares at most, so that a large job still answers at once.
    const std::size_t steps = std::max<std::size_t>(1000, 2'000'000 / speeds.size());
    for (unsigned b = global_batch + 1; b <= bound && b - global_batch <= steps; ++b) {
        if (every_rank_has_samples(base::split_batch(b, speeds))) {
            return fmt::format("the smallest global batch that gives every rank a sample is {}", b);
        }
    }
    return fmt::format("a global batch of {} or more gives every rank a sample", bound);
}

} // namespace

base::BatchSplit split_over_ranks(const BatchOptions& options, unsigned ranks)
{
    if (options.global_batch == 0) {
        throw Error("--global-batch 0: expected at least one sample per rank");
    }
    if (!options.speeds.empty() && options.speeds.size() != ranks) {
        throw Error(fmt::format("--speeds {}: {} speed{} for {} rank{}; give one speed per rank, in rank order",
            format_speeds(options.speeds), options.speeds.size(), options.speeds.size() == 1 ? "" : "s", ranks,
            ranks == 1 ? "" : "s"));
    }
    const std::vector<double> speeds = options.speeds.empty() ? std::vector<double>(ranks, 1.0) : options.speeds;
    base::BatchSplit split = base::split_batch(options.global_batch, speeds);
    if (!every_rank_has_samples(split)) {
        std::vector<unsigned> empty;
        for (unsigned r = 0; r < ranks; ++r) {
            if (split.per_gpu[r] == 0) {
                empty.push_back(r);
            }
        }
        throw Error(fmt::format("--global-batch {}: rank{} {} of {} would get no samples{}; {}", options.global_batch,
            empty.size() == 1 ? "" : "s", fmt::join(empty, ", "), ranks,
            options.speeds.empty() ? "" : fmt::format(" at speeds {}", format_speeds(options.speeds)),
            batch_advice(options.global_batch, speeds)));
    }
    return split;
}

std::string format_speeds(const std::vector<double>& speeds)
{
    return fmt::format("{}", fmt::join(speeds, ","));
}

std::string format_loss_weight(double weight)
{
    return fmt::format("{:.6g}", weight);
}

} // namespace launcher
