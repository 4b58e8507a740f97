#pragma once

#include <string>
#include <vector>

namespace probes {

/// The closest of `candidates` to `word` when it is close enough to be a likely typo, else "".
/// For "did you mean" in error messages.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

} // namespace probes
