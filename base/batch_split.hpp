#pragma once

// Splitting work over GPUs of unequal speed (heterogeneous data and pipeline parallelism): the one
// function gpurun --global-batch and gpudoctor fit --gpus/--speeds share. Pure.

#include <string>
#include <vector>

namespace base {

struct BatchSplit {
    std::vector<unsigned> per_gpu; ///< b_i, in GPU order; they sum to the global batch
    /// N·b_i/B: the factor each rank multiplies its mean loss by, so that DDP's equal average over
    /// ranks becomes the average over all samples.
    std::vector<double> loss_weight;
    std::vector<std::string> notes; ///< e.g. which GPUs hit their cap and where the rest went
};

/// b_i = B·s_i/Σs, rounded by largest remainder so that Σb_i = B. With `caps` (one per GPU, 0 = no
/// cap: each GPU's own largest batch), a GPU over its cap gets its cap and the excess goes to the
/// others in proportion to their speeds (water-filling). Throws base::Error when `speeds` is
/// empty or holds a value that is not finite and > 0, when `caps` has another length, when B is
/// 0, or when the caps together hold less than B (saying how much fits).
BatchSplit split_batch(
    unsigned global_batch, const std::vector<double>& speeds, const std::vector<unsigned>& caps = {});

/// Contiguous pipeline stages: L_i layers for GPU i in proportion to its speed, summing to
/// `layers`, each at least 1 when layers >= GPUs. Throws base::Error like split_batch.
std::vector<unsigned> split_layers(unsigned layers, const std::vector<double>& speeds);

/// Parses "1,2,2" or "0.5,1,1" into speeds; throws base::Error naming `what` on bad input.
std::vector<double> parse_speeds(const std::string& text, const std::string& what);

} // namespace base
