#pragma once

// The Python interpreter the training jobs run, for the probes that ask it (gpudoctor check's
// frameworks probe, fit's measured CUDA context).

#include <map>
#include <string>

namespace base {

/// This process's environment, name to value (of a name set twice, the first, as getenv reads it).
std::map<std::string, std::string> environment();

/// What find_python found.
struct Interpreter {
    std::string file; ///< the interpreter to run; "" when none was found
    std::string shim; ///< the pyenv shim in PATH it stands for, if any
    std::string error; ///< why there is none: "python3 is not in PATH (set GPUKIT_PYTHON ...)"
};

/// GPUKIT_PYTHON (searched in env's PATH), else python3 in env's PATH; where that is a pyenv shim,
/// the interpreter the shim would run, found by pyenv's own rules (PYENV_VERSION, else
/// .python-version in PYENV_DIR or PWD and their parents, else PYENV_ROOT/version, else the
/// system's python3 past the shims). A shim is a bash script that starts pyenv, some 0.1 to 0.5 s
/// before the interpreter: too slow for check --quick.
Interpreter find_python(const std::map<std::string, std::string>& env);

} // namespace base
