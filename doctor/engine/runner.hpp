#pragma once

#include "doctor/engine/probe.hpp"

#include <map>
#include <string>
#include <vector>

namespace doctor::engine {

/// Runs the collectors, each in its own child process (and process group): the quick ones all at
/// once with ctx.timeout as their deadline, then the deep ones one at a time, each with
/// ctx.deep_timeout. A collector that throws, hangs or crashes yields
/// {"error": "..."} ("timed out after 10 s", "crashed (Segmentation fault)") for its name; the
/// others are unaffected.
/// With `seconds`, how long each collector took goes there, by name.
Facts collect(const std::vector<const Collector*>& collectors, const CollectContext& ctx,
    std::map<std::string, double>* seconds = nullptr);

/// The runner's own codes of every probe: `<probe>.error` (its collector broke or its rule did)
/// and `<probe>.skip` (its facts were not collected).
FindingCode error_code(const Probe& probe);
FindingCode skip_code(const Probe& probe);

/// One probe's outcome.
struct ProbeResult {
    const Probe* probe = nullptr;
    std::vector<Finding> findings;
};

/// Applies each probe's rule to the facts. A probe whose collector is missing from the facts is
/// skipped with that reason; one whose collector broke is an error with the collector's message.
/// `snapshot` names the file the facts came from (check --from), "" for facts collected here: a
/// rule that meets facts of the wrong JSON type then throws base::Error (bad input, exit 2)
/// instead of reporting the probe as broken.
std::vector<ProbeResult> judge(const std::vector<const Probe*>& probes, const Facts& facts, const Policy& policy,
    const std::string& snapshot = "");

/// 0 no failure (warnings allowed), 1 a failure or error (or, with strict, a warning).
int exit_code(const std::vector<ProbeResult>& results, bool strict);

} // namespace doctor::engine
