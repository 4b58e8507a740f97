#pragma once

// gpurun --global-batch: each rank's share of the global batch and its loss weight, computed by
// gpurun (to check and preview) and by each rank's helper (to export) from the same function.

#include "base/batch_split.hpp"
#include "launcher/launch_options.hpp"

#include <string>
#include <vector>

namespace launcher {

/// base::split_batch over `ranks` ranks in global rank order (equal speeds when none are given).
/// Throws base::Error, naming the options, when --speeds does not give one speed per rank or
/// when a rank would get no samples (it would only slow the others down at every all-reduce); the
/// message says the smallest global batch that gives every rank a sample.
base::BatchSplit split_over_ranks(const BatchOptions& options, unsigned ranks);

/// The speeds as gpurun writes them: "1,2,2", each the shortest text that reads back exactly.
std::string format_speeds(const std::vector<double>& speeds);

/// GPURUN_LOSS_WEIGHT's text: six significant digits ("0.59375", "1.6", "0.666667").
std::string format_loss_weight(double weight);

} // namespace launcher
