#include "doctor/commands/codes.hpp"

#include "base/nccl/log.hpp"
#include "base/nsys/summary.hpp"
#include "base/usage/summary.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/fit/codes.hpp"
#include "doctor/fleet/codes.hpp"
#include "doctor/probes/table.hpp"

#include <fmt/format.h>

namespace doctor::commands {

std::vector<CodeGroup> code_groups()
{
    std::vector<CodeGroup> groups;
    for (const auto& p : probes::probe_table()) {
        CodeGroup g{p.name, "", p.codes};
        g.codes.push_back(engine::error_code(p));
        g.codes.push_back(engine::skip_code(p));
        groups.push_back(std::move(g));
    }
    // The other subcommands' code tables, and who reports them.
    struct Source {
        const char* name;
        const std::vector<base::FindingCode>& (*codes)();
        const char* reporters;
    };
    static const Source sources[] = {
        {"nccl-log", base::nccl::finding_codes, "'gpudoctor nccl-log'"},
        {"monitor", base::usage::monitor_codes, "'gpudoctor monitor' and 'gpurun --monitor'"},
        {"profile", base::nsys::finding_codes, "'gpudoctor profile'"},
        {"fit", fit::fit_codes, "'gpudoctor fit'"},
        {"fleet", fleet::fleet_codes, "'gpudoctor fleet'"},
    };
    for (const auto& source : sources) {
        groups.push_back({source.name, source.reporters, source.codes()});
    }
    return groups;
}

std::vector<base::FindingCode> all_codes()
{
    std::vector<base::FindingCode> out;
    for (auto& group : code_groups()) {
        for (auto& c : group.codes) {
            if (!group.reporters.empty()) {
                c.explanation += fmt::format(" Reported by {} ({}).", group.reporters, c.severities());
            }
            out.push_back(std::move(c));
        }
    }
    return out;
}

std::string roff_text(const std::string& text)
{
    std::string out;
    for (char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '-') {
            out += "\\-";
        } else {
            out += c;
        }
    }
    if (!out.empty() && (out.front() == '.' || out.front() == '\'')) {
        out.insert(0, "\\&");
    }
    return out;
}

std::string render_codes_roff()
{
    std::string out = R"(.SH FINDING CODES
Every code, by probe of
.B check
and then by subcommand, with its title, the severities it is given with, what it means and
what to do: the same text as
.B "gpudoctor explain"
.IR code ,
from the same table. In a remedy,
.I <name>
stands for a value of the finding (its JSON
.BR facts ).
Every probe also has the codes
.IB probe .error
(the probe could not run) and
.IB probe .skip
(not checked: its facts are missing, or there is no GPU to look at).
)";
    for (const auto& group : code_groups()) {
        out += fmt::format(".SS {}\n", roff_text(group.name));
        if (!group.reporters.empty()) {
            out += fmt::format("Reported by {}.\n", roff_text(group.reporters));
        }
        for (const auto& c : group.codes) {
            out += fmt::format(".TP\n.BR \"{}\" \" ({})\"\n.IR \"{}\" .\n{}\n", roff_text(c.code), c.severities(),
                roff_text(c.title), roff_text(c.explanation));
            if (!c.remedy.empty()) {
                out += fmt::format(".br\nRemedy: {}.\n", roff_text(c.remedy_shown()));
            }
        }
    }
    return out;
}

} // namespace doctor::commands
