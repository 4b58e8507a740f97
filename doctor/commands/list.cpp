#include "doctor/commands/codes.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/probes/table.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

namespace doctor::commands {

std::string render_code_list(bool json)
{
    nlohmann::json out = nlohmann::json::array();
    std::string text;
    for (const auto& info : all_codes()) {
        out.push_back({{"code", info.code}, {"title", info.title}, {"explanation", info.explanation},
            {"remedy", info.remedy_shown()}});
        text += fmt::format("{:<34} {}\n", info.code, info.title);
    }
    return json ? out.dump(2) + "\n" : text;
}

int run_list(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    bool json = false;
    bool codes = false;
    bool no_color = false; // the list has no colour; taken as every subcommand takes it
    app.add_flag("--json", json, "As JSON");
    app.add_flag("--codes", codes, "List every finding code instead, with its title");
    app.add_flag("--no-color", no_color, "No colour (also when NO_COLOR is set)");
    app.footer("Exit status: 0 done, 2 usage error. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    if (codes) {
        std::cout << render_code_list(json);
        return 0;
    }
    nlohmann::json out = nlohmann::json::array();
    std::string text;
    for (const auto& p : probes::probe_table()) {
        out.push_back({{"name", p.name}, {"summary", p.summary}, {"collectors", p.collectors}});
        text += fmt::format("{:<11} {}\n", p.name, p.summary);
    }
    std::cout << (json ? out.dump(2) + "\n" : text);
    return 0;
}

} // namespace doctor::commands
