#pragma once

// Which of this node's GPUs `gpudoctor check` judges: every GPU, or the ones a job uses
// (--gpus, or the job's own environment). Node-wide checks run either way; per-GPU findings
// about other GPUs are left out.

#include "doctor/engine/facts.hpp"
#include "doctor/engine/runner.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::engine {

struct GpuScope {
    std::vector<unsigned> gpus; ///< NVML indexes judged, ascending; empty = every GPU
    std::string from; ///< what chose them: "--gpus 1,3", "CUDA_VISIBLE_DEVICES=1,3"; "" = every GPU
    std::string note; ///< why a choice was not applied or may be inexact; "" when none

    bool all() const { return gpus.empty(); }
};

/// The scope of a check: `--gpus` when given (`option`, "" when not), a list of NVML indexes,
/// bus ids or UUIDs; a name that matches no GPU of the facts is a base::Error (usage, exit 2).
/// Without it, and when `env` is given (facts collected here, not a snapshot): the GPU of a gpurun
/// rank (GPURUN_GPU_BUS_ID), else CUDA_VISIBLE_DEVICES; a variable that names no GPU of this node
/// leaves every GPU judged, with a note saying so.
GpuScope gpu_scope(const Facts& facts, const std::string& option, const std::map<std::string, std::string>* env);

/// The NVML indexes a finding's subject names: "gpu 3 (0000:47:00.0)" gives {3}, a pair
/// "gpu 0 (…) ↔ gpu 7 (…)" gives {0, 7}, "host" or "gpu-node" give nothing.
std::vector<unsigned> subject_gpus(std::string_view subject);

/// Leaves out the findings whose subject names a GPU outside the scope. A probe left with no
/// finding gets one skip (`<probe>.skip`) that says why.
void keep_in_scope(std::vector<ProbeResult>& results, const GpuScope& scope);

/// "gpus judged: 1, 3 (CUDA_VISIBLE_DEVICES=1,3)" for the text report; "" for every GPU without a note.
std::string scope_line(const GpuScope& scope);

/// {"gpus": [1, 3] or null for every GPU, "from": ..., "note": ...} for the JSON report.
nlohmann::json scope_json(const GpuScope& scope);

} // namespace doctor::engine
