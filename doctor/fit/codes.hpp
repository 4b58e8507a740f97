#pragma once

// What gpudoctor fit concludes beyond the numbers, as findings of the one model: nothing fits
// (fail), a setup that does not do what it says (warn), and how the estimate was made (info).

#include "base/finding.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace doctor::fit {

/// Every code fit reports (`fit.*`), with its severity, explanation and remedy.
const std::vector<base::FindingCode>& fit_codes();

/// A finding of `code` from fit_codes().
base::Finding fit_finding(std::string_view code, std::string subject, std::string message);

/// The messages of `findings`, in order (the `notes` of fit's JSON).
std::vector<std::string> messages(const std::vector<base::Finding>& findings);

} // namespace doctor::fit
