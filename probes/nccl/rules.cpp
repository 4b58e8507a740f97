// What an NCCL log shows: the tallies of the state machine (state.hpp) turned into the analysis
// and its findings.

#include "probes/nccl/log.hpp"
#include "probes/nccl/state.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace probes::nccl {

namespace {

struct Tally {
    std::uint64_t count = 0;
    Mark first;
    std::set<std::string> hosts;
    void add(std::uint64_t n, Mark where, const std::string& host)
    {
        count += n;
        if (where.before(first)) {
            first = where;
        }
        if (hosts.size() < 8) {
            hosts.insert(host);
        }
    }
};

std::string host_list(const std::set<std::string>& hosts)
{
    std::string out;
    for (const auto& h : hosts) {
        out += (out.empty() ? "" : ", ") + h;
    }
    return out;
}

std::string plural(std::uint64_t n, const char* one, const char* many)
{
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

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
    Finding f = make_finding("nccl.truncated", "log",
        fmt::format("the analysis is incomplete: {} past its limits {} left out ({})",
            plural(left.total(), "line", "lines"), left.total() == 1 ? "was" : "were", detail),
        Where{}, left.total());
    f.facts = std::move(facts);
    return f;
}

} // namespace

Analysis Analyzer::analysis() const
{
    const State& s = *m_state;
    Analysis a;
    a.inputs = s.inputs;
    a.skipped = s.skipped;
    a.lines = s.lines;
    a.records = s.records;
    a.connections = s.connections;
    a.records_left_out = s.left_out.total();
    std::copy(std::begin(s.counts), std::end(s.counts), std::begin(a.counts));
    a.nccl_versions.assign(s.versions.begin(), s.versions.end());
    auto where = [&](Mark m) { return m.known() ? Where{s.inputs[m.input], m.line} : Where{}; };

    // Connection lines no Init line claimed go to the last communicator of their process, or to
    // an unnamed one.
    // Only the communicators that receive such lines are copied.
    std::map<std::size_t, CommState> merged;
    CommState orphan;
    orphan.id = "?";
    for (const auto& [key, thread] : s.threads) {
        if (thread.pending.empty()) {
            continue;
        }
        auto it = s.processes.find({key.host, key.pid});
        if (it != s.processes.end() && it->second.last_comm >= 0) {
            const auto index = static_cast<std::size_t>(it->second.last_comm);
            auto [m, added] = merged.try_emplace(index);
            if (added) {
                m->second = s.comms[index];
            }
            m->second.links.merge(thread.pending);
        } else {
            orphan.links.merge(thread.pending);
        }
    }
    std::vector<const CommState*> comms;
    for (std::size_t i = 0; i < s.comms.size(); ++i) {
        auto m = merged.find(i);
        comms.push_back(m != merged.end() ? &m->second : &s.comms[i]);
    }
    if (!orphan.links.empty()) {
        comms.push_back(&orphan);
    }

    Tally shm;
    Tally socket;
    Tally ib_no_gdr;
    Tally indirect;
    Tally ring_cross;
    std::string ring_detail;
    Tally mismatch;
    std::string mismatch_detail;
    Tally incomplete;
    std::string incomplete_detail;

    for (const CommState* comm : comms) {
        const CommState& cs = *comm;
        Communicator c;
        c.id = cs.id;
        c.nranks = cs.nranks;
        c.first = where(cs.first);
        c.nvls_channels = cs.nvls_channels;
        c.collnet_channels = cs.collnet_channels;
        std::map<int, std::string> host_of;
        std::set<std::string, std::less<>> versions;
        for (const auto& [rank, rs] : cs.ranks) {
            const std::string host = rs.host >= 0 ? s.hosts[static_cast<std::size_t>(rs.host)] : std::string("?");
            host_of[rank] = host;
            c.ranks.push_back(
                Rank{rank, host, rs.pid, rs.cuda_dev, rs.nvml_dev, rs.bus_id, rs.complete, where(rs.where)});
            auto p = s.processes.find({rs.host, rs.pid});
            if (p != s.processes.end() && !p->second.version.empty()) {
                versions.insert(p->second.version);
            }
            if (rs.started && !rs.complete) {
                incomplete.add(1, rs.start_where, host);
                if (incomplete.count <= 4) {
                    incomplete_detail +=
                        fmt::format("{}rank {} ({}:{})", incomplete_detail.empty() ? "" : ", ", rank, host, rs.pid);
                }
            }
        }
        for (const auto& [rank, host] : cs.links.local_host) {
            host_of.emplace(rank, s.hosts[static_cast<std::size_t>(host)]);
        }
        if (versions.empty() && s.versions.size() == 1) {
            versions.insert(s.versions.begin(), s.versions.end());
        }
        c.versions.assign(versions.begin(), versions.end());
        if (versions.size() > 1) {
            std::string joined;
            for (const auto& v : versions) {
                joined += (joined.empty() ? "" : ", ") + v;
            }
            mismatch.add(1, cs.first, cs.id);
            if (mismatch_detail.empty()) {
                mismatch_detail = fmt::format("communicator {} mixes NCCL {}", cs.id, joined);
            }
        }
        std::set<std::string> hosts;
        for (const auto& [rank, host] : host_of) {
            hosts.insert(host);
        }
        c.hosts.assign(hosts.begin(), hosts.end());

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
            const std::string from = host_name(src);
            const std::string to = t == Transport::collnet ? std::string("(collnet)") : host_name(dst);
            HostPair& hp = pair_for(from, to);
            hp.counts[static_cast<std::size_t>(t)] += edge.count;
            hp.paths[path] += edge.count;
            c.connections += edge.count;
            const std::string label = from == to ? from : fmt::format("{} -> {}", from, to);
            if (t == Transport::shm && (from == to || from == "?" || to == "?")) {
                shm.add(edge.count, edge.first, from);
            } else if (t == Transport::net_socket) {
                socket.add(edge.count, edge.first, label);
            } else if (t == Transport::net_ib) {
                ib_no_gdr.add(edge.count, edge.first, label);
            } else if (path.starts_with("P2P/indirect")) {
                indirect.add(edge.count, edge.first, from);
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
                ring_cross.add(1, cs.links.first_ring, cs.id);
                if (ring_detail.empty()) {
                    ring_detail = fmt::format("a ring of communicator {} crosses between its {} hosts {} times (the "
                                              "least is {})",
                        cs.id, ring_hosts.size(), crossings, ring_hosts.size());
                }
                break;
            }
        }
        a.communicators.push_back(std::move(c));
    }

    // Summary counts.
    std::set<int> hosts;
    for (const auto& [key, process] : s.processes) {
        if (key.host < 0) {
            continue;
        }
        hosts.insert(key.host);
        ++a.processes;
        a.processes_init_complete += process.init_complete ? 1 : 0;
    }
    a.hosts = static_cast<unsigned>(hosts.size());
    unsigned record_devices = 0;
    for (const auto& [key, process] : s.processes) {
        record_devices += key.host >= 0 ? static_cast<unsigned>(std::popcount(process.record_devices)) : 0;
    }
    a.ranks = !s.devices.empty() ? static_cast<unsigned>(s.devices.size()) : record_devices;

    for (const auto& w : s.warns) {
        a.warnings.push_back(WarnGroup{w.kind, w.example, w.count, where(w.where)});
    }
    std::stable_sort(
        a.warnings.begin(), a.warnings.end(), [](const WarnGroup& x, const WarnGroup& y) { return x.count > y.count; });

    // Findings.
    auto& f = a.findings;
    const Evidence& e = s.evidence;
    if (a.records_left_out > 0) {
        f.push_back(truncated(s.left_out, s.limits));
    }
    if (s.watchdogs.count > 0) {
        const WatchdogTimeout& w = s.watchdogs.first;
        std::string what = w.op.empty() ? std::string("a collective") : w.op;
        std::string detail = w.timeout_ms >= 0
            ? fmt::format(" after {} ms (timeout {} ms)", w.ran_ms >= 0 ? w.ran_ms : w.timeout_ms, w.timeout_ms)
            : std::string();
        f.push_back(make_finding("nccl.watchdog_timeout", "job",
            fmt::format("PyTorch's NCCL watchdog timed out {}: {} (SeqNum {}){}{}",
                plural(s.watchdogs.count, "time", "times"), what, w.seq, detail,
                s.watchdogs.ranks.empty() ? std::string()
                                          : fmt::format(" on {}", plural(s.watchdogs.ranks.size(), "rank", "ranks"))),
            where(s.watchdogs.where), s.watchdogs.count));
    }
    if (s.comm_errors.count > 0) {
        f.push_back(make_finding("nccl.comm_error", "job",
            fmt::format(
                "an NCCL call failed ({}): {}", plural(s.comm_errors.count, "line", "lines"), s.comm_errors.first),
            where(s.comm_errors.where), s.comm_errors.count));
    }
    if (mismatch.count > 0) {
        f.push_back(
            make_finding("nccl.version_mismatch", "job", mismatch_detail, where(mismatch.first), mismatch.count));
    }
    if (incomplete.count > 0) {
        f.push_back(make_finding("nccl.init_incomplete", "job",
            fmt::format("{} logged Init START but no Init COMPLETE: {}{}", plural(incomplete.count, "rank", "ranks"),
                incomplete_detail, incomplete.count > 4 ? ", ..." : ""),
            where(incomplete.first), incomplete.count));
    }
    if (shm.count > 0) {
        std::string why;
        if (auto it = s.env.find("NCCL_P2P_DISABLE"); it != s.env.end() && it->second.value == "1") {
            why = fmt::format("; NCCL_P2P_DISABLE=1 is set ({})", where(it->second.where).str());
        } else if (auto lv = s.env.find("NCCL_P2P_LEVEL"); lv != s.env.end()) {
            why = fmt::format("; NCCL_P2P_LEVEL={} is set ({})", lv->second.value, where(lv->second.where).str());
        } else if (e.p2p_refused.known()) {
            why = fmt::format("; NCCL could not enable P2P ({})", where(e.p2p_refused).str());
        }
        f.push_back(make_finding("nccl.shm_not_p2p", host_list(shm.hosts),
            fmt::format("shared memory (SHM) instead of GPU peer-to-peer inside a node: {} on {}{}",
                plural(shm.count, "connection line", "connection lines"), host_list(shm.hosts), why),
            where(shm.first), shm.count));
    }
    if (socket.count > 0) {
        Mark ib = e.ib_disabled.known() ? e.ib_disabled
            : e.ib_devices.known()      ? e.ib_devices
            : e.ib_plugin.known()       ? e.ib_plugin
            : e.ipoib.known()           ? e.ipoib
                                        : e.no_verbs;
        const char* shows = e.ib_disabled.known() ? "NCCL_IB_DISABLE=1 is set"
            : e.ib_devices.known()                ? "NCCL listed InfiniBand devices"
            : e.ib_plugin.known()                 ? "an InfiniBand net plugin was loaded"
            : e.ipoib.known()                     ? "a socket interface is IP-over-InfiniBand"
                                                  : "libibverbs could not be loaded";
        const std::string message = fmt::format("TCP sockets between nodes: {} ({})",
            plural(socket.count, "connection line", "connection lines"), host_list(socket.hosts));
        if (ib.known()) {
            f.push_back(make_finding("nccl.socket_not_ib", host_list(socket.hosts),
                fmt::format("{} although the log shows InfiniBand: {} ({})", message, shows, where(ib).str()),
                where(socket.first), socket.count));
        } else {
            f.push_back(make_finding("nccl.net_socket", host_list(socket.hosts),
                message + "; the log shows no InfiniBand or RoCE device", where(socket.first), socket.count));
        }
    }
    if (ib_no_gdr.count > 0) {
        f.push_back(make_finding("nccl.ib_without_gdr", host_list(ib_no_gdr.hosts),
            fmt::format("InfiniBand without GPUDirect RDMA: {} ({}){}",
                plural(ib_no_gdr.count, "connection line", "connection lines"), host_list(ib_no_gdr.hosts),
                e.gdr_disabled.known()
                    ? fmt::format("; NCCL says GPU Direct RDMA Disabled ({})", where(e.gdr_disabled).str())
                    : std::string()),
            where(ib_no_gdr.first), ib_no_gdr.count));
    }
    if (ring_cross.count > 0) {
        f.push_back(
            make_finding("nccl.ring_crosses_nodes", "job", ring_detail, where(ring_cross.first), ring_cross.count));
    }
    for (const auto& [name, hit] : s.env) {
        const bool disables =
            ((name == "NCCL_P2P_DISABLE" || name == "NCCL_IB_DISABLE" || name == "NCCL_SHM_DISABLE") &&
                hit.value == "1") ||
            ((name == "NCCL_P2P_LEVEL" || name == "NCCL_NET_GDR_LEVEL") && (hit.value == "LOC" || hit.value == "0")) ||
            (name == "NCCL_NVLS_ENABLE" && hit.value == "0");
        if (disables) {
            f.push_back(make_finding("nccl.env_disables_transport", name,
                fmt::format("{}={} is set in the environment, which turns a transport off", name, hit.value),
                where(hit.where), hit.count));
        }
    }
    for (const auto& w : a.warnings) {
        f.push_back(make_finding("nccl.warn", "job",
            fmt::format("{} WARN {} of kind \"{}\", the first: {}", w.count, w.count == 1 ? "record" : "records",
                w.kind, w.example),
            w.where, w.count));
    }
    if (indirect.count > 0) {
        f.push_back(make_finding("nccl.p2p_indirect", host_list(indirect.hosts),
            fmt::format("peer-to-peer traffic relayed through another GPU: {} ({})",
                plural(indirect.count, "connection line", "connection lines"), host_list(indirect.hosts)),
            where(indirect.first), indirect.count));
    }
    if (a.connections == 0) {
        const std::string input = a.inputs.empty() ? std::string("the input") : a.inputs.front();
        f.push_back(make_finding("nccl.no_connections", "log",
            a.records == 0 ? fmt::format("no NCCL records in {} ({})", a.inputs.size() == 1 ? input : "the inputs",
                                 plural(a.lines, "line", "lines"))
                           : fmt::format("{} but no connection lines: the log ends before communicators connected, "
                                         "or NCCL_DEBUG_SUBSYS leaves out INIT",
                                 plural(a.records, "NCCL record", "NCCL records")),
            Where{}, 0));
    }
    std::stable_sort(f.begin(), f.end(),
        [](const Finding& x, const Finding& y) { return badness(x.severity) > badness(y.severity); });
    return a;
}

} // namespace probes::nccl
