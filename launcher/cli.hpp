#pragma once

#include "launcher/launch_options.hpp"

#include <string>
#include <vector>

namespace launcher {

/// What the command line asked for.
struct CliRequest {
    enum class Action { run, help, version } action = Action::run;
    LaunchOptions options;
    std::string help_text; ///< with Action::help only
};

/// Parses gpurun's argv (argv[0] included). Options end at the first word that is not an option,
/// or at "--"; everything after is the program and its arguments, untouched. Throws base::Error
/// for usage errors (unknown option with a did-you-mean, bad values).
CliRequest parse_command_line(const std::vector<std::string>& argv);

} // namespace launcher
