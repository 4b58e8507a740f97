#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace base::launchers {

/// The most names or counts one list may expand to: far above any cluster, low enough that a
/// typo such as "n[1-999999999]" is an error rather than an exhausted memory.
inline constexpr std::size_t node_list_limit = 1'000'000;

/// A host list split into its entries: on the commas outside brackets ("gpu[01-04,07]:8,cpu7" is
/// two), each without the blanks (space, tab, CR, LF) around it. Every host list gpurun reads
/// (-H, --free-gpus, SLURM_JOB_NODELIST, the names of expand_node_list) is split here, so one
/// rule holds for all. Bracket errors are left to the caller, which sees the whole entry.
std::vector<std::string_view> split_node_list(std::string_view text);

/// Expands a Slurm host list (SLURM_JOB_NODELIST, `scontrol show hostnames`):
/// "gpu[001-004,010],cpu7" gives gpu001 gpu002 gpu003 gpu004 gpu010 cpu7. Commas inside brackets
/// separate ranges, commas outside separate names (split_node_list). A range keeps the zero
/// padding of its lower bound ("[08-10]" gives 08 09 10). Several bracket groups in one name
/// multiply, the last group varying fastest ("r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2; Slurm
/// orders three or more groups otherwise, never writing such lists itself). Text after the last
/// group is kept ("n[1-2]-ib" gives n1-ib n2-ib; Slurm refuses it). Names are kept in the order
/// written, duplicates included (parse_node_names refuses them). Host names have letters, digits, '-', '.' and '_', do
/// not start with '-' and are at most 253 characters. Throws base::Error naming the bad part (an unclosed, nested or
/// empty bracket, a ']' without '[', a range whose end is below its start or whose bounds are not digits, an empty
/// name, a character a host name cannot have, more than `limit` names: counted before any name is built, so
/// "n[0-4294967295]" fails at once).
std::vector<std::string> expand_node_list(std::string_view text, std::size_t limit = node_list_limit);

/// Expands Slurm's compressed per-node counts (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE):
/// "2(x3),1" gives 2 2 2 1. Throws base::Error naming the bad part (an empty entry, a repeat of
/// 0, a count above the largest unsigned), or for more than `limit` counts.
std::vector<unsigned> expand_count_list(std::string_view text, std::size_t limit = node_list_limit);

/// The inverse of expand_count_list, as Slurm writes it: {2,2,2,1} gives "2(x3),1".
std::string compress_count_list(const std::vector<unsigned>& counts);

} // namespace base::launchers
