#pragma once

#include "base/finding.hpp"

#include <string>

namespace doctor::engine {

// gpudoctor check's findings are gpukit's one finding model.
using base::Finding;
using base::Severity;
using base::to_string;

/// The long form of a finding code, for `gpudoctor explain` and the man page.
struct CodeInfo {
    std::string code;
    std::string title;
    std::string explanation;
    std::string remedy;
};

} // namespace doctor::engine
