#pragma once

// gpudoctor profile: the text and JSON reports of base::nsys::summarize over Nsight Systems
// SQLite exports.

#include "base/nsys/summary.hpp"
#include "doctor/engine/verdict.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace doctor::profile {

/// The human report: each export, then each GPU (busy share, top kernels, streams, copies by
/// kind, peer copies, idle gaps), then the findings.
std::string render_profile_text(const base::nsys::Summary& summary, bool color = false);

/// The JSON report: {"reports": [...], "gpus": [...], "findings": [...], "options": {...}}; times in
/// seconds, shares as fractions, bandwidths in GB/s (1e9 bytes per second).
nlohmann::json render_profile_json(const base::nsys::Summary& summary);

/// The command line of `gpudoctor profile`.
struct ProfileCommand {
    std::vector<std::string> files; ///< exports or directories of them
    bool json = false;
    bool color = false;
    double gap_seconds = 0.5;
    unsigned top = 10;
    double min_busy_percent = 50;
    engine::JudgingOptions judging; ///< --fail-on, --quiet, --junit, --prometheus
};

/// Reads, summarises and prints; returns the exit status: 0 read (findings or not), 1 a finding at
/// the --fail-on level. Throws base::Error for usage and input errors (exit status 2), before
/// anything is printed.
int run_profile(const ProfileCommand& command);

} // namespace doctor::profile
