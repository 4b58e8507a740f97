#pragma once

// What a subcommand that judges (check, nccl-log, profile) concluded, in the one shape that its
// shared outputs read: the exit status, --junit and --prometheus.

#include "doctor/engine/facts.hpp"
#include "doctor/engine/runner.hpp"

#include <string>
#include <vector>

namespace doctor::engine {

struct Verdict {
    struct Group {
        std::string name; ///< check's probe ("gpus"); the subcommand's own name for nccl-log and profile
        std::vector<Finding> findings;
    };

    std::string subcommand; ///< "check", "nccl-log", "profile"
    std::string host; ///< the node judged; "" when the verdict is not about one node
    std::vector<Group> groups;
    Severity fail_on = Severity::fail; ///< the level that fails: warn with check --strict or --fail-on warn

    /// 0 nothing fails at `fail_on`, 1 something does.
    int exit_code() const;
    /// Whether this finding makes the verdict fail.
    bool failing(const Finding& finding) const;
};

/// check's verdict: one group per probe, in table order; the host from the facts.
Verdict check_verdict(const std::vector<ProbeResult>& results, const Facts& facts, bool strict);

/// The verdict of nccl-log or profile: one group named after the subcommand.
Verdict findings_verdict(std::string subcommand, std::vector<Finding> findings, Severity fail_on);

/// The files a judging subcommand can also write ("" = not asked for).
struct VerdictFiles {
    std::string junit; ///< --junit FILE
    std::string prometheus; ///< --prometheus FILE
};

/// What every subcommand that judges (check, nccl-log, profile, fit) takes besides its own options
/// (doctor::cli::add_judging_options adds them to a command line).
struct JudgingOptions {
    VerdictFiles files; ///< --junit, --prometheus
    bool quiet = false; ///< --quiet: only the problems and a count
    std::string fail_on = "fail"; ///< --fail-on warn|fail (check spells it --strict)
};

/// Writes the files asked for, atomically, both staged before either replaces its target; a file
/// that cannot be written is base::Error (exit 2), raised before the report is printed. `facts`
/// are check's (their GPU metrics); nullptr for the others.
void write_verdict_files(const VerdictFiles& files, const Verdict& verdict, const Facts* facts);

/// --quiet for nccl-log and profile: only the findings that are problems (warn, fail, error), then
/// "N fail, N warn, N error".
std::string render_problems(const Verdict& verdict, bool color);

} // namespace doctor::engine
