#pragma once

// The environment variables that change how NCCL, CUDA and MPI pick devices and transports, and the
// network interfaces NCCL could use (the "env" collector). For the nccl-env and frameworks probes
// and fleet.

#include "doctor/facts/schema.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace doctor::facts {

struct EnvFacts {
    /// NCCL_*, CUDA_*, OMPI_MCA_*, UCX_*, ... as set, by name.
    std::map<std::string, std::string> variables;
    std::optional<std::vector<std::string>> interfaces; ///< /sys/class/net, sorted; missing when not listed
    std::optional<std::string> interfaces_error; ///< why they could not be listed

    /// The variable's value, or nullopt when it is not set.
    std::optional<std::string> variable(const std::string& name) const
    {
        const auto it = variables.find(name);
        return it == variables.end() ? std::nullopt : std::optional<std::string>(it->second);
    }

    static constexpr auto fields()
    {
        return std::tuple{field("variables", &EnvFacts::variables, 0, Kind::text),
            field("interfaces", &EnvFacts::interfaces), field("interfaces_error", &EnvFacts::interfaces_error)};
    }
};

} // namespace doctor::facts
