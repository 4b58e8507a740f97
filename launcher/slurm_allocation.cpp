#include "launcher/slurm_allocation.hpp"

#include "base/error.hpp"
#include "base/launchers/hostfile.hpp"
#include "base/launchers/node_list.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <limits>

namespace launcher {

namespace {

using base::Error;
using base::quote_input;

/// One count as Slurm writes it ("8"), through the count-list reader so that every Slurm count is
/// read one way.
unsigned one_count(const std::string& variable, std::string_view text)
{
    std::vector<unsigned> counts;
    try {
        counts = launchers::expand_count_list(text, 2);
    } catch (const Error&) {
    }
    if (counts.size() != 1) {
        throw Error(fmt::format("{}={}: expected a count such as 8", variable, quote_input(text)));
    }
    return counts.front();
}

std::optional<std::string> variable(const std::function<const char*(const char*)>& env, const char* name)
{
    const char* value = env(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    return std::string(value);
}

/// The GPUs of the node gpurun runs on, as Slurm tells it, and which variable told it.
struct NodeGpus {
    unsigned count = 0;
    std::string told_by;
};

std::optional<NodeGpus> gpus_of_this_node(const std::function<const char*(const char*)>& env)
{
    std::optional<NodeGpus> on_node;
    if (auto value = variable(env, "SLURM_GPUS_ON_NODE")) {
        on_node = NodeGpus{one_count("SLURM_GPUS_ON_NODE", *value), "SLURM_GPUS_ON_NODE=" + *value};
    }
    std::optional<NodeGpus> job_gpus;
    if (auto value = variable(env, "SLURM_JOB_GPUS")) {
        // The GPUs' ids on this node: "0,1,2,3".
        unsigned n = 0;
        std::size_t start = 0;
        try {
            while (true) {
                const std::size_t comma = value->find(',', start);
                one_count("SLURM_JOB_GPUS", std::string_view(*value).substr(start, comma - start));
                ++n;
                if (comma == std::string::npos) {
                    break;
                }
                start = comma + 1;
            }
        } catch (const Error&) {
            throw Error(fmt::format("SLURM_JOB_GPUS={}: expected GPU ids such as 0,1,2,3", quote_input(*value)));
        }
        job_gpus = NodeGpus{n, "SLURM_JOB_GPUS=" + *value};
    }
    if (on_node && job_gpus && on_node->count != job_gpus->count) {
        throw Error(fmt::format("the Slurm allocation's variables disagree: {} but {} lists {} GPU{}; run gpurun in "
                                "the allocation's own environment, or pass --gpus-per-node N",
            quote_input(on_node->told_by), quote_input(job_gpus->told_by), job_gpus->count,
            job_gpus->count == 1 ? "" : "s"));
    }
    return on_node ? on_node : job_gpus;
}

} // namespace

unsigned slurm_gpu_count(const std::string& variable, const std::string& value)
{
    std::uint64_t total = 0;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = value.find(',', start);
        const std::string_view item = std::string_view(value).substr(start, comma - start);
        const std::size_t colon = item.rfind(':');
        const std::string_view count = colon == std::string_view::npos ? item : item.substr(colon + 1);
        std::vector<unsigned> n;
        try {
            n = launchers::expand_count_list(count, 2);
        } catch (const Error&) {
        }
        if (n.size() != 1 || colon == 0) {
            throw Error(fmt::format(
                "{}={}: expected GPUs per node as [TYPE:]COUNT, such as 8 or a100:8", variable, quote_input(value)));
        }
        total += n.front();
        if (total > std::numeric_limits<unsigned>::max()) {
            throw Error(fmt::format("{}={}: too many GPUs", variable, quote_input(value)));
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return static_cast<unsigned>(total);
}

std::optional<SlurmAllocation> slurm_allocation(
    const std::function<const char*(const char*)>& env, unsigned ranks_per_gpu, bool cpu_only)
{
    const char* nodes = env("SLURM_JOB_NODELIST");
    if (nodes == nullptr) {
        return std::nullopt;
    }
    SlurmAllocation out;
    for (auto& name : launchers::parse_node_names(nodes, "SLURM_JOB_NODELIST")) {
        out.hosts.push_back(HostSlots{std::move(name), std::nullopt});
    }

    // GPUs per node: the request itself, else what this node got.
    std::optional<NodeGpus> gpus;
    if (auto value = variable(env, "SLURM_GPUS_PER_NODE")) {
        gpus = NodeGpus{slurm_gpu_count("SLURM_GPUS_PER_NODE", *value), "SLURM_GPUS_PER_NODE=" + *value};
    }
    const auto here = gpus_of_this_node(env);
    if (gpus && here && gpus->count != here->count) {
        throw Error(fmt::format("the Slurm allocation's variables disagree: {} but {}; run gpurun in the "
                                "allocation's own environment, or pass --gpus-per-node N",
            quote_input(gpus->told_by), quote_input(here->told_by)));
    }
    if (!gpus && here) {
        gpus = here;
        if (out.hosts.size() > 1) {
            out.notes.push_back(fmt::format(
                "Slurm tells this node's GPUs only ({}): each host is taken to have as many; pass --gpus-per-node N "
                "if they differ",
                here->told_by));
        }
    }

    // Task counts, where the user chose them.
    std::optional<std::vector<unsigned>> tasks;
    const bool tasks_chosen = variable(env, "SLURM_NTASKS") || variable(env, "SLURM_NTASKS_PER_NODE");
    if (auto value = variable(env, "SLURM_TASKS_PER_NODE"); value && tasks_chosen) {
        std::vector<unsigned> counts;
        try {
            counts = launchers::expand_count_list(*value, out.hosts.size() + 1);
        } catch (const Error& e) {
            throw Error(fmt::format("SLURM_TASKS_PER_NODE: {}", e.what()));
        }
        if (counts.size() != out.hosts.size()) {
            throw Error(fmt::format("the Slurm allocation's variables disagree: SLURM_TASKS_PER_NODE={} counts "
                                    "tasks for {} node{} but SLURM_JOB_NODELIST={} has {}; run gpurun in the "
                                    "allocation's own environment, or pass -H with slots",
                quote_input(*value), counts.size(), counts.size() == 1 ? "" : "s", quote_input(nodes),
                out.hosts.size()));
        }
        tasks = std::move(counts);
    }

    if (gpus) {
        out.gpus_per_node = gpus->count;
        out.gpus_told_by = gpus->told_by;
    }
    if (gpus && !cpu_only) {
        const std::uint64_t per_host = std::uint64_t(gpus->count) * ranks_per_gpu;
        for (auto& h : out.hosts) {
            h.slots = static_cast<unsigned>(std::min<std::uint64_t>(per_host, std::numeric_limits<unsigned>::max()));
        }
        if (tasks && std::any_of(tasks->begin(), tasks->end(), [&](unsigned t) { return t != per_host; })) {
            out.notes.push_back(fmt::format("Slurm's tasks per node ({}) are not its GPUs per node ({}): gpurun starts "
                                            "{} rank{} per host, one per GPU{}; pass -np N for fewer",
                launchers::compress_count_list(*tasks), gpus->told_by, per_host, per_host == 1 ? "" : "s",
                ranks_per_gpu > 1 ? fmt::format(" times --ranks-per-gpu {}", ranks_per_gpu) : ""));
        }
    } else if (tasks) {
        for (std::size_t i = 0; i < out.hosts.size(); ++i) {
            out.hosts[i].slots = (*tasks)[i];
        }
    }
    return out;
}

} // namespace launcher
