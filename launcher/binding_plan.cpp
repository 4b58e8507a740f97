#include "launcher/binding_plan.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <numeric>

namespace launcher {

namespace {

using base::CpuSet;
using base::Error;

std::string numa_words(const std::vector<unsigned>& nodes)
{
    if (nodes.empty()) {
        return "no NUMA node";
    }
    return fmt::format("NUMA node{} {}", nodes.size() > 1 ? "s" : "", fmt::join(nodes, ","));
}

struct DomainGroup {
    CpuSet domain;
    std::vector<unsigned> ranks;
};

CpuSet join(const std::vector<CpuSet>& cores, std::size_t first, std::size_t count)
{
    CpuSet out;
    for (std::size_t i = first; i < first + count && i < cores.size(); ++i) {
        out = out.unite(cores[i]);
    }
    return out;
}

/// `counts[j]` of `free_cores` for each rank `ranks[j]`, the cores inside its `nearest[rank]` first:
/// ranks with the same nearest set split its free cores in blocks (in rank order), then every rank
/// tops up from the cores left, in order.
std::vector<CpuSet> nearest_first(const std::vector<CpuSet>& free_cores, const std::vector<unsigned>& ranks,
    const std::vector<CpuSet>& nearest, const std::vector<std::size_t>& counts)
{
    const std::size_t m = ranks.size();
    std::vector<CpuSet> out(m);
    std::vector<std::size_t> have(m, 0);
    std::vector<bool> taken(free_cores.size(), false);
    std::vector<bool> done(m, false);
    for (std::size_t j = 0; j < m; ++j) {
        if (done[j]) {
            continue;
        }
        const CpuSet& near = nearest[ranks[j]];
        std::vector<std::size_t> sharing; // the ranks of the group nearest the same set
        for (std::size_t k = j; k < m; ++k) {
            if (!done[k] && nearest[ranks[k]] == near) {
                sharing.push_back(k);
                done[k] = true;
            }
        }
        std::vector<std::size_t> inside;
        for (std::size_t c = 0; c < free_cores.size(); ++c) {
            if (free_cores[c].minus(near).empty()) {
                inside.push_back(c);
            }
        }
        std::size_t next = 0;
        for (std::size_t i = 0; i < sharing.size(); ++i) {
            const std::size_t k = sharing[i];
            const std::size_t fair = inside.size() / sharing.size() + (i < inside.size() % sharing.size() ? 1 : 0);
            for (std::size_t n = 0; n < std::min(fair, counts[k]) && next < inside.size(); ++n) {
                out[k] = out[k].unite(free_cores[inside[next]]);
                taken[inside[next++]] = true;
                ++have[k];
            }
        }
    }
    std::size_t next = 0;
    for (std::size_t k = 0; k < m; ++k) {
        while (have[k] < counts[k] && next < free_cores.size()) {
            if (!taken[next]) {
                out[k] = out[k].unite(free_cores[next]);
                taken[next] = true;
                ++have[k];
            }
            ++next;
        }
    }
    return out;
}

std::string this_node_gpus_words(std::size_t gpus)
{
    return gpus == 0 ? "has no GPUs" : fmt::format("has {} GPU{}, fewer than their ranks", gpus, gpus == 1 ? "" : "s");
}

} // namespace

bool is_this_node(const std::string& host, const std::string& local_host)
{
    return host == "localhost" || host == "127.0.0.1" || host == local_host;
}

NodePlan plan_node(const base::NodeLayout& layout, const std::vector<base::Gpu>& pool, const PlanOptions& options,
    unsigned local_ranks, const std::string& host)
{
    NodePlan plan;
    const std::string where = !host.empty() ? host : (!layout.hostname.empty() ? layout.hostname : "this node");
    if (local_ranks == 0) {
        return plan;
    }
    const unsigned per_gpu = std::max(1U, options.ranks_per_gpu);
    if (!options.cpu_only) {
        if (pool.empty()) {
            throw Error(fmt::format("no GPUs found on {}; pass --cpu-only to run ranks without GPUs", where));
        }
        const std::size_t capacity = pool.size() * per_gpu;
        if (local_ranks > capacity) {
            const std::size_t needed = (local_ranks + pool.size() - 1) / pool.size();
            throw Error(fmt::format("{} ranks on host {} but only {} GPU{}{}; pass --ranks-per-gpu {} to share "
                                    "GPUs, or lower -np",
                local_ranks, where, pool.size(), pool.size() == 1 ? "" : "s",
                per_gpu > 1 ? fmt::format(" for {} ranks each", per_gpu) : "", needed));
        }
    }

    CpuSet allowed = layout.allowed;
    if (allowed.empty()) {
        for (const auto& core : layout.cores) {
            allowed = allowed.unite(core);
        }
    }
    const auto numa_nodes = layout.cpu_numa_nodes();

    std::vector<CpuSet> domains(local_ranks);
    std::vector<CpuSet> nearest(local_ranks); // the rank's GPU's (or spread) NUMA node, within the domain
    plan.ranks.resize(local_ranks);
    for (unsigned r = 0; r < local_ranks; ++r) {
        RankBinding& b = plan.ranks[r];
        b.local_rank = r;
        CpuSet domain;
        if (!options.cpu_only) {
            const unsigned index = r / per_gpu;
            b.gpu = pool[index];
            b.cuda_index = index;
            b.hca = b.gpu->hca;
            if (b.gpu->locality.known()) {
                domain = b.gpu->locality.cpus.intersect(allowed);
            }
        } else if (!numa_nodes.empty()) {
            // Spread ranks over the NUMA nodes round-robin, like mpirun --map-by numa.
            domain = numa_nodes[r % numa_nodes.size()]->cpus.intersect(allowed);
        }
        if (domain.empty()) {
            domain = allowed;
        }
        nearest[r] = domain;
        if (options.bind == BindMode::socket) {
            domain = layout.packages_of(domain).intersect(allowed);
        }
        domains[r] = domain;
    }

    if (options.bind == BindMode::none) {
        for (auto& b : plan.ranks) {
            b.cpus = allowed;
            b.cores = static_cast<unsigned>(layout.cores_in(allowed).size());
        }
        return plan;
    }

    std::vector<DomainGroup> groups;
    for (unsigned r = 0; r < local_ranks; ++r) {
        auto it =
            std::find_if(groups.begin(), groups.end(), [&](const DomainGroup& g) { return g.domain == domains[r]; });
        if (it == groups.end()) {
            groups.push_back(DomainGroup{domains[r], {r}});
        } else {
            it->ranks.push_back(r);
        }
    }
    // The narrowest domains choose first, so a rank whose GPU sits on a small NUMA node is not
    // crowded out by a rank whose locality is a whole package.
    std::stable_sort(groups.begin(), groups.end(), [&](const DomainGroup& a, const DomainGroup& b) {
        return layout.cores_in(a.domain).size() < layout.cores_in(b.domain).size();
    });

    const unsigned fixed = options.cpus_per_rank;
    const bool cores_mode = options.bind == BindMode::cores;
    CpuSet used;
    for (const auto& group : groups) {
        const std::vector<CpuSet> free_cores = layout.cores_in(group.domain.minus(used));
        const std::size_t m = group.ranks.size();
        const std::vector<unsigned> domain_numa = layout.numa_of(group.domain);
        const unsigned want = fixed > 0 ? fixed : (cores_mode ? 1U : 0U);
        if (fixed > 0 && free_cores.size() < std::size_t(fixed) * m) {
            throw Error(fmt::format("--cpus-per-rank {}: {} rank{} near {} (cpus {}) need {} cores but only {} are "
                                    "free on {}; lower --cpus-per-rank",
                fixed, m, m == 1 ? "" : "s", numa_words(domain_numa), group.domain.to_list(), std::size_t(fixed) * m,
                free_cores.size(), where));
        }
        if (free_cores.size() >= std::max<std::size_t>(m, std::size_t(want) * m)) {
            const std::size_t share = want > 0 ? want : free_cores.size() / m;
            const std::size_t extra = want > 0 ? 0 : free_cores.size() % m;
            std::vector<std::size_t> counts(m);
            for (std::size_t j = 0; j < m; ++j) {
                counts[j] = share + (j < extra ? 1 : 0);
            }
            if (options.bind == BindMode::socket) {
                // Inside the package, each rank's cores come first from its GPU's NUMA node.
                const auto picked = nearest_first(free_cores, group.ranks, nearest, counts);
                for (std::size_t j = 0; j < m; ++j) {
                    plan.ranks[group.ranks[j]].cpus = picked[j];
                }
            } else {
                std::size_t next = 0;
                for (std::size_t j = 0; j < m; ++j) {
                    plan.ranks[group.ranks[j]].cpus = join(free_cores, next, counts[j]);
                    next += counts[j];
                }
            }
        } else {
            const std::size_t domain_cores = layout.cores_in(group.domain).size();
            plan.notes.push_back(fmt::format(
                "{} ranks share the {} core{} of {} (cpus {}) on {}: fewer free cores than "
                "ranks",
                m, domain_cores, domain_cores == 1 ? "" : "s", numa_words(domain_numa), group.domain.to_list(), where));
            for (unsigned r : group.ranks) {
                plan.ranks[r].cpus = group.domain;
                plan.ranks[r].shared = true;
            }
        }
        for (unsigned r : group.ranks) {
            used = used.unite(plan.ranks[r].cpus);
        }
    }

    for (auto& b : plan.ranks) {
        b.numa = layout.numa_of(b.cpus);
        b.cores = static_cast<unsigned>(layout.cores_in(b.cpus).size());
        if (options.cpu_only) {
            b.hca = layout.nearest_hca(b.cpus);
        }
    }
    return plan;
}

std::vector<std::pair<std::string, std::string>> nic_variables(NicBinding binding, const std::string& hca)
{
    std::vector<std::pair<std::string, std::string>> vars;
    if (hca.empty() || binding == NicBinding::none) {
        return vars;
    }
    vars.emplace_back("UCX_NET_DEVICES", hca + ":1");
    if (binding == NicBinding::nccl) {
        vars.emplace_back("NCCL_IB_HCA", "=" + hca + ":1");
    }
    return vars;
}

unsigned node_capacity(const NodeSpec& node, const PlanOptions& options)
{
    if (options.cpu_only) {
        return static_cast<unsigned>(std::max<std::size_t>(1, node.layout.cores.size()));
    }
    return static_cast<unsigned>(node.pool.size()) * std::max(1U, options.ranks_per_gpu);
}

JobPlan plan_job(const std::function<HostSpec(const std::string& host)>& spec_of, const PlanOptions& options,
    std::optional<unsigned> np, const std::vector<HostSlots>& hosts, const std::string& local_host)
{
    JobPlan job;
    std::vector<HostSlots> list = hosts;
    if (list.empty()) {
        list.push_back(HostSlots{local_host, np});
    }
    std::vector<HostSpec> specs;
    specs.reserve(list.size());
    for (const auto& h : list) {
        specs.push_back(spec_of(h.name));
    }
    // Another host without a topology of its own is previewed with this node's.
    auto previews = [&](std::size_t i) { return !specs[i].own && !is_this_node(list[i].name, local_host); };
    auto slots_of = [&](std::size_t i) {
        if (list[i].slots) {
            return *list[i].slots;
        }
        if (previews(i) && !options.cpu_only && specs[i].spec->pool.empty()) {
            throw Error(
                fmt::format("cannot tell how many ranks {} runs: this node has no GPUs to preview it with; give "
                            "its slots (-H {}:8), --gpus-per-node N, or --topology {}=FILE",
                    list[i].name, list[i].name, list[i].name));
        }
        return node_capacity(*specs[i].spec, options);
    };
    if (!np) {
        if (options.cpu_only && std::any_of(list.begin(), list.end(), [](const HostSlots& h) { return !h.slots; })) {
            throw Error("--cpu-only needs -np N: there are no GPUs to count ranks by");
        }
        std::uint64_t total = 0;
        for (std::size_t i = 0; i < list.size() && total <= max_job_ranks; ++i) {
            total += slots_of(i);
        }
        if (total > max_job_ranks) {
            throw Error(fmt::format("the hosts hold more than {} slots in all, more ranks than a job may have; pass "
                                    "-np N, or give fewer hosts or slots",
                max_job_ranks));
        }
        if (total == 0 && !options.cpu_only) {
            throw Error(fmt::format("no GPUs found on {}; pass --cpu-only -np N to run ranks without GPUs",
                local_host.empty() ? "this node" : local_host));
        }
        np = static_cast<unsigned>(total);
    }
    if (*np == 0) {
        throw Error("-np 0: a job needs at least one rank");
    }
    if (*np > max_job_ranks) {
        throw Error(fmt::format("-np {}: more than {} ranks", *np, max_job_ranks));
    }
    unsigned remaining = *np;
    std::uint64_t total_slots = 0;
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const unsigned slots = slots_of(i);
        total_slots += slots;
        const unsigned n = std::min(remaining, slots);
        if (n == 0) {
            continue;
        }
        job.hosts.push_back(HostSlots{list[i].name, n});
        used.push_back(i);
        remaining -= n;
    }
    if (remaining > 0) {
        std::vector<std::string> given;
        for (std::size_t i = 0; i < list.size() && given.size() < 16; ++i) {
            given.push_back(fmt::format("{}:{}", list[i].name, slots_of(i)));
        }
        if (given.size() < list.size()) {
            given.push_back(fmt::format("... {} hosts in all", list.size()));
        }
        throw Error(fmt::format("-np {} but the hosts hold only {} slot{} ({}); add hosts or slots, or lower -np", *np,
            total_slots, total_slots == 1 ? "" : "s", fmt::join(given, ",")));
    }
    // Identical nodes (same spec, same rank count) share one node plan.
    std::map<std::pair<const NodeSpec*, unsigned>, NodePlan> plans;
    job.ranks.reserve(*np);
    unsigned rank = 0;
    bool previewed = false;
    std::vector<std::string> on_host;
    for (std::size_t k = 0; k < job.hosts.size(); ++k) {
        const auto& h = job.hosts[k];
        const HostSpec& spec = specs[used[k]];
        if (previews(used[k]) && !options.cpu_only && *h.slots > node_capacity(*spec.spec, options)) {
            // Too many ranks for this node's GPUs: the host's helper binds them, from its own topology.
            for (unsigned j = 0; j < *h.slots; ++j) {
                RankBinding b;
                b.local_rank = j;
                b.on_host = true;
                job.ranks.push_back(JobRank{rank++, h.name, b});
            }
            on_host.push_back(h.name);
            continue;
        }
        previewed = previewed || previews(used[k]);
        auto key = std::make_pair(spec.spec, *h.slots);
        auto it = plans.find(key);
        if (it == plans.end()) {
            it = plans.emplace(key, plan_node(spec.spec->layout, spec.spec->pool, options, *h.slots, h.name)).first;
            for (const auto& note : it->second.notes) {
                if (std::find(job.notes.begin(), job.notes.end(), note) == job.notes.end()) {
                    job.notes.push_back(note);
                }
            }
        }
        for (const auto& b : it->second.ranks) {
            job.ranks.push_back(JobRank{rank++, h.name, b});
        }
    }
    if (previewed) {
        job.notes.push_back("other hosts are previewed with this node's topology; on each host the rank helper plans "
                            "from that host's own topology");
    }
    if (!on_host.empty()) {
        constexpr std::size_t shown = 8;
        std::string names = fmt::format(
            "{}", fmt::join(on_host.begin(), on_host.begin() + std::ptrdiff_t(std::min(shown, on_host.size())), ", "));
        if (on_host.size() > shown) {
            names += fmt::format(" and {} more", on_host.size() - shown);
        }
        job.notes.push_back(fmt::format("GPUs and cores of the ranks on {} are chosen by the rank helper on each host, "
                                        "from its own topology: this node {}; pass --topology HOST=FILE to preview "
                                        "a host",
            names, this_node_gpus_words(spec_of(local_host).spec->pool.size())));
    }
    return job;
}

JobPlan plan_job(const base::NodeLayout& layout, const std::vector<base::Gpu>& pool, const PlanOptions& options,
    std::optional<unsigned> np, const std::vector<HostSlots>& hosts, const std::string& local_host)
{
    const NodeSpec node{layout, pool};
    return plan_job([&](const std::string&) { return HostSpec{&node, false}; }, options, np, hosts, local_host);
}

} // namespace launcher
