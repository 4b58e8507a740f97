#pragma once

// A host list read the two ways gpurun reads one: as `-H LIST` and as SLURM_JOB_NODELIST inside
// an allocation. Both give the names in order, or the error.
#include "base/error.hpp"
#include "base/launchers/hostfile.hpp"
#include "launcher/slurm_allocation.hpp"

#include <string>
#include <vector>

namespace test_support {

struct ReadHosts {
    std::vector<std::string> names; ///< empty on an error
    std::string error; ///< empty when read

    bool operator==(const ReadHosts& other) const
    {
        return names == other.names && error.empty() == other.error.empty();
    }
};

inline ReadHosts hosts_from_option(const std::string& list)
{
    ReadHosts out;
    try {
        for (const auto& h : base::launchers::parse_host_list(list)) {
            out.names.push_back(h.name);
        }
    } catch (const base::Error& e) {
        out = ReadHosts{{}, e.what()};
    }
    return out;
}

inline ReadHosts hosts_from_variable(const std::string& list)
{
    ReadHosts out;
    try {
        const auto allocation = launcher::slurm_allocation(
            [&list](const char* name) { return std::string(name) == "SLURM_JOB_NODELIST" ? list.c_str() : nullptr; }, 1,
            true);
        for (const auto& h : allocation->hosts) {
            out.names.push_back(h.name);
        }
    } catch (const base::Error& e) {
        out = ReadHosts{{}, e.what()};
    }
    return out;
}

} // namespace test_support
