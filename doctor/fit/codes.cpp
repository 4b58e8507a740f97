#include "doctor/fit/codes.hpp"

namespace doctor::fit {

using base::Severity;

const std::vector<base::FindingCode>& fit_codes()
{
    static const std::vector<base::FindingCode> codes = {
        {"fit.nothing_fits", Severity::fail, "not even batch 1 fits on a GPU",
            "The model states (weights, gradients, optimizer states) and one sample's activations need more than "
            "the GPU offers after the CUDA context, workspaces and the margin.",
            "one of the changes fit lists under \"What would fit\" (recompute, ZeRO over more data-parallel GPUs, "
            "16-bit precision), a GPU with more memory, a shorter sequence or smaller image, or tensor or "
            "pipeline parallelism"},
        {"fit.batch_over_one_step", Severity::warn, "the global batch is more than the GPUs hold in one step",
            "--global-batch asks for more samples than the GPUs' max batches add up to.",
            "accumulate gradients over the number of steps fit gives, or lower --global-batch"},
        {"fit.zero_over_one_gpu", Severity::warn, "ZeRO over one data-parallel GPU shards nothing",
            "ZeRO divides optimizer states (stage 1), gradients (2) and weights (3) among the data-parallel "
            "GPUs; over one GPU each keeps everything.",
            "give --dp (or --gpus, --gpu-count) the number of GPUs it shards over"},
        {"fit.mig_instance", Severity::warn, "the GPU is split into MIG instances",
            "A job on one MIG instance has only that instance's memory, not the GPU's.",
            "give --gpu-mem with the instance's size"},
        {"fit.gpus_differ", Severity::info, "this node's GPUs differ and are taken as equally fast",
            "The split of a global batch over GPUs follows their speeds; without --speeds every GPU counts as "
            "fast as the others.",
            "give --speeds, e.g. from each GPU's measured step time"},
        {"fit.gpu_count_not_here", Severity::info, "--gpu-count differs from the GPUs NVML sees",
            "Each of the GPUs counted is taken to have the least free memory seen on this node.",
            "give --gpu-mem for GPUs unlike this node's"},
        {"fit.gpu_table_note", Severity::info, "a note from the GPU table",
            "The GPU table (share/gpukit/gpus.toml or --gpus-file) says something about a GPU used.", ""},
        {"fit.zero3_gather_not_counted", Severity::info, "ZeRO-3's per-layer gather is not counted",
            "ZeRO-3 gathers one layer's weights and gradients at a time; the size of that buffer needs the "
            "layer count.",
            "give --layers"},
        {"fit.fp32_activations", Severity::info, "fp32 activations come from the 16-bit formula",
            "The transformer formula is measured for 16-bit activations; fp32 doubles every 2-byte tensor, "
            "while dropout masks stay 1 byte.",
            ""},
        {"fit.recompute_not_counted", Severity::info, "--recompute does not change a measured model",
            "This model's activations were measured without recomputation, so the estimate keeps them all.", ""},
    };
    return codes;
}

base::Finding fit_finding(std::string_view code, std::string subject, std::string message)
{
    return base::finding_from(fit_codes(), code, std::move(subject), std::move(message));
}

std::vector<std::string> messages(const std::vector<base::Finding>& findings)
{
    std::vector<std::string> out;
    out.reserve(findings.size());
    for (const auto& f : findings) {
        out.push_back(f.remedy.empty() ? f.message : f.message + "; " + f.remedy);
    }
    return out;
}

} // namespace doctor::fit
