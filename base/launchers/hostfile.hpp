#pragma once

#include "base/launchers/backends.hpp"
#include "base/launchers/node_list.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace base::launchers {

/// Parses `-H h1:8,h2:8,h3` (slots optional). A name with a Slurm range gives one host per name,
/// all with its slots: `-H gpu[01-04]:8,cpu7` is five hosts (commas inside brackets separate
/// ranges, see expand_node_list; blanks around entries are dropped, see split_node_list). An entry
/// whose first brackets hold a ':' is an IPv6 address (`[fe80::1]:4`); `[1-3]:4` is the hosts 1 to 3. A host listed
/// again adds its count to the first entry (`a:2,a:2` is a:4, as Open MPI counts it); listed again without counts, it
/// is an error. `option` names the list in errors; counts below `min_count` are errors (--free-gpus takes 0: a host
/// with no GPU free). More than `limit` hosts in all is an error. Throws base::Error naming the bad entry.
std::vector<HostSlots> parse_host_list(
    std::string_view text, std::string_view option = "-H", unsigned min_count = 1, std::size_t limit = node_list_limit);

/// The node names of a Slurm host list given in `source` (SLURM_JOB_NODELIST), read by the same
/// rules as parse_host_list: names and ranges only (a ':' count is an error), each node once (a
/// repeat is an error, as a repeat without counts is in -H), and an empty value is an error.
/// Throws base::Error naming the variable.
std::vector<std::string> parse_node_names(
    std::string_view text, std::string_view source, std::size_t limit = node_list_limit);

/// Parses a hostfile in Open MPI form (`host slots=N [max_slots=M]`) or Hydra/Horovod form
/// (`host:N`), with `#` comments and blank lines. The host word may be a Slurm range
/// (`gpu[01-02] slots=8` is two hosts of 8 slots). `origin` names the file in errors, which carry
/// the line number. Repeated hosts add up as in parse_host_list; more than `limit` hosts in all is
/// an error. Throws base::Error.
std::vector<HostSlots> parse_hostfile(
    std::string_view text, const std::string& origin, std::size_t limit = node_list_limit);

/// Reads and parses a hostfile; an unreadable file is a base::Error.
std::vector<HostSlots> read_hostfile(const std::string& path);

} // namespace base::launchers
