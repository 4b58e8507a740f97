#pragma once

#include "doctor/cli/subcommand_args.hpp"

namespace doctor::fit {

/// gpudoctor fit: the largest per-GPU batch, by formula (analytic) or by running the user's
/// command (--search -- CMD ARGS...), the learning rate that goes with it, and the split of a
/// global batch over unequal GPUs. `argv[0]` is "fit" (the table's `self`); everything after "--" is the command.
/// Returns the exit status: 0 an answer (even "nothing fits"), 1 the search could not finish,
/// 2 usage or input error.
int run_fit(const cli::Subcommand& self, int argc, char** argv);

} // namespace doctor::fit
