#pragma once

// What gpudoctor fleet concludes beyond each node's own findings, as findings of the one model: a
// node fit (pass), a node that did not answer (error), an outlier among the nodes' measurements
// (warn), a fact that differs between nodes (info).

#include "base/finding.hpp"

#include <vector>

namespace doctor::fleet {

/// Every code fleet reports itself (`fleet.*`), with its severity, explanation and remedy.
const std::vector<base::FindingCode>& fleet_codes();

} // namespace doctor::fleet
