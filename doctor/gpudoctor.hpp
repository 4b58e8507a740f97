#pragma once

#include <string>

namespace CLI {
class App;
}

namespace doctor {

/// Parses argv with `app`; prints the help and returns false when it was asked for. A parse error
/// throws probes::Error "the error; see `see`" (e.g. "gpudoctor fit --help").
bool parse_or_help(CLI::App& app, int argc, char** argv, const char* see);

/// gpudoctor's whole run: parse the subcommand, collect, judge, report. Returns the exit status:
/// 0 fit (warnings allowed), 1 a check failed, 2 usage or input error, 3 the doctor itself could
/// not run.
int run_gpudoctor(int argc, char** argv);

} // namespace doctor
