#pragma once

// gpudoctor fit's answer: the model's fit on each GPU, the global batch and its split over the
// GPUs, the learning rate, and what would fit when nothing does. One data model, two renderers.

#include "base/batch_split.hpp"
#include "doctor/fit/cuda_context.hpp"
#include "doctor/fit/model.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace doctor::fit {

/// One GPU the job runs on.
struct FitGpu {
    std::string name; ///< from the GPU table, NVML, or "" for a size given with --gpu-mem
    std::uint64_t memory = 0;
    std::string memory_from; ///< "gpu table", "nvml free", "--gpu-mem"
    double speed = 1; ///< relative training speed
    std::optional<unsigned> nvml_index; ///< this node's GPU, as NVML numbers it; nullopt for a size or a model
    GpuTraits traits; ///< compute capability and NVLink, from the GPU table or NVML; unknown for a size
};

/// What the user asked, resolved: the model, the setup and the GPUs.
struct FitRequest {
    ModelSpec model;
    TrainingSetup setup;
    Overheads overheads;
    std::vector<FitGpu> gpus;
    std::optional<unsigned> global_batch; ///< --global-batch
    std::optional<unsigned> batch; ///< --batch: the memory at this per-GPU batch
    std::optional<double> base_lr;
    std::optional<unsigned> base_batch;
    bool layers_given = false; ///< --layers on the command line: show the pipeline split
    std::vector<base::Finding> findings; ///< found while resolving the GPUs (MIG, table notes, ...)
    /// --cuda-context measure: one GPU of each model; overheads.cuda_context is the largest.
    std::vector<ContextMeasurement> contexts_measured;
};

struct FitReport {
    FitRequest request;
    MemoryPlan plan;
    std::vector<GpuFit> fits; ///< one per request.gpus
    /// Whether the job's GPUs are all joined by NVLink (NCCL's channels); nullopt where not known.
    std::optional<bool> nvlink;
    std::optional<PeakMemory> at_batch; ///< with request.batch
    /// With request.batch, per GPU: its memory less the margin less at_batch's upper peak (< 0: may
    /// not fit).
    std::vector<std::int64_t> spare_at_batch;
    /// The smallest over the GPUs of the largest batch whose upper estimate fits; 0 when nothing fits
    /// on one.
    unsigned max_batch_per_gpu = 0;
    unsigned max_batch_per_gpu_central = 0; ///< the same at the central estimate
    unsigned global_batch = 0; ///< per optimizer step; 0 when nothing fits and none was given
    unsigned micro_batch = 0; ///< per micro-batch over all GPUs: global_batch / grad_accum
    std::string global_batch_from; ///< "--global-batch", "max batch", "balanced by speed"
    std::optional<base::BatchSplit> split; ///< with more than one GPU, when the batch fits in one step
    std::vector<unsigned> pipeline_layers; ///< layers per GPU, when shown
    std::optional<LrAdvice> lr;
    std::optional<std::size_t> failing_gpu; ///< where nothing fits: the one with the least memory
    std::vector<Suggestion> suggestions; ///< for failing_gpu
    /// The plan's and the request's findings, then the fit's own (fit.nothing_fits,
    /// fit.batch_over_one_step): what the exit status, --junit and --prometheus judge.
    std::vector<base::Finding> findings;
};

/// Computes everything. Throws base::Error for inputs the model refuses (see plan_memory) and
/// when there is no GPU.
FitReport analyse_fit(const FitRequest& request);

/// The report for people; the findings but fit.nothing_fits (the max-batch line says it) under
/// "Findings:", coloured when `color`.
std::string render_fit_text(const FitReport& report, bool color = false);
/// The layout is in gpudoctor(1), OUTPUT.
nlohmann::json render_fit_json(const FitReport& report);

} // namespace doctor::fit
