#pragma once

// Both programs parse their options with CLI11, which takes an empty value ("-H ''",
// "--topology ''") as given; each option's default then stood in for it, silently. Header only:
// the probes library itself does not use CLI11.

#include "probes/error.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace probes {

/// Throws probes::Error for the first option of `app` that takes a value and was given an empty
/// one: "--topology '': expected a file name".
inline void refuse_empty_values(const CLI::App& app)
{
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->get_items_expected_min() == 0 || opt->count() == 0) {
            continue;
        }
        for (const auto& value : opt->results()) {
            if (value.empty()) {
                const std::string type = opt->get_type_name();
                const char* expected = type.find("FILE") != std::string::npos ? "a file name"
                    : type.find("DIR") != std::string::npos                   ? "a directory"
                                                                              : "a value";
                const std::string name = opt->get_name().empty() ? opt->get_name(true) : opt->get_name(false, true);
                throw Error(fmt::format("{} '': expected {}", name, expected));
            }
        }
    }
}

} // namespace probes
