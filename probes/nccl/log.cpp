#include "probes/nccl/log.hpp"

#include "probes/error.hpp"
#include "probes/nccl/line_scan.hpp"
#include "probes/nccl/model.hpp"
#include "probes/nccl/record.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fcntl.h>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <unistd.h>
#include <zlib.h>

namespace probes::nccl {

namespace {

constexpr std::size_t max_paths = 4096;
constexpr std::size_t max_rings = 64;
constexpr std::size_t max_ring_length = 1 << 16;
constexpr std::size_t max_warn_kinds = 256;
constexpr std::size_t read_size = 1 << 20;
/// Input is read in blocks of this size; a line longer than a block is cut, the rest of it skipped.
constexpr std::size_t block_size = 4 << 20;

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
    int nranks = 0;
    Mark first;
    std::map<int, RankState> ranks;
    LinkTally links;
    unsigned nvls_channels = 0;
    unsigned collnet_channels = 0;
};

struct ProcessState {
    std::string version;
    std::uint64_t record_devices = 0; ///< bit d: a record came from device d (d < 64)
    int last_comm = -1; ///< the communicator whose Init COMPLETE this process logged last
    std::vector<int> recent_comms; ///< communicators it completed, the latest last (at most 64)
    void completed(int comm);
    bool init_complete = false;
};

void ProcessState::completed(int comm)
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

/// Hashes std::string and std::string_view alike, so lookups need no temporary string.
struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
template <typename T> using TextMap = std::unordered_map<std::string, T, TextHash, std::equal_to<>>;

void note(Mark& mark, Mark where)
{
    if (!mark.known()) {
        mark = where;
    }
}

} // namespace

struct Analyzer::State {
    std::vector<std::string> inputs;
    std::uint64_t lines = 0;
    std::uint64_t lines_before = 0; ///< in the inputs before the current one
    std::uint64_t records = 0;
    std::uint64_t connections = 0;
    std::uint64_t counts[transport_count] = {};

    std::deque<std::string> hosts; ///< a deque: its strings never move
    TextMap<int> host_ids;
    std::unordered_map<ProcessKey, ProcessState, KeyHash> processes;
    std::unordered_map<ThreadKey, ThreadState, KeyHash> threads;
    std::set<std::tuple<int, long, int>> devices; ///< (host, pid, cudaDev) from Init lines

    std::vector<std::string> paths;
    TextMap<std::uint32_t> path_ids;

    std::vector<CommState> comms;
    TextMap<int> comm_by_id;
    /// Without a commId: the k-th init of size N on (host, pid, cudaDev) belongs to comm (N, k).
    std::map<std::tuple<int, long, int, int>, int> init_ordinals;
    std::map<std::pair<int, int>, int> comm_by_ordinal;

    std::set<std::string, std::less<>> versions;
    Evidence evidence;
    std::map<std::string, EnvHit> env;
    std::vector<WarnState> warns;
    std::unordered_map<std::string, std::size_t> warn_index;
    std::uint64_t warn_records = 0;
    Watchdogs watchdogs;
    CommErrors comm_errors;

    // The thread of the last record (unordered_map nodes do not move).
    ThreadState* current_thread = nullptr;
    ProcessState* current_process = nullptr;
    ThreadKey current_key;
    struct ThreadSlot {
        std::string_view host_name; ///< points into `hosts`, whose strings stay put
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

    void add_version(std::string_view version)
    {
        if (versions.find(version) == versions.end()) {
            versions.emplace(version);
        }
    }

    int host_id(std::string_view name)
    {
        auto it = host_ids.find(name);
        if (it != host_ids.end()) {
            return it->second;
        }
        const int id = static_cast<int>(hosts.size());
        hosts.emplace_back(name);
        host_ids.emplace(std::string(name), id);
        return id;
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

    int new_comm(std::string id, int nranks, Mark where)
    {
        CommState comm;
        comm.id = std::move(id);
        comm.nranks = nranks;
        comm.first = where;
        comms.push_back(std::move(comm));
        return static_cast<int>(comms.size() - 1);
    }

    // Which communicator an Init line belongs to: by commId (2.16+); else the one this thread
    // started; else the k-th of its size on this (host, pid, cudaDev).
    int comm_for(const NcclInit& init, const ThreadState& thread, const ThreadKey& key, Mark where)
    {
        if (!init.comm_id.empty() && init.comm_id != "0x0") {
            const std::string id(init.comm_id.substr(0, 40));
            auto it = comm_by_id.find(id);
            if (it != comm_by_id.end()) {
                return it->second;
            }
            const int index = new_comm(id, init.nranks, where);
            comm_by_id.emplace(id, index);
            return index;
        }
        if (init.stage == InitStage::complete && thread.open_comm >= 0 &&
            comms[static_cast<std::size_t>(thread.open_comm)].nranks == init.nranks) {
            return thread.open_comm;
        }
        const int ordinal = ++init_ordinals[{key.host, key.pid, init.cuda_dev, init.nranks}];
        auto [it, added] = comm_by_ordinal.try_emplace({init.nranks, ordinal}, -1);
        if (added) {
            it->second = new_comm(fmt::format("#{}", comms.size() + 1), init.nranks, where);
        }
        return it->second;
    }

    void on_init(const NcclInit& init, const ThreadKey& key, ThreadState& thread, Mark where)
    {
        const int index = comm_for(init, thread, key, where);
        CommState& comm = comms[static_cast<std::size_t>(index)];
        RankState& rank = comm.ranks[init.rank];
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
        devices.insert({key.host, key.pid, init.cuda_dev});
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
        ++connections;
        ++counts[static_cast<std::size_t>(t)];
        // The local rank: the sender on send-side lines (P2P and SHM are logged there), the
        // receiver on [receive] lines and on 2.3 NET lines, which only the receiver logs.
        const bool old_net = c.ring_keyword && c.direction == Direction::none && c.path.starts_with("NET/");
        const int local = c.collnet ? c.src : (c.direction == Direction::receive || old_net) ? c.dst : c.src;
        LinkTally* lazy = thread.open_comm < 0 && c.conn_index >= 1
            ? lazy_tally_for(key, local, local == c.src ? c.dst : c.src)
            : nullptr;
        LinkTally& tally = lazy != nullptr ? *lazy : tally_for(thread);
        EdgeCount& edge = tally.edges[LinkTally::edge_key(c.src, c.dst, path_id(c.path))];
        ++edge.count;
        note(edge.first, where);
        if (key.host >= 0) {
            tally.local_host.try_emplace(local, key.host);
        }
    }

    void on_message(const NcclRecord& r, const ThreadKey& key, Mark where)
    {
        std::string_view m = r.message;
        if (r.level == Level::warn || r.level == Level::abort) {
            ++warn_records;
            std::string kind = warn_kind(m);
            auto it = warn_index.find(kind);
            if (it == warn_index.end()) {
                if (warns.size() >= max_warn_kinds) {
                    kind = "(other)";
                    it = warn_index.find(kind);
                }
                if (it == warn_index.end()) {
                    it = warn_index.emplace(kind, warns.size()).first;
                    warns.push_back(WarnState{kind, std::string(m.substr(0, 300)), 0, where});
                }
            }
            ++warns[it->second].count;
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
                    tally_for(thread).add_ring(ring.ranks, where);
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
                if (auto version = find_version(m)) {
                    add_version(*version);
                    if (!r.host.empty() && current_process->version != *version) {
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
        ++connections;
        ++counts[static_cast<std::size_t>(Transport::nvls)];
    }

    void on_env(std::string_view m, Mark where)
    {
        auto env_setting = parse_env_setting(m);
        if (!env_setting) {
            return;
        }
        EnvHit& hit = env[std::string(env_setting->name.substr(0, 64))];
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
        ++records;
        // Threads are looked up in a small cache first: interleaved ranks switch on every line.
        ThreadSlot& slot = thread_cache[KeyHash::mix(static_cast<std::size_t>(r.pid), r.tid) % thread_cache.size()];
        if (slot.thread == nullptr || r.pid != slot.key.pid || r.tid != slot.key.tid || r.host != slot.host_name) {
            const int host = r.host.empty() ? -1 : host_id(r.host);
            slot.host_name = host >= 0 ? std::string_view(hosts[static_cast<std::size_t>(host)]) : std::string_view();
            slot.key = ThreadKey{host, r.pid, r.tid};
            slot.thread = &threads[slot.key];
            slot.process = &processes[{host, r.pid}];
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
        on_record(r, fragment_mark);
    }

    void finish_input()
    {
        if (fragment_pending) {
            flush_fragment({});
        }
        lines_before = lines;
    }
};

namespace {

class Source {
public:
    virtual ~Source() = default;
    /// Up to `size` bytes into `buffer`; 0 at the end.
    virtual std::size_t read(char* buffer, std::size_t size) = 0;
};

class FdSource : public Source {
public:
    FdSource(int fd, std::string name) : m_fd(fd), m_name(std::move(name)) { }
    std::size_t read(char* buffer, std::size_t size) override
    {
        for (;;) {
            const ssize_t n = ::read(m_fd, buffer, size);
            if (n >= 0) {
                return static_cast<std::size_t>(n);
            }
            if (errno != EINTR) {
                throw Error(fmt::format("cannot read {}: {}", m_name, std::strerror(errno)));
            }
        }
    }

private:
    int m_fd;
    std::string m_name;
};

/// Inflates gzip data (several members too, as `cat a.gz b.gz` makes) read from another source.
class GzipSource : public Source {
public:
    GzipSource(Source& in, std::string head, std::string name)
        : m_in(in), m_input(std::move(head)), m_name(std::move(name))
    {
        if (inflateInit2(&m_z, 16 + MAX_WBITS) != Z_OK) {
            throw Error(fmt::format("cannot read {}: zlib could not start", m_name));
        }
    }
    ~GzipSource() override { inflateEnd(&m_z); }
    GzipSource(const GzipSource&) = delete;
    GzipSource& operator=(const GzipSource&) = delete;

    std::size_t read(char* buffer, std::size_t size) override
    {
        m_z.next_out = reinterpret_cast<Bytef*>(buffer);
        m_z.avail_out = static_cast<uInt>(size);
        while (m_z.avail_out == size) {
            if (m_z.avail_in == 0) {
                if (m_offset >= m_input.size()) {
                    m_input.resize(read_size);
                    m_input.resize(m_in.read(m_input.data(), read_size));
                    m_offset = 0;
                }
                if (m_input.empty()) {
                    if (m_in_member) {
                        throw corrupt("the file ends inside compressed data");
                    }
                    return 0;
                }
                m_z.next_in = reinterpret_cast<Bytef*>(m_input.data() + m_offset);
                m_z.avail_in = static_cast<uInt>(m_input.size() - m_offset);
                m_offset = m_input.size();
            }
            m_in_member = true;
            const int rc = inflate(&m_z, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                m_in_member = false;
                inflateReset(&m_z);
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                throw corrupt(m_z.msg != nullptr ? m_z.msg : "inflate failed");
            }
        }
        return size - m_z.avail_out;
    }

private:
    Error corrupt(const char* why) const
    {
        return Error(fmt::format("{}: corrupt gzip data ({}); check the file with 'gzip -t {}'", m_name, why, m_name));
    }

    Source& m_in;
    std::string m_input;
    std::size_t m_offset = 0;
    std::string m_name;
    z_stream m_z{};
    bool m_in_member = false;
};

/// The cleaned text and the NCCL records of the lines a scanner marked. Filled on the reading
/// thread, replayed into the analyzer's state on the other.
class LineRecords {
public:
    void extract(std::string_view data, std::vector<LineRef>& lines)
    {
        m_records.clear();
        m_lines.clear();
        m_cleaned.clear();
        for (std::size_t i = 0; i < lines.size(); ++i) {
            const LineRef ref = lines[i];
            std::string_view line = clean_line(data.substr(ref.offset, ref.size), m_scratch);
            if (line.data() == m_scratch.data()) {
                m_cleaned.push_back(m_scratch); // deque: earlier lines' views stay valid
                line = m_cleaned.back();
            }
            const std::size_t first = m_records.size();
            find_records(line, m_records);
            m_lines.push_back(Line{line, first, m_records.size() - first});
            // Two NCCL 2.3 processes writing at once ("Xprefix Yprefix Ymessage"): X's message is
            // the next line, which the scanner did not mark (it holds no "NCCL").
            const bool interleaved = m_records.size() - first > 1 &&
                std::any_of(m_records.begin() + static_cast<std::ptrdiff_t>(first), m_records.end() - 1,
                    [](const NcclRecord& r) { return r.message.empty(); });
            const std::size_t next = ref.offset + ref.size + 1;
            if (interleaved && next < data.size() && (i + 1 == lines.size() || lines[i + 1].number != ref.number + 1)) {
                const std::size_t nl = data.find('\n', next);
                const std::size_t end = nl == std::string_view::npos ? data.size() : nl;
                lines.insert(
                    lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, LineRef{next, end - next, ref.number + 1});
            }
        }
    }
    void replay(Analyzer::State& state, const std::vector<LineRef>& lines, std::uint32_t input)
    {
        for (std::size_t i = 0; i < m_lines.size(); ++i) {
            const Line& l = m_lines[i];
            state.process_line(
                l.text, std::span<NcclRecord>(m_records.data() + l.first, l.count), Mark{input, lines[i].number});
        }
    }

private:
    struct Line {
        std::string_view text;
        std::size_t first = 0;
        std::size_t count = 0;
    };
    std::vector<NcclRecord> m_records;
    std::vector<Line> m_lines;
    std::deque<std::string> m_cleaned;
    std::string m_scratch;
};

/// A block of input with the lines in it to read.
struct Block {
    std::unique_ptr<char[]> buffer = std::make_unique_for_overwrite<char[]>(block_size + read_size);
    std::string_view data; ///< the part of `buffer` in use
    std::vector<LineRef> lines;
    LineRecords found;
    std::uint64_t lines_after = 0; ///< lines in the input up to the end of this block
};

/// Blocks go from the reading thread to the analysing one and back; three are in flight, so
/// memory stays flat whatever the input's size.
class BlockQueue {
public:
    BlockQueue()
    {
        for (int i = 0; i < 3; ++i) {
            m_free.push_back(std::make_unique<Block>());
        }
    }
    std::unique_ptr<Block> take_free() { return take(m_free); }
    std::unique_ptr<Block> take_full() { return take(m_full); }
    void give_free(std::unique_ptr<Block> b) { give(m_free, std::move(b)); }
    void give_full(std::unique_ptr<Block> b) { give(m_full, std::move(b)); }
    /// The reader is done (`error` set when it failed).
    void finish(std::exception_ptr error)
    {
        std::lock_guard lock(m_mutex);
        m_done = true;
        m_error = std::move(error);
        m_cv.notify_all();
    }
    /// The analyser gives up: the reader stops at its next block.
    void stop()
    {
        std::lock_guard lock(m_mutex);
        m_stopped = true;
        m_cv.notify_all();
    }
    std::exception_ptr error()
    {
        std::lock_guard lock(m_mutex);
        return m_error;
    }

private:
    std::unique_ptr<Block> take(std::deque<std::unique_ptr<Block>>& from)
    {
        std::unique_lock lock(m_mutex);
        const bool full = &from == &m_full;
        m_cv.wait(lock, [&] { return !from.empty() || m_stopped || (full && m_done); });
        if (from.empty() || m_stopped) {
            return nullptr;
        }
        auto b = std::move(from.front());
        from.pop_front();
        return b;
    }
    void give(std::deque<std::unique_ptr<Block>>& to, std::unique_ptr<Block> b)
    {
        std::lock_guard lock(m_mutex);
        to.push_back(std::move(b));
        m_cv.notify_all();
    }

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::unique_ptr<Block>> m_free;
    std::deque<std::unique_ptr<Block>> m_full;
    bool m_done = false;
    bool m_stopped = false;
    std::exception_ptr m_error;
};

// The reading thread: fills blocks with whole lines and marks the lines to read.
void read_blocks(Source& source, std::string head, BlockQueue& queue)
{
    LineScanner scanner;
    std::string carry = std::move(head);
    for (;;) {
        std::unique_ptr<Block> b = queue.take_free();
        if (!b) {
            return;
        }
        char* buffer = b->buffer.get();
        std::memcpy(buffer, carry.data(), carry.size());
        std::size_t used = carry.size();
        carry.clear();
        b->lines.clear();
        bool eof = false;
        while (used < block_size && !eof) {
            const std::size_t n = source.read(buffer + used, read_size);
            used += n;
            eof = n == 0;
        }
        const void* last = eof ? nullptr : memrchr(buffer, '\n', used);
        if (eof) {
            scanner.scan(buffer, used, b->lines);
        } else if (last == nullptr) {
            scanner.scan_cut(buffer, used, b->lines);
        } else {
            const std::size_t whole = static_cast<std::size_t>(static_cast<const char*>(last) - buffer) + 1;
            carry.assign(buffer + whole, used - whole);
            used = whole;
            scanner.scan(buffer, whole, b->lines);
        }
        b->data = std::string_view(buffer, used);
        b->found.extract(b->data, b->lines);
        b->lines_after = scanner.lines();
        queue.give_full(std::move(b));
        if (eof) {
            return;
        }
    }
}

class Fd {
public:
    explicit Fd(int fd) : m_fd(fd) { }
    ~Fd()
    {
        if (m_fd > 2) {
            close(m_fd);
        }
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return m_fd; }

private:
    int m_fd;
};

} // namespace

void LinkTally::add_ring(const std::vector<int>& ranks, Mark where)
{
    if (rings.size() >= max_rings || std::find(rings.begin(), rings.end(), ranks) != rings.end()) {
        return;
    }
    note(first_ring, where);
    rings.push_back(ranks);
}

void LinkTally::merge(const LinkTally& other)
{
    for (const auto& [key, edge] : other.edges) {
        EdgeCount& mine = edges[key];
        mine.count += edge.count;
        if (edge.first.before(mine.first)) {
            mine.first = edge.first;
        }
    }
    for (const auto& [rank, host] : other.local_host) {
        local_host.try_emplace(rank, host);
    }
    for (const auto& ring : other.rings) {
        add_ring(ring, other.first_ring);
    }
    for (const auto& [host, n] : other.nvls_lines) {
        nvls_lines[host] += n;
    }
    if (other.first_nvls.before(first_nvls)) {
        first_nvls = other.first_nvls;
    }
}

Analyzer::Analyzer() : m_state(std::make_unique<State>())
{
}
Analyzer::~Analyzer() = default;

void Analyzer::read_file(const std::string& path, const std::string& shown)
{
    const bool is_stdin = path == "-";
    Fd fd(is_stdin ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
        throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    }
    const std::string name = !shown.empty() ? shown : is_stdin ? "-" : path;
    // The first bytes tell gzip from text; they are read here and handed on.
    FdSource raw(fd.get(), name);
    std::string head(2, '\0');
    std::size_t got = 0;
    while (got < 2) {
        const std::size_t n = raw.read(head.data() + got, 2 - got);
        if (n == 0) {
            break;
        }
        got += n;
    }
    head.resize(got);
    m_state->inputs.push_back(name);
    const auto input = static_cast<std::uint32_t>(m_state->inputs.size() - 1);
    const bool gzip =
        got == 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;

    // One thread reads, decompresses and finds the lines; this one analyses them.
    BlockQueue queue;
    std::thread reader([&] {
        try {
            if (gzip) {
                GzipSource gz(raw, head, name);
                read_blocks(gz, {}, queue);
            } else {
                read_blocks(raw, head, queue);
            }
            queue.finish(nullptr);
        } catch (...) {
            queue.finish(std::current_exception());
        }
    });
    try {
        while (std::unique_ptr<Block> b = queue.take_full()) {
            b->found.replay(*m_state, b->lines, input);
            m_state->lines = m_state->lines_before + b->lines_after;
            queue.give_free(std::move(b));
        }
    } catch (...) {
        queue.stop();
        reader.join();
        throw;
    }
    reader.join();
    if (auto error = queue.error()) {
        std::rethrow_exception(error);
    }
    m_state->finish_input();
}

void Analyzer::read_text(std::string_view text, const std::string& name)
{
    m_state->inputs.push_back(name);
    const auto input = static_cast<std::uint32_t>(m_state->inputs.size() - 1);
    LineScanner scanner;
    std::vector<LineRef> lines;
    scanner.scan(text.data(), text.size(), lines);
    LineRecords found;
    found.extract(text, lines);
    found.replay(*m_state, lines, input);
    m_state->lines = m_state->lines_before + scanner.lines();
    m_state->finish_input();
}

} // namespace probes::nccl

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

} // namespace

Analysis Analyzer::analysis() const
{
    const State& s = *m_state;
    Analysis a;
    a.inputs = s.inputs;
    a.lines = s.lines;
    a.records = s.records;
    a.connections = s.connections;
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
