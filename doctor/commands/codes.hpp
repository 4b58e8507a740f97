#pragma once

// The registry of every finding code gpudoctor reports, read by `explain`, `list --codes` and the
// man page's FINDING CODES section (generated from it at build time: man_page.cpp).

#include "base/finding.hpp"

#include <string>
#include <vector>

namespace doctor::commands {

/// The codes of one probe of check (with the runner's `<probe>.error` and `<probe>.skip`), or of
/// one other subcommand, in the order explain lists them.
struct CodeGroup {
    std::string name; ///< the probe ("gpus") or the subcommand ("nccl-log")
    std::string reporters; ///< "'gpudoctor nccl-log'"; "" for a probe of check
    std::vector<base::FindingCode> codes;
};

/// Every group: check's probes in table order, then nccl-log, monitor, profile, fit, fleet.
std::vector<CodeGroup> code_groups();

/// Every finding code, group by group, for `explain` and `list --codes`; the codes of the other
/// subcommands say in their explanation who reports them.
std::vector<base::FindingCode> all_codes();

/// The man page's FINDING CODES section (roff), from code_groups().
std::string render_codes_roff();

/// `text` as roff prints it literally: '-' as "\-", a backslash doubled, a leading '.' or '\''
/// guarded.
std::string roff_text(const std::string& text);

} // namespace doctor::commands
