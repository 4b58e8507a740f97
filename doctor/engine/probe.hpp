#pragma once

#include "doctor/engine/facts.hpp"
#include "doctor/engine/finding.hpp"
#include "doctor/engine/policy.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace doctor::engine {

/// What collectors may look at: where /sys and /proc are, which topology file, the environment
/// as it was when gpudoctor started.
struct CollectContext {
    std::string sysroot = "/";
    std::string topology_file; ///< "" = this machine
    std::map<std::string, std::string> env; ///< a copy of the environment
    std::chrono::milliseconds timeout{10000}; ///< per collector
    std::chrono::milliseconds deep_timeout{300000}; ///< per deep collector (timed GPU work)
    bool progress = false; ///< deep collectors say on stderr what they measure (a terminal)
    Policy policy; ///< sizes of the deep tier's measurements ([deep])

    const char* getenv(const std::string& name) const;
};

/// Reads the machine for one area and returns plain facts. Only collectors touch the machine.
/// Every collector runs in a child process with a deadline (see runner.hpp), so one that hangs
/// or crashes in a GPU library becomes an `error` and the others still report.
struct Collector {
    std::string name;
    std::function<nlohmann::json(const CollectContext&)> collect;
    /// Timed GPU work (check --deep): runs after the others, one at a time so measurements do not
    /// disturb each other, with ctx.deep_timeout as its deadline.
    bool deep = false;
};

/// A check as users select it (`--only`, `--skip`, `gpudoctor list`): the collectors it needs,
/// its finding codes and a pure rule from facts to findings of those codes.
struct Probe {
    std::string name;
    std::string summary;
    std::vector<std::string> collectors;
    /// Every code its rule reports, in the order `explain` lists them; each row makes its findings.
    std::vector<FindingCode> codes;
    std::function<void(const Facts&, const Policy&, Findings& out)> judge;
    /// Only with --deep (or when --only names it): its collectors do timed GPU work.
    bool deep = false;
};

/// Writes a progress line on stderr when ctx.progress is set (a terminal), over the previous one.
void progress_line(const CollectContext& ctx, const std::string& text);

} // namespace doctor::engine
