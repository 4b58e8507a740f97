#include "base/cli_values.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/profile/report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace doctor::commands {

int run_profile(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    profile::ProfileCommand o;
    bool no_color = false;
    app.add_option("files", o.files, "SQLite exports (nsys --export sqlite), or directories of them")
        ->type_name("FILE");
    app.add_flag("--json", o.json, "Print the report as JSON");
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    cli::add_judging_options(app, o.judging, true);
    base::add_number(app, "--gap", o.gap_seconds, "List idle gaps at least this long (default 0.5)", "S");
    base::add_number(app, "--top", o.top, "Kernels listed per GPU (default 10)", "N");
    base::add_number(
        app, "--min-busy", o.min_busy_percent, "A busy share below this is a finding (default 50)", "PERCENT");
    app.footer("Exit status: 0 no finding at the --fail-on level (warnings allowed), 1 a finding failed (or reached "
               "--fail-on), 2 unreadable input or usage error.");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    o.color = cli::use_color(no_color);
    return profile::run_profile(o);
}

} // namespace doctor::commands
