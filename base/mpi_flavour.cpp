#include "base/mpi_flavour.hpp"

namespace base {

std::string mpi_flavour(const std::string& out)
{
    if (out.find("Open MPI") != std::string::npos || out.find("OpenRTE") != std::string::npos) {
        return "Open MPI";
    }
    if (out.find("Intel(R) MPI") != std::string::npos) {
        return "Intel MPI";
    }
    if (out.find("MPICH") != std::string::npos || out.find("HYDRA") != std::string::npos) {
        return "MPICH";
    }
    return "unknown";
}

} // namespace base
