#pragma once

#include "doctor/engine/finding.hpp"

#include <vector>

namespace doctor {

/// Every finding code gpudoctor can report, for `explain` and `list --codes`: each probe's codes
/// plus the runner's own (`<probe>.error`, `<probe>.skip`), then nccl-log's, the monitor's and
/// profile's.
std::vector<engine::CodeInfo> all_codes();

} // namespace doctor
