// What an NCCL log shows: the tallies of the state machine (state.hpp) turned into the analysis
// and its findings.

#include "base/nccl/findings.hpp"
#include "base/nccl/log.hpp"
#include "base/nccl/state.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace base::nccl {

namespace {

// What was left out past the limits, and the limits, as the finding nccl.truncated says it.
Finding truncated(const LeftOut& left, const Limits& limits)
{
    struct Part {
        std::uint64_t count;
        const char* key;
        std::size_t limit;
        const char* one;
        const char* many;
        const char* past;
    };
    const Part parts[] = {
        {left.hosts, "hosts", limits.hosts, "record", "records", "from hosts past the first {}"},
        {left.processes, "processes", limits.processes, "record", "records", "from processes past the first {}"},
        {left.threads, "threads", limits.threads, "record", "records", "from threads past the first {}"},
        {left.ranks, "ranks", limits.ranks, "Init line", "Init lines", "of ranks past the first {}"},
        {left.communicators, "communicators", limits.communicators, "Init line", "Init lines",
            "of communicators past the first {}"},
        {left.communicator_ranks, "communicator_ranks", limits.communicator_ranks, "Init line", "Init lines",
            "past {} ranks in all communicators"},
        {left.connections, "connections", limits.connections, "connection line", "connection lines",
            "past {} distinct connections"},
        {left.rings, "ring_ranks", limits.ring_ranks, "ring order", "ring orders", "past {} ranks in all rings"},
        {left.other, "versions_and_variables", 0, "line", "lines", "past {} NCCL versions or {} NCCL variables"},
    };
    std::string detail;
    nlohmann::json facts = nlohmann::json::object();
    for (const Part& p : parts) {
        if (p.count == 0) {
            continue;
        }
        const bool other = p.limit == 0;
        detail += fmt::format("{}{} {}", detail.empty() ? "" : "; ", plural(p.count, p.one, p.many),
            other ? fmt::format(fmt::runtime(p.past), max_versions, max_env_names)
                  : fmt::format(fmt::runtime(p.past), p.limit));
        facts[p.key] = other ? nlohmann::json{{"left_out", p.count}, {"limit_versions", max_versions},
                                   {"limit_variables", max_env_names}}
                             : nlohmann::json{{"left_out", p.count}, {"limit", p.limit}};
    }
    Finding f = make_finding(truncated_code(), "log",
        fmt::format("the analysis is incomplete: {} past its limits {} left out ({})",
            plural(left.total(), "line", "lines"), left.total() == 1 ? "was" : "were", detail),
        Where{}, left.total());
    f.facts = std::move(facts);
    return f;
}

/// Union-find over the inputs: which are one job's.
class InputSets {
public:
    explicit InputSets(std::size_t n) : m_parent(n) { std::iota(m_parent.begin(), m_parent.end(), std::size_t{0}); }
    std::size_t find(std::size_t i)
    {
        while (m_parent[i] != i) {
            m_parent[i] = m_parent[m_parent[i]];
            i = m_parent[i];
        }
        return i;
    }
    void join(std::size_t x, std::size_t y)
    {
        x = find(x);
        y = find(y);
        if (x != y) {
            m_parent[std::max(x, y)] = std::min(x, y);
        }
    }

private:
    std::vector<std::size_t> m_parent;
};

/// Whether two inputs may be of one job by their NCCL versions: one shows none, or they share one.
bool versions_agree(const InputFacts& x, const InputFacts& y)
{
    return x.versions.empty() || y.versions.empty() ||
        std::any_of(
            x.versions.begin(), x.versions.end(), [&](const std::string& v) { return y.versions.count(v) > 0; });
}

/// Which job each input is of, and which communicators without a commId are one.
struct JobPlan {
    std::vector<std::size_t> job_of_input;
    std::size_t jobs = 0;
    std::vector<std::size_t> lead_of; ///< per communicator: the one it is part of (itself when it leads)
};

JobPlan plan_jobs(const Analyzer::State& s)
{
    const std::size_t n = s.inputs.size();
    InputSets sets(n);
    JobPlan plan;
    plan.lead_of.resize(s.comms.size());
    std::iota(plan.lead_of.begin(), plan.lead_of.end(), std::size_t{0});
    // A commId names one communicator of one job; a process is of one job.
    for (const CommState& comm : s.comms) {
        for (std::size_t i = 1; comm.by_id && i < comm.inputs.size(); ++i) {
            sets.join(comm.inputs[0], comm.inputs[i]);
        }
    }
    for (const auto& [x, y] : s.shared_processes) {
        sets.join(x, y);
    }
    // Without a commId, the k-th communicator of size N of several inputs is one when their ranks
    // fit together (no rank claimed by two processes) and their NCCL versions agree (per-rank or
    // per-host logs of one job); otherwise they are of different jobs. First fit, in input order.
    std::map<std::pair<int, int>, std::vector<std::size_t>> by_order; // (nranks, k) -> comms
    for (const auto& [key, index] : s.comm_by_ordinal) {
        by_order[{std::get<1>(key), std::get<2>(key)}].push_back(static_cast<std::size_t>(index));
    }
    for (const auto& [order, members] : by_order) {
        struct Group {
            std::size_t lead;
            std::map<int, std::pair<int, long>> ranks; // rank -> (host, pid)
        };
        std::vector<Group> groups;
        for (const std::size_t index : members) {
            const CommState& comm = s.comms[index];
            const std::uint32_t input = comm.inputs.front();
            Group* fit = nullptr;
            for (Group& g : groups) {
                const std::uint32_t lead_input = s.comms[g.lead].inputs.front();
                const bool clash = std::any_of(comm.ranks.begin(), comm.ranks.end(), [&](const auto& rank) {
                    auto other = g.ranks.find(rank.first);
                    return other != g.ranks.end() && other->second != std::pair{rank.second.host, rank.second.pid};
                });
                if (s.one_job || (!clash && versions_agree(s.facts[lead_input], s.facts[input]))) {
                    fit = &g;
                    break;
                }
            }
            if (fit == nullptr) {
                groups.push_back(Group{index, {}});
                fit = &groups.back();
            } else {
                plan.lead_of[index] = fit->lead;
                sets.join(s.comms[fit->lead].inputs.front(), input);
            }
            for (const auto& [rank, rs] : comm.ranks) {
                fit->ranks.emplace(rank, std::pair{rs.host, rs.pid});
            }
        }
    }
    // Inputs the caller knows to be one job's; inputs without NCCL records (PyTorch's own lines,
    // an application's log) go with the job of the others when they make one.
    std::vector<bool> has_records(n, false);
    for (const auto& [key, process] : s.processes) {
        has_records[process.input] = true;
    }
    std::set<std::size_t> roots;
    for (std::size_t i = 0; i < n; ++i) {
        if (s.one_job) {
            sets.join(0, i);
        }
        if (has_records[i]) {
            roots.insert(sets.find(i));
        }
    }
    for (std::size_t i = 0; i < n && roots.size() == 1; ++i) {
        if (!has_records[i]) {
            sets.join(*roots.begin(), i);
        }
    }
    // Jobs are numbered in the order of their first input.
    std::map<std::size_t, std::size_t> job_of_root;
    plan.job_of_input.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto [it, added] = job_of_root.try_emplace(sets.find(i), job_of_root.size());
        plan.job_of_input[i] = it->second;
    }
    plan.jobs = std::max<std::size_t>(job_of_root.size(), 1);
    return plan;
}

/// Adds what one input says to its job's.
void add_facts(InputFacts& to, const InputFacts& from)
{
    Evidence& e = to.evidence;
    const Evidence& o = from.evidence;
    for (auto [mine, theirs] : {std::pair{&e.ib_devices, &o.ib_devices}, std::pair{&e.ib_plugin, &o.ib_plugin},
             std::pair{&e.ib_disabled, &o.ib_disabled}, std::pair{&e.ipoib, &o.ipoib},
             std::pair{&e.no_verbs, &o.no_verbs}, std::pair{&e.p2p_refused, &o.p2p_refused},
             std::pair{&e.gdr_disabled, &o.gdr_disabled}}) {
        note(*mine, *theirs);
    }
    e.gdr_disabled_lines += o.gdr_disabled_lines;
    for (const auto& [name, hit] : from.env) {
        EnvHit& mine = to.env[name];
        const std::uint64_t count = mine.count + hit.count;
        if (mine.count == 0) {
            mine = hit;
        }
        mine.count = count;
    }
    for (const WarnState& w : from.warns) {
        auto [it, added] = to.warn_index.try_emplace(w.kind, to.warns.size());
        if (added) {
            to.warns.push_back(WarnState{w.kind, w.example, 0, w.where});
        }
        to.warns[it->second].count += w.count;
    }
    if (to.watchdogs.count == 0) {
        to.watchdogs.where = from.watchdogs.where;
        to.watchdogs.first = from.watchdogs.first;
    }
    to.watchdogs.count += from.watchdogs.count;
    for (const int rank : from.watchdogs.ranks) {
        if (to.watchdogs.ranks.size() < 4096) {
            to.watchdogs.ranks.insert(rank);
        }
    }
    if (to.comm_errors.count == 0) {
        to.comm_errors.where = from.comm_errors.where;
        to.comm_errors.first = from.comm_errors.first;
    }
    to.comm_errors.count += from.comm_errors.count;
    to.versions.insert(from.versions.begin(), from.versions.end());
    to.lines += from.lines;
    to.records += from.records;
    to.connections += from.connections;
    for (std::size_t t = 0; t < transport_count; ++t) {
        to.counts[t] += from.counts[t];
    }
}

/// One job's share of the state: its communicators (with the names the report gives them) and
/// what its inputs say.
struct JobPart {
    std::vector<const CommState*> comms;
    std::vector<std::string> names;
    InputFacts facts;
};

/// The communicator's connection lines as links between hosts (c.links), each kind tallied into
/// the job's evidence.
void tally_links(const Analyzer::State& s, const CommState& cs, const std::map<int, std::string>& host_of,
    Communicator& c, JobEvidence& e)
{
    auto host_name = [&](int rank) {
        auto it = host_of.find(rank);
        return it == host_of.end() ? std::string("?") : it->second;
    };
    std::map<std::pair<std::string, std::string>, HostPair> pairs;
    auto pair_for = [&](const std::string& from, const std::string& to) -> HostPair& {
        HostPair& hp = pairs[{from, to}];
        hp.from = from;
        hp.to = to;
        return hp;
    };
    for (const auto& [key, edge] : cs.links.edges) {
        const int src = LinkTally::edge_src(key);
        const int dst = LinkTally::edge_dst(key);
        const std::string& path = s.paths[LinkTally::edge_path(key)];
        const Transport t = classify_path(path);
        std::string from = host_name(src);
        std::string to = t == Transport::collnet ? std::string("(collnet)") : host_name(dst);
        if ((t == Transport::p2p || t == Transport::shm) && (from == "?") != (to == "?")) {
            // P2P and SHM join GPUs of one host: a peer that logged nothing is on the local rank's.
            (from == "?" ? from : to) = from == "?" ? to : from;
        }
        HostPair& hp = pair_for(from, to);
        hp.counts[static_cast<std::size_t>(t)] += edge.count;
        hp.paths[path] += edge.count;
        c.connections += edge.count;
        const std::string label = from == to ? from : fmt::format("{} -> {}", from, to);
        if (t == Transport::shm && (from == to || from == "?" || to == "?")) {
            e.shm.add(edge.count, edge.first, from);
        } else if (t == Transport::net_socket) {
            e.socket.add(edge.count, edge.first, label);
        } else if (t == Transport::net_ib) {
            e.ib_no_gdr.add(edge.count, edge.first, label);
        } else if (path.starts_with("P2P/indirect")) {
            e.indirect.add(edge.count, edge.first, from);
        }
    }
    for (const auto& [host, n] : cs.links.nvls_lines) {
        const std::string name = host >= 0 ? s.hosts[static_cast<std::size_t>(host)] : std::string("?");
        HostPair& hp = pair_for(name, name);
        hp.counts[static_cast<std::size_t>(Transport::nvls)] += n;
        hp.paths["NVLS"] += n;
        c.connections += n;
    }
    for (auto& [key, hp] : pairs) {
        c.links.push_back(std::move(hp));
    }
}

/// The first ring order of the communicator that crosses between its hosts more often than needed.
void tally_rings(const CommState& cs, const std::string& comm_name, std::map<int, std::string>& host_of, JobEvidence& e)
{
    for (const auto& ring : cs.links.rings) {
        if (static_cast<int>(ring.size()) != cs.nranks ||
            !std::all_of(ring.begin(), ring.end(), [&](int r) { return host_of.count(r) > 0; })) {
            continue;
        }
        std::set<std::string> ring_hosts;
        std::size_t crossings = 0;
        for (std::size_t i = 0; i < ring.size(); ++i) {
            ring_hosts.insert(host_of[ring[i]]);
            crossings += host_of[ring[i]] != host_of[ring[(i + 1) % ring.size()]] ? 1 : 0;
        }
        if (ring_hosts.size() > 1 && crossings > ring_hosts.size()) {
            e.ring_cross.add(1, cs.links.first_ring, comm_name);
            if (e.ring_detail.empty()) {
                e.ring_detail = fmt::format("a ring of communicator {} crosses between its {} hosts {} times (the "
                                            "least is {})",
                    comm_name, ring_hosts.size(), crossings, ring_hosts.size());
            }
            break;
        }
    }
}

/// One communicator as the report shows it, its links tallied into the job's evidence.
Communicator summarise_comm(
    const Analyzer::State& s, const CommState& cs, const std::string& comm_name, std::size_t job_index, JobEvidence& e)
{
    const InputFacts& facts = e.facts;
    Communicator c;
    c.id = comm_name;
    c.job = job_index;
    c.nranks = cs.nranks;
    c.first = e.where(cs.first);
    c.nvls_channels = cs.nvls_channels;
    c.collnet_channels = cs.collnet_channels;
    std::map<int, std::string> host_of;
    std::set<std::string, std::less<>> versions;
    for (const auto& [rank, rs] : cs.ranks) {
        const std::string host = rs.host >= 0 ? s.hosts[static_cast<std::size_t>(rs.host)] : std::string("?");
        host_of[rank] = host;
        c.ranks.push_back(
            Rank{rank, host, rs.pid, rs.cuda_dev, rs.nvml_dev, rs.bus_id, rs.complete, e.where(rs.where)});
        auto p = s.processes.find({rs.host, rs.pid});
        if (p != s.processes.end() && !p->second.version.empty()) {
            versions.insert(p->second.version);
        }
        if (rs.started && !rs.complete) {
            e.incomplete.add(1, rs.start_where, host);
            if (e.incomplete.count <= 4) {
                e.incomplete_detail +=
                    fmt::format("{}rank {} ({}:{})", e.incomplete_detail.empty() ? "" : ", ", rank, host, rs.pid);
            }
        }
    }
    for (const auto& [rank, host] : cs.links.local_host) {
        host_of.emplace(rank, s.hosts[static_cast<std::size_t>(host)]);
    }
    if (versions.empty() && facts.versions.size() == 1) {
        versions.insert(facts.versions.begin(), facts.versions.end());
    }
    c.versions.assign(versions.begin(), versions.end());
    if (versions.size() > 1) {
        std::string joined;
        for (const auto& v : versions) {
            joined += (joined.empty() ? "" : ", ") + v;
        }
        e.mismatch.add(1, cs.first, comm_name);
        if (e.mismatch_detail.empty()) {
            e.mismatch_detail = fmt::format("communicator {} mixes NCCL {}", comm_name, joined);
        }
    }
    std::set<std::string> hosts;
    for (const auto& [rank, host] : host_of) {
        hosts.insert(host);
    }
    c.hosts.assign(hosts.begin(), hosts.end());

    tally_links(s, cs, host_of, c, e);
    tally_rings(cs, comm_name, host_of, e);
    return c;
}

/// Judges one job: its communicators go to `a.communicators`, its findings to `job` (one rule per
/// code: findings.cpp).
void judge_job(const Analyzer::State& s, const JobPart& part, std::size_t job_index, Job& job, Analysis& a)
{
    JobEvidence e(part.facts, job, [&](Mark m) { return m.known() ? Where{s.inputs[m.input], m.line} : Where{}; });
    for (std::size_t k = 0; k < part.comms.size(); ++k) {
        job.communicators.push_back(a.communicators.size());
        a.communicators.push_back(summarise_comm(s, *part.comms[k], part.names[k], job_index, e));
    }
    for (const auto& w : part.facts.warns) {
        job.warnings.push_back(WarnGroup{w.kind, job_index, w.example, w.count, e.where(w.where)});
    }
    std::stable_sort(job.warnings.begin(), job.warnings.end(),
        [](const WarnGroup& x, const WarnGroup& y) { return x.count > y.count; });
    for (const auto& rule : job_rules()) {
        rule.judge(e, rule.code, job.findings);
    }
    std::stable_sort(job.findings.begin(), job.findings.end(),
        [](const Finding& x, const Finding& y) { return badness(x.severity) > badness(y.severity); });
}

} // namespace

Analysis Analyzer::analysis() const
{
    const State& s = *m_state;
    Analysis a;
    a.inputs = s.inputs;
    a.skipped = s.skipped;
    a.lines = s.lines;
    a.records_left_out = s.left_out.total();
    a.nccl_versions.assign(s.versions.begin(), s.versions.end());

    const JobPlan plan = plan_jobs(s);
    auto job_of = [&](std::uint32_t input) { return plan.job_of_input.empty() ? 0 : plan.job_of_input[input]; };
    std::vector<JobPart> parts(plan.jobs);
    a.jobs.resize(plan.jobs);
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
        add_facts(parts[job_of(static_cast<std::uint32_t>(i))].facts, s.facts[i]);
        a.jobs[job_of(static_cast<std::uint32_t>(i))].inputs.push_back(s.inputs[i]);
    }

    // Communicators without a commId that are one (per-rank logs) are joined, and connection
    // lines no Init line claimed go to the last communicator of their process, or to an unnamed
    // one of its job. Only the communicators that change are copied.
    std::map<std::size_t, CommState> copies;
    auto writable = [&](std::size_t index) -> CommState& {
        auto [it, added] = copies.try_emplace(index);
        if (added) {
            it->second = s.comms[index];
        }
        return it->second;
    };
    for (std::size_t i = 0; i < s.comms.size(); ++i) {
        if (plan.lead_of[i] == i) {
            continue;
        }
        const CommState& from = s.comms[i];
        CommState& to = writable(plan.lead_of[i]);
        for (const auto& [rank, rs] : from.ranks) {
            to.ranks.emplace(rank, rs);
        }
        to.links.merge(from.links);
        to.nvls_channels = std::max(to.nvls_channels, from.nvls_channels);
        to.collnet_channels = std::max(to.collnet_channels, from.collnet_channels);
        if (from.first.before(to.first)) {
            to.first = from.first;
        }
    }
    std::vector<CommState> orphans(plan.jobs);
    for (const auto& [key, thread] : s.threads) {
        if (thread.pending.empty()) {
            continue;
        }
        auto it = s.processes.find({key.host, key.pid});
        if (it != s.processes.end() && it->second.last_comm >= 0) {
            writable(plan.lead_of[static_cast<std::size_t>(it->second.last_comm)]).links.merge(thread.pending);
        } else {
            orphans[it != s.processes.end() ? job_of(it->second.input) : 0].links.merge(thread.pending);
        }
    }
    std::size_t shown = 0; // communicators without a commId are "#N" by their place among those shown
    for (std::size_t i = 0; i < s.comms.size(); ++i) {
        if (plan.lead_of[i] != i) {
            continue;
        }
        ++shown;
        auto copy = copies.find(i);
        const CommState& comm = copy != copies.end() ? copy->second : s.comms[i];
        JobPart& part = parts[job_of(comm.inputs.front())];
        part.comms.push_back(&comm);
        part.names.push_back(comm.by_id ? comm.id : fmt::format("#{}", shown));
    }
    for (std::size_t j = 0; j < plan.jobs; ++j) {
        if (!orphans[j].links.empty()) {
            parts[j].comms.push_back(&orphans[j]);
            parts[j].names.emplace_back("?");
        }
    }

    // Hosts, processes and ranks, of each job and of all.
    std::set<int> hosts;
    std::vector<std::set<int>> job_hosts(plan.jobs);
    std::vector<unsigned> record_devices(plan.jobs, 0);
    for (const auto& [key, process] : s.processes) {
        if (key.host < 0) {
            continue;
        }
        Job& job = a.jobs[job_of(process.input)];
        hosts.insert(key.host);
        job_hosts[job_of(process.input)].insert(key.host);
        ++a.processes;
        ++job.processes;
        a.processes_init_complete += process.init_complete ? 1 : 0;
        job.processes_init_complete += process.init_complete ? 1 : 0;
        record_devices[job_of(process.input)] += static_cast<unsigned>(std::popcount(process.record_devices));
    }
    a.hosts = static_cast<unsigned>(hosts.size());
    for (const auto& [host, pid, dev] : s.devices) {
        auto it = s.processes.find({host, pid});
        ++a.jobs[it != s.processes.end() ? job_of(it->second.input) : 0].ranks;
    }
    for (std::size_t j = 0; j < plan.jobs; ++j) {
        Job& job = a.jobs[j];
        if (job.ranks == 0) {
            job.ranks = record_devices[j];
        }
        a.ranks += job.ranks;
        for (const int h : job_hosts[j]) {
            job.hosts.push_back(s.hosts[static_cast<std::size_t>(h)]);
        }
        std::sort(job.hosts.begin(), job.hosts.end());
        const InputFacts& facts = parts[j].facts;
        job.nccl_versions.assign(facts.versions.begin(), facts.versions.end());
        job.records = facts.records;
        job.connections = facts.connections;
        std::copy(std::begin(facts.counts), std::end(facts.counts), std::begin(job.counts));
        a.records += job.records;
        a.connections += job.connections;
        for (std::size_t t = 0; t < transport_count; ++t) {
            a.counts[t] += job.counts[t];
        }
        judge_job(s, parts[j], j, job, a);
        a.warnings.insert(a.warnings.end(), job.warnings.begin(), job.warnings.end());
    }

    // The findings of all jobs, each saying its job when there are several.
    if (a.records_left_out > 0) {
        a.findings.push_back(truncated(s.left_out, s.limits));
    }
    for (std::size_t j = 0; j < plan.jobs; ++j) {
        for (Finding& f : a.jobs[j].findings) {
            if (plan.jobs > 1) {
                f.facts["job"] = j + 1;
                f.subject = f.subject == "job" || f.subject == "log" ? fmt::format("job {}", j + 1)
                                                                     : fmt::format("job {}: {}", j + 1, f.subject);
            }
            a.findings.push_back(f);
        }
    }
    std::stable_sort(a.findings.begin(), a.findings.end(),
        [](const Finding& x, const Finding& y) { return badness(x.severity) > badness(y.severity); });
    return a;
}

} // namespace base::nccl
