#include "doctor/commands/commands.hpp"
#include "doctor/commands/node_options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

namespace doctor::commands {

int run_snapshot(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    NodeOptions o;
    add_node_options(app, o);
    app.footer("Exit status: 0 done, 2 usage or input error, 3 gpudoctor itself could not run. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    check_timeout(o);
    check_deep_timeout(o);
    std::cout << snapshot_document(prepare_node_run(o, true)).dump(2) << '\n';
    return 0;
}

} // namespace doctor::commands
