#pragma once

#include <string>

namespace doctor {

/// gpudoctor's whole run: parse the subcommand, collect, judge, report. Returns the exit status:
/// 0 fit (warnings allowed), 1 a check failed, 2 usage or input error, 3 the doctor itself could
/// not run.
int run_gpudoctor(int argc, char** argv);

} // namespace doctor
