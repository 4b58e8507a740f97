#pragma once

#include <string>

namespace base {

/// Which MPI a `mpirun --version` output is from: "Open MPI", "Intel MPI", "MPICH" or "unknown"
/// (the order horovodrun checks in). Shared by gpurun's launcher detection and gpudoctor's probe.
std::string mpi_flavour(const std::string& version_output);

} // namespace base
