#pragma once

#include "doctor/facts/node.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace doctor::engine {

/// Everything the collectors saw, each collector's facts read into its struct (doctor/facts). This
/// is what `gpudoctor snapshot` writes and `check --from` reads, so rules must only ever look at
/// facts.
using Facts = facts::NodeFacts;

/// The facts of one collector as JSON, or nullptr when it did not run. A collector that broke has
/// {"error": "..."} (see `collector_error`). For the collectors without a struct of their own.
const nlohmann::json* collector_facts(const Facts& facts, const std::string& collector);

/// The error text of a collector that broke (timed out, crashed), or "".
std::string collector_error(const Facts& facts, const std::string& collector);

} // namespace doctor::engine
