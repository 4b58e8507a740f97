#pragma once

#include "launcher/launch_options.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace launcher {

/// Parses `-H h1:8,h2:8,h3` (slots optional). Throws probes::Error naming the bad entry.
std::vector<HostSlots> parse_host_list(std::string_view text);

/// Parses a hostfile in Open MPI form (`host slots=N [max_slots=M]`) or Hydra/Horovod form
/// (`host:N`), with `#` comments and blank lines. `origin` names the file in errors, which carry
/// the line number. Throws probes::Error.
std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& origin);

/// Reads and parses a hostfile; an unreadable file is a probes::Error.
std::vector<HostSlots> read_hostfile(const std::string& path);

} // namespace launcher
