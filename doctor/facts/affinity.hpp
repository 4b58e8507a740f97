#pragma once

// This process's CPU affinity and which GPU it is meant for, as gpurun and MPI launchers tell it
// through the environment (the "affinity" collector). For the binding probe, run on every rank.

#include "doctor/facts/schema.hpp"

#include <map>
#include <optional>
#include <string>

namespace doctor::facts {

struct AffinityFacts {
    std::optional<std::string> cpus; ///< cpulist of sched_getaffinity; null when it failed
    /// GPURUN_GPU_BUS_ID, GPURUN_GPU, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, CUDA_VISIBLE_DEVICES
    /// and CUDA_DEVICE_ORDER, those that are set.
    std::map<std::string, std::string> env;

    /// The variable's value, or nullopt when it is not set.
    std::optional<std::string> variable(const std::string& name) const
    {
        const auto it = env.find(name);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    }

    static constexpr auto fields()
    {
        return std::tuple{nullable("cpus", &AffinityFacts::cpus), field("env", &AffinityFacts::env, 0, Kind::text)};
    }
};

} // namespace doctor::facts
