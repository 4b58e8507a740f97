#pragma once

// gpudoctor's subcommands that have no folder of their own, one file each: its options and its
// run. The table that names them (and fit and monitor) is in doctor/run_gpudoctor.cpp.

#include "doctor/cli/subcommand_args.hpp"

#include <string>

namespace doctor::commands {

/// Each returns the exit status (see its --help) and throws base::Error for usage and input
/// errors (exit 2), base::Unavailable where gpudoctor itself cannot run (exit 3).
int run_check(const cli::Subcommand& self, int argc, char** argv);
int run_snapshot(const cli::Subcommand& self, int argc, char** argv);
int run_fleet(const cli::Subcommand& self, int argc, char** argv);
int run_list(const cli::Subcommand& self, int argc, char** argv);
int run_explain(const cli::Subcommand& self, int argc, char** argv);
int run_topo(const cli::Subcommand& self, int argc, char** argv);
int run_nccl_log(const cli::Subcommand& self, int argc, char** argv);
int run_profile(const cli::Subcommand& self, int argc, char** argv);

/// Every finding code with its title, one a line ("list --codes", "explain" without a code), or as
/// JSON with the explanation and remedy too.
std::string render_code_list(bool json);

} // namespace doctor::commands
