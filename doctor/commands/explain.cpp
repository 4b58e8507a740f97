#include "base/error.hpp"
#include "base/spelling.hpp"
#include "doctor/commands/codes.hpp"
#include "doctor/commands/commands.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

namespace doctor::commands {

int run_explain(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    std::string code;
    bool no_color = false; // the explanation has no colour; taken as every subcommand takes it
    app.add_option("CODE", code, "A finding code, e.g. gpus.ecc_uncorrected; without one, every code is listed");
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    app.footer("Exit status: 0 done, 2 usage error or an unknown code. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    if (code.empty()) {
        std::cout << render_code_list(false);
        return 0;
    }
    std::vector<std::string> names;
    for (const auto& info : all_codes()) {
        if (info.code == code) {
            std::cout << fmt::format("{}: {}\n\n{}\n\nRemedy: {}\n", info.code, info.title, info.explanation,
                info.remedy.empty() ? "none needed" : info.remedy_shown());
            return 0;
        }
        names.push_back(info.code);
    }
    const std::string hint = base::closest_match(code, names);
    throw base::Error(fmt::format("no finding code '{}'{}; 'gpudoctor list' shows the probes", code,
        hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

} // namespace doctor::commands
