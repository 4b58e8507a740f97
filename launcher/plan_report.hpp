#pragma once

#include "base/batch_split.hpp"
#include "base/launchers/backends.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/pack.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// One data model, two renderers: the --dry-run table for people and --dry-run --json for
/// programs.
struct PlanReport {
    const JobPlan& job;
    const LaunchOptions& options;
    std::string gpu_source; ///< "nvml", "topology" or "" with --cpu-only
    std::vector<std::string> notes; ///< inventory and plan notes
    std::vector<std::string> command; ///< the exact launcher argv
    std::optional<base::BatchSplit> batch; ///< --global-batch: each rank's share, in rank order
    launchers::Launcher launcher; ///< what starts the ranks, and why
    std::vector<LeftOutHost> left_out; ///< --pack: the hosts not used
    /// What each rank's helper is given; with it, the JSON shows each rank's environment.
    const HelperOptions* helper = nullptr;
    std::vector<std::string> passed; ///< the variables passed to the ranks on every host
};

std::string render_text(const PlanReport& report);
/// --dry-run --json: written as it goes (base::JsonWriter, 2 spaces of indent) to the end of
/// `out`; the ranks, which grow with the job, are never built as a document.
void write_json(const PlanReport& report, std::string& out);
/// The same report as a document.
nlohmann::json render_json(const PlanReport& report);

/// argv as a person would paste it into a shell (display only: gpurun never runs a shell).
std::string shell_quote(const std::vector<std::string>& argv);

} // namespace launcher
