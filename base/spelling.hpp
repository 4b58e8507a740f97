#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace base {

/// The closest of `candidates` to `word` when it is close enough to be a likely typo, else "".
/// For "did you mean" in error messages.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

/// The parts of `text` between `separator`s, empty ones kept ("a::b" is {"a", "", "b"}).
std::vector<std::string> split(std::string_view text, char separator);

/// The items of a comma-separated list as given on a command line, empty ones kept
/// ("a,,b" is {"a", "", "b"}) so that callers can say which one is wrong.
std::vector<std::string> split_commas(const std::string& text);

} // namespace base
