#pragma once

#include "probes/finding.hpp"

#include <string>

namespace doctor::check {

// gpudoctor check's findings are gpukit's one finding model.
using probes::Finding;
using probes::Severity;
using probes::to_string;

/// The long form of a finding code, for `gpudoctor explain` and the man page.
struct CodeInfo {
    std::string code;
    std::string title;
    std::string explanation;
    std::string remedy;
};

} // namespace doctor::check
