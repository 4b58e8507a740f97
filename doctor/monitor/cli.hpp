#pragma once

#include "doctor/cli/subcommand_args.hpp"

namespace doctor::monitor {

/// gpudoctor monitor: samples the GPUs through NVML (kernel-active time, memory, power, clock
/// events) every --interval seconds, for --duration seconds, until the command after "--" exits, or
/// until interrupted; a live table like `nvidia-smi dmon` (JSON lines with --json), then the
/// summary and verdict. `argv[0]` is "monitor" (the table's `self`). Returns the exit status: 0 done, the command's own
/// status when one ran, 2 usage or input error, 3 NVML could not be used.
int run_monitor(const cli::Subcommand& self, int argc, char** argv);

} // namespace doctor::monitor
