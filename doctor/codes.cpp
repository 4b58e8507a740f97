#include "doctor/codes.hpp"
#include "base/nccl/log.hpp"
#include "base/nsys/summary.hpp"
#include "base/usage/summary.hpp"
#include "doctor/fit/codes.hpp"
#include "doctor/fleet/codes.hpp"
#include "doctor/probes/checks.hpp"

#include <fmt/format.h>

namespace doctor {

std::vector<engine::CodeInfo> all_codes()
{
    std::vector<engine::CodeInfo> out;
    for (const auto& p : probes::probe_table()) {
        out.insert(out.end(), p.codes.begin(), p.codes.end());
        out.push_back({p.name + ".error", fmt::format("the {} probe could not run", p.name),
            "Its collector timed out, crashed, or its rule broke. A GPU library call that hangs (a "
            "wedged driver, a GPU that fell off the bus) shows up here; the other probes still ran.",
            fmt::format("Look at dmesg (Xid errors), nvidia-smi, and run again with a longer {}.",
                p.deep ? "--deep-timeout" : "--timeout")});
        out.push_back({p.name + ".skip", fmt::format("the {} probe was not checked", p.name),
            "The facts it needs were not collected (a snapshot taken with --only/--skip, or an older "
            "snapshot). A skipped probe is never a pass.",
            ""});
    }
    // The other subcommands' code tables, and who reports them.
    struct Source {
        const std::vector<base::CodeText>& (*codes)();
        const char* reporters;
    };
    static const Source sources[] = {
        {base::nccl::finding_codes, "'gpudoctor nccl-log'"},
        {base::usage::monitor_codes, "'gpudoctor monitor' and 'gpurun --monitor'"},
        {base::nsys::finding_codes, "'gpudoctor profile'"},
        {fit::fit_codes, "'gpudoctor fit'"},
        {fleet::fleet_codes, "'gpudoctor fleet'"},
    };
    for (const auto& source : sources) {
        for (const auto& c : source.codes()) {
            out.push_back({c.code, c.title,
                fmt::format("{} Reported by {} ({}).", c.explanation, source.reporters, base::to_string(c.severity)),
                c.remedy});
        }
    }
    return out;
}

} // namespace doctor
