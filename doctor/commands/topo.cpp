#include "base/cli_values.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/commands/node_options.hpp"
#include "doctor/probes/topo_matrix.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace doctor::commands {

int run_topo(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    NodeOptions o;
    bool json = false;
    bool no_color = false; // the matrix has no colour; taken as every subcommand takes it
    app.add_flag("--json", json, "As JSON");
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    app.add_option("--sysroot", o.sysroot, "Read /sys and /proc under DIR (default /)")->type_name("DIR");
    app.add_option("--topology", o.topology, "Use this hwloc XML (NVML is then not asked)")->type_name("FILE");
    base::add_number(app, "--timeout", o.timeout, "Seconds each collector may take (default 10)", "S");
    app.footer("Exit status: 0 done, 2 usage or input error (a --topology file that cannot be read), 3 this "
               "machine's topology could not be read. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    check_timeout(o);
    return probes::run_topo(prepare_node_run(o, true).context, json);
}

} // namespace doctor::commands
