#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace doctor::engine {

/// Everything the collectors saw, one JSON object per collector name. This is what `gpudoctor
/// snapshot` writes and `check --from` reads, so rules must only ever look at facts.
using Facts = nlohmann::json;

/// The facts of one collector, or nullptr when it did not run. A collector that broke has
/// {"error": "..."} (see `collector_error`).
const nlohmann::json* collector_facts(const Facts& facts, const std::string& collector);

/// The error text of a collector that broke (timed out, crashed), or "".
std::string collector_error(const Facts& facts, const std::string& collector);

} // namespace doctor::engine
