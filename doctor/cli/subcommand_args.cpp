#include "doctor/cli/subcommand_args.hpp"

#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/spelling.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <unistd.h>

namespace doctor::cli {

CommandLine split_at_dashes(int argc, char** argv)
{
    CommandLine line;
    for (int i = 0; i < argc; ++i) {
        if (line.dashes) {
            line.command.emplace_back(argv[i]);
        } else if (i > 0 && std::strcmp(argv[i], "--") == 0) {
            line.dashes = true;
        } else {
            line.own.push_back(argv[i]);
        }
    }
    return line;
}

void reject_unknown_options(const CLI::App& app, const CommandLine& line, const std::string& subcommand)
{
    std::vector<std::string> known = {"--help"};
    for (const auto* option : app.get_options()) {
        for (const auto& name : option->get_lnames()) { // get_name() is "" for a hidden flag
            known.push_back("--" + name);
        }
    }
    for (std::size_t i = 1; i < line.own.size(); ++i) {
        const std::string word = std::string(line.own[i]).substr(0, std::string(line.own[i]).find('='));
        if (word.rfind("--", 0) == 0 && std::find(known.begin(), known.end(), word) == known.end()) {
            const std::string hint = base::closest_match(word, known);
            throw base::Error(fmt::format("{}: unknown option {}{}; see gpudoctor {} --help", subcommand, word,
                hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint), subcommand));
        }
    }
}

bool use_color(bool no_color_flag)
{
    const char* no_color = std::getenv("NO_COLOR");
    return !no_color_flag && (no_color == nullptr || *no_color == '\0') && isatty(STDOUT_FILENO) != 0;
}

void add_verdict_files(CLI::App& sub, engine::VerdictFiles& files)
{
    sub.add_option("--prometheus", files.prometheus,
           "Also write the result as node_exporter textfile metrics to FILE (atomically)")
        ->type_name("FILE");
    sub.add_option("--junit", files.junit, "Also write the result as JUnit XML to FILE (atomically), for CI")
        ->type_name("FILE");
}

void add_judging_options(CLI::App& sub, engine::JudgingOptions& options, bool fail_on)
{
    sub.add_flag("--quiet", options.quiet, "Print only problems and the summary");
    add_verdict_files(sub, options.files);
    if (fail_on) {
        sub.add_option("--fail-on", options.fail_on,
               "Exit 1 when a finding is this severe or worse: warn or fail (default fail)")
            ->type_name("LEVEL");
    }
}

bool parse_or_help(CLI::App& app, int argc, char** argv, const char* see)
{
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return false;
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            std::cout << app.help();
            return false;
        }
        throw base::Error(fmt::format("{}; see {}", e.what(), see));
    }
    base::refuse_empty_values(app);
    for (const CLI::App* sub : app.get_subcommands()) {
        base::refuse_empty_values(*sub);
    }
    return true;
}

bool parse_subcommand(CLI::App& app, const CommandLine& line, const std::string& subcommand)
{
    reject_unknown_options(app, line, subcommand);
    std::vector<char*> own = line.own;
    return parse_or_help(
        app, static_cast<int>(own.size()), own.data(), fmt::format("gpudoctor {} --help", subcommand).c_str());
}

bool parse_subcommand(CLI::App& app, int argc, char** argv, const std::string& subcommand)
{
    reject_unknown_options(app, split_at_dashes(argc, argv), subcommand);
    return parse_or_help(app, argc, argv, fmt::format("gpudoctor {} --help", subcommand).c_str());
}

} // namespace doctor::cli
