#include "base/cpu_set.hpp"
#include "base/pci_address.hpp"
#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <optional>

namespace doctor::probes {

namespace {

std::optional<unsigned> number(const std::string& text)
{
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
        return std::nullopt;
    }
    return value;
}

std::vector<std::string> split(const std::string& list)
{
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= list.size()) {
        std::size_t comma = list.find(',', pos);
        std::string word = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        while (!word.empty() && word.front() == ' ') {
            word.erase(0, 1);
        }
        while (!word.empty() && word.back() == ' ') {
            word.pop_back();
        }
        out.push_back(word);
        if (comma == std::string::npos) {
            break;
        }
        pos = comma + 1;
    }
    return out;
}

std::string normal_bus_id(const std::string& text)
{
    auto address = base::PciAddress::parse(text);
    return address ? address->to_string() : text;
}

// Which GPU this process is meant for: {bus id, how we know} or {"", why not} / nullopt when no
// launcher said anything.
struct Assignment {
    std::string bus_id;
    std::string how; ///< "GPURUN_GPU_BUS_ID=..." or "LOCAL_RANK=2, CUDA_VISIBLE_DEVICES=..."
    std::string error; ///< why the assignment could not be resolved
};

std::optional<Assignment> assignment(
    const facts::AffinityFacts& affinity, const facts::TopologyFacts& topology, const facts::NvmlFacts* nvml)
{
    if (auto bus = affinity.variable("GPURUN_GPU_BUS_ID")) {
        return Assignment{normal_bus_id(*bus), "GPURUN_GPU_BUS_ID=" + *bus, ""};
    }
    std::string rank_var;
    std::string rank_text;
    for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
        if (auto value = affinity.variable(name)) {
            rank_var = name;
            rank_text = *value;
            break;
        }
    }
    if (rank_var.empty()) {
        return std::nullopt;
    }
    Assignment a;
    a.how = fmt::format("{}={}", rank_var, rank_text);
    auto rank = number(rank_text);
    if (!rank) {
        a.error = fmt::format("{} is not a number", a.how);
        return a;
    }
    const auto& gpus = topology.gpus;
    std::string entry = std::to_string(*rank);
    if (auto visible = affinity.variable("CUDA_VISIBLE_DEVICES")) {
        a.how += fmt::format(", CUDA_VISIBLE_DEVICES={}", *visible);
        auto entries = split(*visible);
        if (*rank >= entries.size()) {
            a.error = fmt::format("local rank {} has no GPU: CUDA_VISIBLE_DEVICES lists {}", *rank, entries.size());
            return a;
        }
        entry = entries[*rank];
    }
    if (auto index = number(entry)) {
        // CUDA's index order is PCI bus order with CUDA_DEVICE_ORDER=PCI_BUS_ID (gpurun sets it).
        if (*index >= gpus.size()) {
            a.error = fmt::format("GPU index {} but the topology has {} GPU(s)", *index, gpus.size());
            return a;
        }
        a.bus_id = normal_bus_id(gpus[*index].bus_id);
        return a;
    }
    if (entry.rfind("GPU-", 0) == 0 && nvml != nullptr && nvml->gpus) {
        for (const auto& g : *nvml->gpus) {
            const std::string uuid = g.uuid.value_or("");
            if (!uuid.empty() && uuid.rfind(entry, 0) == 0) {
                a.bus_id = normal_bus_id(g.bus_id);
                return a;
            }
        }
    }
    a.error = fmt::format(
        "cannot tell which GPU '{}' is{}", entry, entry.rfind("GPU-", 0) == 0 ? " (NVML does not list that UUID)" : "");
    return a;
}

} // namespace

Probe binding_probe()
{
    Probe p;
    p.name = "binding";
    p.summary = "this process's CPU affinity sits near its GPU (run under gpurun on every rank)";
    p.collectors = {"affinity", "topology", "nvml"};
    p.codes = {
        {"binding.ok", Severity::pass, "the process runs on CPUs near its GPU",
            "Its CPU affinity lies within the CPUs local to its GPU (the GPU's NUMA node or package), so host-side "
            "copies and kernel launches do not cross the CPU interconnect.",
            ""},
        {"binding.not_under_launcher", Severity::skip, "no GPU assignment: not run under a launcher",
            "Neither GPURUN_GPU_BUS_ID nor a local rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK) is set, so there is "
            "no GPU to compare this process's affinity with. The binding probe is meant to run on every rank.",
            "run it under gpurun: gpurun -np 8 gpudoctor check --only binding"},
        {"binding.gpu_unknown", Severity::skip, "the process's GPU could not be found",
            "The launcher's variables name a GPU that the topology does not list (a wrong CUDA_VISIBLE_DEVICES entry, "
            "a MIG UUID, a local rank past the GPU count).",
            "check CUDA_VISIBLE_DEVICES and the launcher's local rank"},
        {"binding.locality_unknown", Severity::skip, "the GPU's CPU locality is unknown",
            "Neither hwloc nor sysfs says which CPUs are near the GPU, so the binding cannot be judged (see "
            "topology.gpu_numa_unknown).",
            ""},
        {"binding.remote", Severity::fail, "the process runs on CPUs far from its GPU",
            "None of the CPUs this process may run on is local to its GPU: every host↔GPU copy and kernel launch "
            "crosses the CPU interconnect (QPI/UPI/Infinity Fabric) and memory is allocated on the wrong NUMA node. "
            "Typical of mpirun --bind-to core with the default mapping, or of ranks that pick a GPU by global rank.",
            "launch with gpurun, or mpirun --map-by socket --bind-to socket with one GPU per local "
            "rank"},
        {"binding.partly_remote", Severity::warn, "the process may run on CPUs far from its GPU",
            "Part of this process's CPU affinity is local to its GPU and part is not; the scheduler may move it to "
            "the far CPUs.",
            "bind to the GPU's NUMA node only (gpurun --bind=numa)"},
        {"binding.unbound", Severity::warn, "the process is not bound on a multi-NUMA node",
            "The process may run on every CPU of a node with several NUMA nodes, so the OS is free to place it and "
            "its memory away from its GPU.",
            "launch with gpurun, or bind each rank to its GPU's NUMA node (numactl, --bind-to)"},
    };
    p.judge = [](const Facts& facts, const Policy&, Findings& out) {
        const facts::AffinityFacts& affinity = *facts.affinity().get();
        const facts::TopologyFacts& topology = *facts.topology().get();
        const nlohmann::json env = facts::write(affinity.env);
        auto a = assignment(affinity, topology, facts.nvml().get());
        if (!a) {
            out.add("binding.not_under_launcher", "host",
                "not checked: no GPU assignment (no GPURUN_GPU_BUS_ID, LOCAL_RANK or "
                "OMPI_COMM_WORLD_LOCAL_RANK); run it under gpurun: gpurun -np 8 gpudoctor check --only "
                "binding");
            return;
        }
        if (topology.gpus.empty()) {
            out.skip(fmt::format("not checked: {}",
                fmt::format("{} but the topology has no NVIDIA GPU ({})", a->how,
                    gpus_unavailable(facts).value_or("hwloc lists none"))));
            return;
        }
        if (!a->error.empty()) {
            out.add(
                "binding.gpu_unknown", "host", fmt::format("not checked: {} ({})", a->error, a->how), {{"env", env}});
            return;
        }
        const facts::TopologyGpu* gpu = nullptr;
        for (const auto& g : topology.gpus) {
            if (normal_bus_id(g.bus_id) == a->bus_id) {
                gpu = &g;
            }
        }
        if (gpu == nullptr) {
            out.add("binding.gpu_unknown", "host",
                fmt::format("not checked: GPU {} ({}) is not in the topology", a->bus_id, a->how), {{"env", env}});
            return;
        }
        const std::string subject = fmt::format("gpu {} ({})", gpu->index, a->bus_id);
        const std::string local_text = gpu->cpus.value_or("");
        if (local_text.empty() || !affinity.cpus) {
            out.add("binding.locality_unknown", subject,
                local_text.empty() ? "not checked: which CPUs are near the GPU is unknown"
                                   : "not checked: this process's affinity could not be read");
            return;
        }
        const base::CpuSet mine = base::CpuSet::parse(*affinity.cpus);
        const base::CpuSet local = base::CpuSet::parse(local_text);
        const base::CpuSet all = base::CpuSet::parse(topology.allowed_cpus.value_or(""));
        const auto& numa_nodes = topology.numa_nodes.value_or(std::vector<facts::TopologyNuma>());
        const auto cpu_numa_nodes = std::count_if(
            numa_nodes.begin(), numa_nodes.end(), [](const facts::TopologyNuma& n) { return n.has_cpus(); });
        const nlohmann::json f = {{"affinity", mine.to_list()}, {"gpu_cpus", local.to_list()},
            {"gpu_numa", facts::write(gpu->numa.value_or(std::vector<unsigned>()))}, {"assignment", a->how}};
        if (!mine.intersects(local)) {
            out.add("binding.remote", subject,
                fmt::format("this process runs on CPUs {}, none of them near its GPU (local CPUs {}; {})",
                    mine.to_list(), local.to_list(), a->how),
                f);
        } else if (local.includes(mine)) {
            out.add("binding.ok", subject,
                fmt::format("CPUs {} are near the GPU (local CPUs {})", mine.to_list(), local.to_list()), f);
        } else if (cpu_numa_nodes > 1 && !all.empty() && mine.includes(all)) {
            out.add("binding.unbound", subject,
                fmt::format("this process may run on all {} CPUs ({}) of a node with {} NUMA nodes; its "
                            "GPU is near CPUs {}",
                    mine.size(), mine.to_list(), cpu_numa_nodes, local.to_list()),
                f);
        } else {
            const base::CpuSet far = mine.minus(local);
            out.add("binding.partly_remote", subject,
                fmt::format("{} of this process's {} CPUs ({}) are not near its GPU (local CPUs {})", far.size(),
                    mine.size(), far.to_list(), local.to_list()),
                f);
        }
    };
    return p;
}

} // namespace doctor::probes
