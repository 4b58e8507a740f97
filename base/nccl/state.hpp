#pragma once

// The NCCL log reader's state machine: what the records read so far say, per host, process,
// thread and communicator, fed one line at a time. Internal to base/nccl: log.cpp (reading and
// its threads) feeds it, rules.cpp judges what it holds.

#include "base/nccl/line_scan.hpp"
#include "base/nccl/log.hpp"
#include "base/nccl/model.hpp"
#include "base/nccl/record.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace base::nccl {

inline constexpr std::size_t max_paths = 4096;
inline constexpr std::size_t max_rings = 64;
inline constexpr std::size_t max_ring_length = 1 << 16;
inline constexpr std::size_t max_warn_kinds = 256;
inline constexpr std::size_t max_env_names = 1024;
inline constexpr std::size_t max_versions = 256;
/// Host names are kept up to this length (a DNS name has at most 253 characters).
inline constexpr std::size_t max_host_name = 255;
/// How records whose prefix has an empty host name (`:5202:5683 [0] NCCL INFO`) name their host.
inline constexpr std::string_view unnamed_host = "(unnamed)";
inline constexpr std::size_t read_size = 1 << 20;
/// Input is read in blocks of this size; a line longer than a block is cut, the rest of it skipped.
inline constexpr std::size_t block_size = 4 << 20;

/// The host id of records without a host:pid:tid prefix in an input: below every real id (>= 0)
/// and the -2 of a host past the limit.
constexpr int unknown_host(std::uint32_t input)
{
    return -3 - static_cast<int>(input);
}

struct ProcessKey {
    int host = 0;
    long pid = 0;
    friend bool operator==(const ProcessKey&, const ProcessKey&) = default;
};
struct ThreadKey {
    int host = 0;
    long pid = 0;
    long tid = 0;
    friend bool operator==(const ThreadKey&, const ThreadKey&) = default;
};
// Pids and tids come from the log and may be any number: mixed in unsigned arithmetic, which
// wraps, where signed arithmetic would overflow.
struct KeyHash {
    static std::size_t mix(std::size_t seed, long value) { return seed * 1000003U + static_cast<std::size_t>(value); }
    std::size_t operator()(const ProcessKey& k) const { return mix(static_cast<std::size_t>(k.pid), k.host); }
    std::size_t operator()(const ThreadKey& k) const
    {
        return mix(mix(static_cast<std::size_t>(k.pid), k.tid), k.host);
    }
};

struct RankState {
    int host = -1;
    long pid = 0;
    int cuda_dev = -1;
    int nvml_dev = -1;
    std::string bus_id;
    bool started = false;
    bool complete = false;
    Mark where;
    Mark start_where;
};

struct CommState {
    std::string id;
    bool by_id = false; ///< identified by NCCL's commId, not by the order of inits
    int nranks = 0;
    std::vector<std::uint32_t> inputs; ///< the inputs its Init lines came from
    Mark first;
    std::map<int, RankState> ranks;
    LinkTally links;
    unsigned nvls_channels = 0;
    unsigned collnet_channels = 0;
};

struct ProcessState {
    std::uint32_t input = 0; ///< the input it logged in first
    std::string version;
    std::uint64_t record_devices = 0; ///< bit d: a record came from device d (d < 64)
    int last_comm = -1; ///< the communicator whose Init COMPLETE this process logged last
    std::vector<int> recent_comms; ///< communicators it completed, the latest last (at most 64)
    void completed(int comm);
    bool init_complete = false;
};

inline void ProcessState::completed(int comm)
{
    last_comm = comm;
    init_complete = true;
    std::erase(recent_comms, comm);
    if (recent_comms.size() >= 64) {
        recent_comms.erase(recent_comms.begin());
    }
    recent_comms.push_back(comm);
}

struct ThreadState {
    int open_comm = -1; ///< between Init START and Init COMPLETE
    LinkTally pending; ///< connection lines before any Init line told their communicator
};

struct Evidence {
    Mark ib_devices; ///< NET/IB : Using [0]mlx5_0:1/IB
    Mark ib_plugin; ///< Using network IBext / Loaded net plugin IBext
    Mark ib_disabled; ///< NCCL_IB_DISABLE set by environment to 1
    Mark ipoib; ///< NET/Socket : Using [0]ib0:...
    Mark no_verbs; ///< Failed to open libibverbs
    Mark p2p_refused; ///< Could not enable P2P between dev ...
    Mark gdr_disabled; ///< GPU Direct RDMA Disabled for ...
    std::uint64_t gdr_disabled_lines = 0;
};

struct EnvHit {
    std::string name;
    std::string value;
    Mark where;
    std::uint64_t count = 0;
};

struct WarnState {
    std::string kind;
    std::string example;
    std::uint64_t count = 0;
    Mark where;
};

struct Watchdogs {
    std::uint64_t count = 0;
    Mark where;
    WatchdogTimeout first;
    std::set<int> ranks;
};

struct CommErrors {
    std::uint64_t count = 0;
    Mark where;
    std::string first;
};

/// What one input says beyond its communicators: evidence for findings, NCCL variables, WARNs,
/// PyTorch's lines, versions and counts. Kept per input, so that a job's findings come from its
/// own inputs only.
struct InputFacts {
    Evidence evidence;
    std::map<std::string, EnvHit> env;
    std::vector<WarnState> warns;
    std::unordered_map<std::string, std::size_t> warn_index;
    Watchdogs watchdogs;
    CommErrors comm_errors;
    std::set<std::string, std::less<>> versions;
    std::uint64_t lines = 0;
    std::uint64_t records = 0;
    std::uint64_t connections = 0;
    std::uint64_t counts[transport_count] = {};
};

/// Hashes std::string and std::string_view alike, so lookups need no temporary string.
struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
template <typename T> using TextMap = std::unordered_map<std::string, T, TextHash, std::equal_to<>>;

inline void note(Mark& mark, Mark where)
{
    if (!mark.known()) {
        mark = where;
    }
}

/// What was left out past Limits, by the limit that left it out.
struct LeftOut {
    std::uint64_t hosts = 0; ///< records
    std::uint64_t processes = 0; ///< records
    std::uint64_t threads = 0; ///< records
    std::uint64_t ranks = 0; ///< Init lines
    std::uint64_t communicators = 0; ///< Init lines
    std::uint64_t communicator_ranks = 0; ///< Init lines
    std::uint64_t connections = 0; ///< connection lines
    std::uint64_t rings = 0; ///< ring order lines
    std::uint64_t other = 0; ///< version and environment lines past max_versions, max_env_names
    std::uint64_t total() const
    {
        return hosts + processes + threads + ranks + communicators + communicator_ranks + connections + rings + other;
    }
};

struct Analyzer::State {
    Limits limits;
    LeftOut left_out;
    std::size_t communicator_ranks = 0; ///< RankState entries of all communicators
    std::size_t connection_keys = 0; ///< edges made in all tallies (an upper bound: merges only join)
    std::size_t ring_ranks = 0; ///< ranks in the rings of all tallies

    std::vector<std::string> inputs;
    std::vector<std::string> skipped;
    /// An input read in pieces: its scanner, and the start of a line whose newline is still to come.
    struct Followed {
        LineScanner scanner;
        std::string carry;
    };
    std::unordered_map<std::uint32_t, Followed> followed; ///< inputs read in pieces, by number
    std::uint64_t lines = 0;
    std::uint64_t lines_before = 0; ///< in the inputs before the current one
    // Records, connections and their classes are counted per input (InputFacts) only: the
    // analysis adds them up by job and for all.

    std::deque<std::string> hosts; ///< a deque: its strings never move
    TextMap<int> host_ids;
    std::unordered_map<ProcessKey, ProcessState, KeyHash> processes;
    std::unordered_map<ThreadKey, ThreadState, KeyHash> threads;
    std::set<std::tuple<int, long, int>> devices; ///< (host, pid, cudaDev) from Init lines

    std::vector<std::string> paths;
    TextMap<std::uint32_t> path_ids;

    std::vector<CommState> comms;
    TextMap<int> comm_by_id;
    /// Without a commId: the k-th init of size N on (host, pid, cudaDev) belongs to comm (N, k) of
    /// its input; the analysis joins those of several inputs that are one job's (rules.cpp).
    std::map<std::tuple<int, long, int, int>, int> init_ordinals;
    std::map<std::tuple<std::uint32_t, int, int>, int> comm_by_ordinal;

    std::set<std::string, std::less<>> versions;
    std::deque<InputFacts> facts; ///< per input; a deque: references stay valid as inputs are added
    InputFacts* current_facts = nullptr; ///< the input of the line being read
    /// Processes that logged in two inputs (input pairs, the lower first): one job's inputs.
    std::set<std::pair<std::uint32_t, std::uint32_t>> shared_processes;
    bool one_job = false; ///< every input is of one job (the caller knows)

    // The thread of the last record (unordered_map nodes do not move).
    ThreadState* current_thread = nullptr;
    ProcessState* current_process = nullptr;
    ThreadKey current_key;
    struct ThreadSlot {
        std::string_view host_name; ///< as records print it; points into `hosts`, whose strings stay put
        bool prefixed = false;
        std::uint32_t input = 0;
        ThreadKey key;
        ThreadState* thread = nullptr;
        ProcessState* process = nullptr;
    };
    std::array<ThreadSlot, 256> thread_cache{};

    // Per line, reused.
    NcclRingOrder ring;
    bool fragment_pending = false;
    NcclRecord fragment; ///< a record prefix whose message is not here yet; its views are not kept
    std::string fragment_host;
    Mark fragment_mark;

    /// Starts an input; its number.
    std::uint32_t add_input(std::string name)
    {
        inputs.push_back(std::move(name));
        facts.emplace_back();
        return static_cast<std::uint32_t>(inputs.size() - 1);
    }

    void add_version(std::string_view version)
    {
        InputFacts& f = *current_facts;
        if (f.versions.size() < max_versions) {
            f.versions.emplace(version);
        }
        if (versions.find(version) == versions.end()) {
            if (versions.size() >= max_versions) {
                ++left_out.other;
                return;
            }
            versions.emplace(version);
        }
    }

    /// The host's id; -2 for a new host past the limit. Records with an empty host name come from
    /// one host, shown as unnamed_host.
    int host_id(std::string_view name)
    {
        name = name.substr(0, max_host_name);
        auto it = host_ids.find(name);
        if (it != host_ids.end()) {
            return it->second;
        }
        if (hosts.size() >= limits.hosts) {
            return -2;
        }
        const int id = static_cast<int>(hosts.size());
        hosts.emplace_back(name.empty() ? unnamed_host : name);
        host_ids.emplace(std::string(name), id);
        return id;
    }

    /// The host of a record's prefix. NCCL cuts the host name at its first dot (getHostName), so a
    /// dot in it means the text before was fused on by another process writing at the same time
    /// ("... send 0.000proxmox:1495820:1495820 [1] NCCL INFO"): the host is the longest known one
    /// that ends the word, else what follows the last dot.
    std::string_view prefix_host(std::string_view name) const
    {
        const std::size_t dot = name.rfind('.');
        if (dot == std::string_view::npos) {
            return name;
        }
        for (std::size_t at = 1; at < name.size(); ++at) {
            if (host_ids.find(name.substr(at)) != host_ids.end()) {
                return name.substr(at);
            }
        }
        return name.substr(dot + 1);
    }

    std::uint32_t path_id(std::string_view path)
    {
        auto it = path_ids.find(path);
        if (it != path_ids.end()) {
            return it->second;
        }
        if (paths.size() >= max_paths) {
            return path_id("(other)");
        }
        const auto id = static_cast<std::uint32_t>(paths.size());
        paths.emplace_back(path);
        path_ids.emplace(std::string(path), id);
        return id;
    }

    int new_comm(std::string id, bool by_id, int nranks, Mark where)
    {
        CommState comm;
        comm.id = std::move(id);
        comm.by_id = by_id;
        comm.nranks = nranks;
        comm.first = where;
        comms.push_back(std::move(comm));
        return static_cast<int>(comms.size() - 1);
    }

    // Which communicator an Init line belongs to: by commId (2.16+); else the one this thread
    // started; else the k-th of its size on this (host, pid, cudaDev). -1 past the limits, counted.
    int comm_for(const NcclInit& init, const ThreadState& thread, const ThreadKey& key, Mark where)
    {
        const bool full = comms.size() >= limits.communicators;
        if (!init.comm_id.empty() && init.comm_id != "0x0") {
            const std::string id(init.comm_id.substr(0, 40));
            auto it = comm_by_id.find(id);
            if (it != comm_by_id.end()) {
                return it->second;
            }
            if (full) {
                ++left_out.communicators;
                return -1;
            }
            const int index = new_comm(id, true, init.nranks, where);
            comm_by_id.emplace(id, index);
            return index;
        }
        if (init.stage == InitStage::complete && thread.open_comm >= 0 &&
            comms[static_cast<std::size_t>(thread.open_comm)].nranks == init.nranks) {
            return thread.open_comm;
        }
        const std::tuple<int, long, int, int> device{key.host, key.pid, init.cuda_dev, init.nranks};
        auto counted = init_ordinals.find(device);
        const int ordinal = counted != init_ordinals.end() ? counted->second + 1 : 1;
        auto it = comm_by_ordinal.find({where.input, init.nranks, ordinal});
        if (it == comm_by_ordinal.end() && full) {
            ++left_out.communicators;
            return -1;
        }
        if (counted == init_ordinals.end() && init_ordinals.size() >= limits.communicator_ranks) {
            ++left_out.communicator_ranks;
            return -1;
        }
        init_ordinals[device] = ordinal;
        if (it == comm_by_ordinal.end()) {
            it = comm_by_ordinal.emplace(std::tuple{where.input, init.nranks, ordinal}, -1).first;
            it->second = new_comm({}, false, init.nranks, where); // named by the analysis
        }
        return it->second;
    }

    void on_init(const NcclInit& init, const ThreadKey& key, ThreadState& thread, Mark where)
    {
        const std::tuple<int, long, int> device{key.host, key.pid, init.cuda_dev};
        if (devices.size() >= limits.ranks && devices.find(device) == devices.end()) {
            ++left_out.ranks;
            return;
        }
        const int index = comm_for(init, thread, key, where);
        if (index < 0) {
            return;
        }
        CommState& comm = comms[static_cast<std::size_t>(index)];
        if (std::find(comm.inputs.begin(), comm.inputs.end(), where.input) == comm.inputs.end()) {
            comm.inputs.push_back(where.input);
        }
        auto slot = comm.ranks.find(init.rank);
        if (slot == comm.ranks.end()) {
            if (communicator_ranks >= limits.communicator_ranks) {
                ++left_out.communicator_ranks;
                return;
            }
            ++communicator_ranks;
            slot = comm.ranks.emplace(init.rank, RankState()).first;
        }
        RankState& rank = slot->second;
        if (rank.host >= 0 && (rank.host != key.host || rank.pid != key.pid)) {
            return; // another process claims this rank (logs of two jobs); keep the first
        }
        rank.host = key.host;
        rank.pid = key.pid;
        rank.cuda_dev = init.cuda_dev;
        rank.nvml_dev = init.nvml_dev;
        if (!init.bus_id.empty()) {
            rank.bus_id = std::string(init.bus_id.substr(0, 32));
        }
        note(rank.where, where);
        devices.insert(device);
        ProcessState& process = processes[{key.host, key.pid}];
        switch (init.stage) {
        case InitStage::start:
            rank.started = true;
            note(rank.start_where, where);
            thread.open_comm = index;
            break;
        case InitStage::none: // 2.3 has no START/COMPLETE: the line opens the init and ends it
            rank.complete = true;
            thread.open_comm = index;
            process.completed(index);
            break;
        case InitStage::complete:
            rank.complete = true;
            if (thread.open_comm == index) {
                thread.open_comm = -1;
            }
            process.completed(index);
            break;
        }
        if (!thread.pending.empty()) {
            comm.links.merge(thread.pending);
            thread.pending = LinkTally();
        }
    }

    LinkTally& tally_for(ThreadState& thread)
    {
        if (thread.open_comm >= 0) {
            return comms[static_cast<std::size_t>(thread.open_comm)].links;
        }
        return thread.pending;
    }

    // Lines for extra connections (connIndex 1, send/recv) come after Init COMPLETE, often from
    // another thread: they belong to the latest communicator of this process that holds both
    // ranks, with the local one in this process.
    LinkTally* lazy_tally_for(const ThreadKey& key, int local, int peer)
    {
        auto it = processes.find({key.host, key.pid});
        if (it == processes.end()) {
            return nullptr;
        }
        const auto& recent = it->second.recent_comms;
        for (auto c = recent.rbegin(); c != recent.rend(); ++c) {
            CommState& comm = comms[static_cast<std::size_t>(*c)];
            if (comm.nranks <= std::max(local, peer)) {
                continue;
            }
            auto r = comm.ranks.find(local);
            if (r == comm.ranks.end() || (r->second.host == key.host && r->second.pid == key.pid)) {
                return &comm.links;
            }
        }
        return nullptr;
    }

    void on_connection(const NcclConnection& c, const ThreadKey& key, ThreadState& thread, Mark where)
    {
        const Transport t = classify_path(c.path);
        // The local rank: the sender on send-side lines (P2P and SHM are logged there), the
        // receiver on [receive] lines and on 2.3 NET lines, which only the receiver logs.
        const bool old_net = c.ring_keyword && c.direction == Direction::none && c.path.starts_with("NET/");
        const int local = c.collnet ? c.src : (c.direction == Direction::receive || old_net) ? c.dst : c.src;
        LinkTally* lazy = thread.open_comm < 0 && c.conn_index >= 1
            ? lazy_tally_for(key, local, local == c.src ? c.dst : c.src)
            : nullptr;
        LinkTally& tally = lazy != nullptr ? *lazy : tally_for(thread);
        const std::uint64_t edge_key = LinkTally::edge_key(c.src, c.dst, path_id(c.path));
        auto found = tally.edges.find(edge_key);
        if (found == tally.edges.end()) {
            if (connection_keys >= limits.connections) {
                ++left_out.connections;
                return;
            }
            ++connection_keys;
            found = tally.edges.emplace(edge_key, EdgeCount()).first;
        }
        count_connection(t);
        EdgeCount& edge = found->second;
        ++edge.count;
        note(edge.first, where);
        if (key.host >= 0) {
            tally.local_host.try_emplace(local, key.host);
        }
    }

    void count_connection(Transport t)
    {
        ++current_facts->connections;
        ++current_facts->counts[static_cast<std::size_t>(t)];
    }

    void on_message(const NcclRecord& r, const ThreadKey& key, Mark where)
    {
        std::string_view m = r.message;
        Evidence& evidence = current_facts->evidence;
        if (r.level == Level::warn || r.level == Level::abort) {
            InputFacts& f = *current_facts;
            std::string kind = warn_kind(m);
            auto it = f.warn_index.find(kind);
            if (it == f.warn_index.end()) {
                if (f.warns.size() >= max_warn_kinds) {
                    kind = "(other)";
                    it = f.warn_index.find(kind);
                }
                if (it == f.warn_index.end()) {
                    it = f.warn_index.emplace(kind, f.warns.size()).first;
                    f.warns.push_back(WarnState{kind, std::string(m.substr(0, 300)), 0, where});
                }
            }
            ++f.warns[it->second].count;
            if (m.find("Failed to open libibverbs") != std::string_view::npos) {
                note(evidence.no_verbs, where);
            }
            return;
        }
        if (m.empty()) {
            return;
        }
        ThreadState& thread = *current_thread;
        // Dispatch on the first character: most INFO lines are none of the kinds read here.
        switch (m.front()) {
        case 'C':
        case 'R':
            if (auto conn = parse_connection(m)) {
                on_connection(*conn, key, thread, where);
            } else if (parse_ring_order(m, ring)) {
                if (ring.ranks.size() > 1 && !ring.truncated && ring.ranks.size() <= max_ring_length) {
                    if (ring_ranks + ring.ranks.size() > limits.ring_ranks) {
                        ++left_out.rings;
                    } else if (tally_for(thread).add_ring(ring.ranks, where)) {
                        ring_ranks += ring.ranks.size();
                    }
                }
            } else if (m.starts_with("Connected NVLS tree")) {
                on_nvls(key, thread, where);
            } else if (m.starts_with("Could not enable P2P")) {
                note(evidence.p2p_refused, where);
            } else if (m.starts_with("CollNet") || m.starts_with("Coll ")) {
                break;
            } else if (m.starts_with("comm ")) {
                on_maybe_init(m, key, thread, where);
            }
            break;
        case 'c':
        case 'n':
        case '[':
            on_maybe_init(m, key, thread, where);
            break;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
        case '8':
        case '9':
            if (auto summary = parse_channel_summary(m)) {
                const int index = thread.open_comm >= 0 ? thread.open_comm : current_process->last_comm;
                if (index >= 0) {
                    CommState& comm = comms[static_cast<std::size_t>(index)];
                    comm.nvls_channels = std::max(comm.nvls_channels, summary->nvls);
                    comm.collnet_channels = std::max(comm.collnet_channels, summary->collnet);
                }
            }
            break;
        case 'N':
            if (m.starts_with("NCCL version ")) {
                if (auto version = find_version(m, true)) {
                    add_version(*version);
                    if (r.prefixed && current_process->version != *version) {
                        current_process->version = std::string(*version);
                    }
                }
            } else if (m.starts_with("NCCL_")) {
                on_env(m, where);
            } else if (m.starts_with("NET/IB")) {
                on_net_ib(m, where);
            } else if (m.starts_with("NET/Socket : Using") || m.starts_with("NET/Socket: Using")) {
                for (std::size_t at = m.find(']'); at != std::string_view::npos; at = m.find(']', at + 1)) {
                    if (m.substr(at + 1).starts_with("ib")) {
                        note(evidence.ipoib, where);
                        break;
                    }
                }
            } else if (m.starts_with("NET/Plugin")) {
                const std::size_t loaded = m.find("Loaded net plugin ");
                if (loaded != std::string_view::npos && m.substr(loaded + 18).starts_with("IB")) {
                    note(evidence.ib_plugin, where);
                }
            } else if (m.starts_with("NVLS comm ") && m.find(" rank ") != std::string_view::npos) {
                // 2.17 prints no "Connected NVLS tree"; its "NVLS comm %p rank %d nranks %d" line stands in.
                on_nvls(key, thread, where);
            }
            break;
        case 'U':
            for (std::string_view lead : {"Using network ", "Using internal Network ", "Using external Network "}) {
                if (m.starts_with(lead) && m.substr(lead.size()).starts_with("IB")) {
                    note(evidence.ib_plugin, where);
                }
            }
            break;
        case 'G':
            if (m.starts_with("GPU Direct RDMA Disabled")) {
                note(evidence.gdr_disabled, where);
                ++evidence.gdr_disabled_lines;
            }
            break;
        case 'F':
            if (m.starts_with("Failed to open libibverbs")) {
                note(evidence.no_verbs, where);
            }
            break;
        default:
            break;
        }
    }

    void on_maybe_init(std::string_view m, const ThreadKey& key, ThreadState& thread, Mark where)
    {
        if (m.find("nranks ") != std::string_view::npos) {
            if (auto init = parse_init(m)) {
                on_init(*init, key, thread, where);
            }
        }
    }

    void on_nvls(const ThreadKey& key, ThreadState& thread, Mark where)
    {
        LinkTally& tally = tally_for(thread);
        ++tally.nvls_lines[key.host];
        note(tally.first_nvls, where);
        count_connection(Transport::nvls);
    }

    void on_env(std::string_view m, Mark where)
    {
        auto env_setting = parse_env_setting(m);
        if (!env_setting) {
            return;
        }
        const std::string name(env_setting->name.substr(0, 64));
        auto& env = current_facts->env;
        Evidence& evidence = current_facts->evidence;
        if (env.size() >= max_env_names && env.find(name) == env.end()) {
            ++left_out.other;
            return;
        }
        EnvHit& hit = env[name];
        if (hit.count++ == 0) {
            hit.name = std::string(env_setting->name.substr(0, 64));
            hit.value = std::string(env_setting->value.substr(0, 64));
            hit.where = where;
        }
        if (env_setting->name == "NCCL_IB_DISABLE" && env_setting->value == "1") {
            note(evidence.ib_disabled, where);
        }
    }

    void on_net_ib(std::string_view m, Mark where)
    {
        Evidence& evidence = current_facts->evidence;
        // "NET/IB : Using [0]mlx5_0:1/IB ...", 2.19+ "[0]={[0] mlx5_0...}", 2.3 "NET/IB: [0] mlx5_0:1/IB".
        // "NET/IB : Using [RO]; OOB ..." lists no device.
        for (std::size_t at = m.find('['); at != std::string_view::npos; at = m.find('[', at + 1)) {
            if (at + 1 < m.size() && m[at + 1] >= '0' && m[at + 1] <= '9') {
                note(evidence.ib_devices, where);
                break;
            }
        }
        if (m.find("GPU Direct RDMA Disabled") != std::string_view::npos) {
            note(evidence.gdr_disabled, where);
            ++evidence.gdr_disabled_lines;
        }
    }

    void on_other_line(std::string_view line, Mark where)
    {
        if (auto version = find_version(line)) {
            add_version(*version);
        }
        Watchdogs& watchdogs = current_facts->watchdogs;
        CommErrors& comm_errors = current_facts->comm_errors;
        if (auto w = parse_watchdog(line)) {
            if (watchdogs.count++ == 0) {
                watchdogs.where = where;
                watchdogs.first = *w;
            }
            if (w->rank >= 0 && watchdogs.ranks.size() < 4096) {
                watchdogs.ranks.insert(w->rank);
            }
        }
        if (auto e = parse_comm_error(line)) {
            if (comm_errors.count++ == 0) {
                comm_errors.where = where;
                comm_errors.first = std::string(*e);
            }
        }
    }

    void on_record(const NcclRecord& r, Mark where)
    {
        ++current_facts->records;
        // Threads are looked up in a small cache first: interleaved ranks switch on every line.
        ThreadSlot& slot = thread_cache[KeyHash::mix(static_cast<std::size_t>(r.pid), r.tid) % thread_cache.size()];
        if (slot.thread == nullptr || r.pid != slot.key.pid || r.tid != slot.key.tid || r.prefixed != slot.prefixed ||
            where.input != slot.input || r.host.substr(0, max_host_name) != slot.host_name) {
            // Records without a prefix are of one unknown process per input.
            const int host = r.prefixed ? host_id(prefix_host(r.host)) : unknown_host(where.input);
            if (host == -2) {
                ++left_out.hosts;
                return;
            }
            const ThreadKey key{host, r.pid, r.tid};
            auto process = processes.find({host, r.pid});
            if (process == processes.end()) {
                if (processes.size() >= limits.processes) {
                    ++left_out.processes;
                    return;
                }
                process = processes.emplace(ProcessKey{host, r.pid}, ProcessState()).first;
                process->second.input = where.input;
            } else if (process->second.input != where.input && host >= 0 && r.pid != 0) {
                shared_processes.emplace(
                    std::min(process->second.input, where.input), std::max(process->second.input, where.input));
            }
            auto thread = threads.find(key);
            if (thread == threads.end()) {
                if (threads.size() >= limits.threads) {
                    ++left_out.threads;
                    return;
                }
                thread = threads.emplace(key, ThreadState()).first;
            }
            slot.host_name = host >= 0 && !r.host.empty() ? std::string_view(hosts[static_cast<std::size_t>(host)])
                                                          : std::string_view();
            slot.prefixed = r.prefixed;
            slot.input = where.input;
            slot.key = key;
            slot.thread = &thread->second;
            slot.process = &process->second;
        }
        current_thread = slot.thread;
        current_process = slot.process;
        current_key = slot.key;
        if (r.dev >= 0 && r.dev < 64) {
            current_process->record_devices |= std::uint64_t{1} << r.dev;
        }
        on_message(r, current_key, where);
    }

    /// One line, cleaned, with the records found in it (`records` may be changed).
    void process_line(std::string_view line, std::span<NcclRecord> in_line, Mark where)
    {
        current_facts = &facts[where.input];
        if (fragment_pending) {
            // NCCL 2.3 wrote the prefix and the message with separate calls: the message may be the
            // next line.
            const bool next = where.input == fragment_mark.input && where.line == fragment_mark.line + 1;
            if (next && in_line.empty()) {
                std::string_view message = line;
                while (!message.empty() && message.front() == ' ') {
                    message.remove_prefix(1);
                }
                flush_fragment(message);
                on_other_line(line, where);
                return;
            }
            flush_fragment({});
        }
        // A record without its message (2.3): usually last on its line, first when another
        // process's whole record came between its prefix and its message.
        auto empty = in_line.end();
        if (!in_line.empty()) {
            empty = in_line.back().message.empty()
                ? in_line.end() - 1
                : std::find_if(in_line.begin(), in_line.end(), [](const NcclRecord& r) { return r.message.empty(); });
        }
        if (empty != in_line.end()) {
            std::rotate(empty, empty + 1, in_line.end());
            fragment_pending = true;
            fragment = in_line.back();
            fragment_host = std::string(fragment.host);
            fragment_mark = where;
            in_line = in_line.first(in_line.size() - 1);
        }
        for (const NcclRecord& r : in_line) {
            on_record(r, where);
        }
        if (in_line.empty() && !fragment_pending) {
            on_other_line(line, where);
        }
    }

    void flush_fragment(std::string_view message)
    {
        fragment_pending = false;
        NcclRecord r = fragment;
        r.host = fragment_host;
        r.location = {};
        r.message = message;
        InputFacts* reading = current_facts;
        current_facts = &facts[fragment_mark.input];
        on_record(r, fragment_mark);
        current_facts = reading;
    }

    void finish_input()
    {
        if (fragment_pending) {
            flush_fragment({});
        }
        lines_before = lines;
    }
};

} // namespace base::nccl
