#pragma once

// Command-line helpers every gpudoctor subcommand shares: CLI11 parsing with gpudoctor's own
// errors, and the command lines of subcommands that take a command of the user's after "--"
// (fit --search, monitor), parsed by the subcommand itself before gpudoctor's main parser.

#include "doctor/engine/verdict.hpp"

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace doctor::cli {

/// One row of gpudoctor's subcommand table (doctor/run_gpudoctor.cpp): its word, the line
/// `gpudoctor --help` shows for it (and its own --help starts with, unless it has a longer
/// description), and what runs it. `run` gets the row itself and the subcommand's argv, argv[0]
/// being its name; it returns the exit status and throws base::Error for usage and input errors.
struct Subcommand {
    const char* name;
    const char* summary;
    int (*run)(const Subcommand& self, int argc, char** argv);
};

/// Parses argv with `app`; prints the help and returns false when it was asked for. A parse error
/// throws base::Error "the error; see `see`" (e.g. "gpudoctor fit --help").
bool parse_or_help(CLI::App& app, int argc, char** argv, const char* see);

/// Colour on standard output: a terminal, no --no-color, NO_COLOR unset or empty.
bool use_color(bool no_color_flag);

/// Adds --prometheus FILE and --junit FILE to `sub` (fleet has only these).
void add_verdict_files(CLI::App& sub, engine::VerdictFiles& files);

/// Adds --quiet, --prometheus FILE and --junit FILE to `sub`, and --fail-on LEVEL with `fail_on`.
void add_judging_options(CLI::App& sub, engine::JudgingOptions& options, bool fail_on);

/// A subcommand's argv, split at its first "--".
struct CommandLine {
    std::vector<char*> own; ///< the subcommand's name (argv[0]) and its options, for CLI11
    std::vector<std::string> command; ///< the words after "--", untouched
    bool dashes = false; ///< a "--" was given (with or without words after it)
};

CommandLine split_at_dashes(int argc, char** argv);

/// Throws base::Error "SUBCOMMAND: unknown option --x (did you mean --y?); see gpudoctor
/// SUBCOMMAND --help" for the first word of `line.own` that starts with "--" and is no option of
/// `app` (CLI11 alone would not suggest the closest one).
void reject_unknown_options(const CLI::App& app, const CommandLine& line, const std::string& subcommand);

/// A subcommand's whole parse: unknown options named with the closest one, then `app` parses
/// `line.own`; false when the help was asked for (and printed).
bool parse_subcommand(CLI::App& app, const CommandLine& line, const std::string& subcommand);

/// The same for a subcommand that takes no command after "--": argv as it came.
bool parse_subcommand(CLI::App& app, int argc, char** argv, const std::string& subcommand);

} // namespace doctor::cli
