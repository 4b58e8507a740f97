#include "launcher/node_monitor.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/process.hpp"
#include "base/usage/sampler.hpp"
#include "launcher/gpu_ownership.hpp"
#include "launcher/job_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace launcher {

namespace {

using base::Error;
using Clock = std::chrono::steady_clock;

/// An NVML call that does not return in this time ends the monitor (a wedged driver must not keep
/// mpirun waiting for the monitor's standard error).
constexpr unsigned nvml_watchdog_s = 30;
/// Ranks asked to stop by --enforce=kill get this long before SIGKILL.
constexpr auto kill_grace = std::chrono::seconds(10);
/// How often the monitor looks at the ranks between samples.
constexpr auto liveness_poll = std::chrono::milliseconds(50);
/// A pid NVML lists that /proc does not know must be seen this many times in a row before the
/// check falls back to counts (a process may exit between NVML's list and /proc).
constexpr unsigned container_confirmations = 2;

std::string short_hostname()
{
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) {
        return "localhost";
    }
    std::string host = name;
    return host.substr(0, host.find('.'));
}

template <typename T> T parse_number(const std::string& option, const std::string& text)
{
    T value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        throw Error(fmt::format("{} {}: not a number", option, text));
    }
    return value;
}

// The temporary JSON file being written, for the watchdog's signal handler to remove (unlinkat is
// async-signal-safe; a std::string is not to be touched there). -1 / empty when there is none.
int g_json_dir = -1;
char g_json_temp[256];

// Writes a monitor's JSON file as the samples come: a temporary file beside it, renamed over it
// at the end, so a reader finds the previous file or the whole new one.
class JsonFile {
public:
    JsonFile(const std::string& path, const nlohmann::json& head) : m_file(path, "--monitor-json")
    {
        const std::string_view temp = m_file.temp_name();
        if (temp.size() < sizeof g_json_temp) {
            std::memcpy(g_json_temp, temp.data(), temp.size() + 1);
            g_json_dir = m_file.dir_fd();
        }
        std::string text = head.dump();
        text.pop_back(); // leave the object open for "samples"
        m_file.write(text + ",\"samples\":[");
    }
    ~JsonFile() { g_json_dir = -1; }
    JsonFile(const JsonFile&) = delete;
    JsonFile& operator=(const JsonFile&) = delete;

    /// A write that fails (a full disk) is reported by finish(); sampling goes on.
    void add(const base::usage::GpuSample& sample)
    {
        if (!m_failed.empty()) {
            return;
        }
        try {
            m_file.write(fmt::format("{}\n{}", m_first ? "" : ",", base::usage::to_json(sample).dump()));
        } catch (const Error& e) {
            m_failed = e.what();
        }
        m_first = false;
    }

    /// Closes the samples, adds `tail`'s members, and puts the file in place; "" or why not.
    std::string finish(const nlohmann::json& tail)
    {
        try {
            if (!m_failed.empty()) {
                throw Error(m_failed);
            }
            m_file.write(fmt::format("\n],{}\n", tail.dump().substr(1)));
            m_file.commit();
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }

private:
    base::AtomicFile m_file;
    bool m_first = true;
    std::string m_failed;
};

// The watchdog's cleanup: the half-written JSON file goes.
void remove_json_temp()
{
    if (g_json_dir >= 0) {
        unlinkat(g_json_dir, g_json_temp, 0);
    }
}

constexpr const char* nvml_stuck = "gpurun: monitor: an NVML call did not return in time; the monitor stops\n";

// The monitor of one node, from start to summary.
class NodeMonitor {
public:
    explicit NodeMonitor(const NodeMonitorOptions& o) : m_o(o), m_host(short_hostname()) { }

    int run()
    {
        sigset_t stop;
        sigemptyset(&stop);
        for (int s : {SIGINT, SIGTERM, SIGHUP}) {
            signal(s, SIG_DFL);
            sigaddset(&stop, s);
        }
        sigprocmask(SIG_BLOCK, &stop, nullptr);

        open_nvml();
        base::usage::SampleSchedule schedule(m_o.monitor.interval);
        const auto records_deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(records_wait_s));
        // Until the next sample: follows the ranks; true when they are all gone or mpirun stops the job.
        auto wait = [&](Clock::time_point until) {
            while (true) {
                const auto now = Clock::now();
                if (m_records.size() < m_o.local_ranks) {
                    m_records = read_rank_records(m_o.job_dir);
                }
                const bool all_recorded = m_records.size() >= m_o.local_ranks || now >= records_deadline;
                const bool any_alive = std::any_of(
                    m_records.begin(), m_records.end(), [&](const RankRecord& r) { return rank_alive(r, m_lookup); });
                if (all_recorded && !any_alive) {
                    return true;
                }
                if (m_stopping && !m_killed && now >= m_kill_at) {
                    m_killed = true;
                    signal_ranks(SIGKILL);
                }
                if (now >= until) {
                    return false;
                }
                const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::min(until, now + liveness_poll) - Clock::now());
                timespec ts{0, std::max<long>(0, static_cast<long>(left.count()))};
                if (sigtimedwait(&stop, nullptr, &ts) > 0) {
                    return true; // mpirun stops the job: report what was seen
                }
            }
        };
        m_samples = base::usage::sample_on_schedule(m_sampler.get(), schedule, 0,
            {nvml_watchdog_s, nvml_stuck, 1, remove_json_temp}, wait,
            [&](const std::vector<base::usage::GpuSample>& samples) { take_sample(samples); });
        report();
        base::remove_private_dir(m_o.job_dir);
        return 0;
    }

private:
    void say(const std::string& line) const
    {
        fmt::print(stderr, "gpurun: monitor: {}\n", line);
        std::fflush(stderr);
    }

    void open_nvml()
    {
        try {
            const base::CallDeadline deadline(nvml_watchdog_s, nvml_stuck, 1);
            m_nvml = std::make_unique<base::Nvml>(base::Nvml::load());
            const auto all = m_nvml->gpus();
            m_sampler = std::make_unique<base::usage::GpuSampler>(*m_nvml, base::usage::gpus_at(all, m_o.gpus));
            m_everything = std::make_unique<base::usage::GpuSampler>(*m_nvml, base::usage::select_gpus(all, {}));
        } catch (const std::exception& e) {
            m_sampler.reset();
            say(fmt::format("{}: cannot sample the GPUs: {}; the job runs unmonitored", m_host, e.what()));
            return;
        }
        if (m_o.monitor.json_file.empty()) {
            return;
        }
        nlohmann::json gpus = nlohmann::json::array();
        for (const auto& g : m_sampler->gpus()) {
            gpus.push_back(base::usage::to_json(g));
        }
        try {
            m_json = std::make_unique<JsonFile>(expand_host(m_o.monitor.json_file, m_host),
                nlohmann::json{{"gpukit_base_usage", 1}, {"host", m_host}, {"interval", m_o.monitor.interval},
                    {"enforce", to_string(m_o.monitor.enforce)}, {"gpus", gpus}});
        } catch (const Error& e) {
            say(fmt::format("{}: {}", m_host, e.what()));
        }
    }

    void take_sample(const std::vector<base::usage::GpuSample>& samples)
    {
        for (const auto& s : samples) {
            m_summariser.add(s);
            if (m_json) {
                m_json->add(s);
            }
        }
        if (m_records.empty() || !m_check_processes) {
            return;
        }
        std::vector<GpuProcessList> lists;
        try {
            // Lists first, records after: a rank's helper writes its record before it starts the program, so
            // every rank process in the lists has its record in this read.
            std::vector<std::vector<base::NvmlProcess>> processes;
            {
                const base::CallDeadline deadline(nvml_watchdog_s, nvml_stuck, 1, remove_json_temp);
                processes = m_everything->processes();
            }
            for (std::size_t i = 0; i < processes.size(); ++i) {
                GpuProcessList list;
                list.gpu = m_everything->gpus()[i];
                list.job_gpu = std::find(m_o.gpus.begin(), m_o.gpus.end(), list.gpu.bus_id) != m_o.gpus.end();
                for (const auto& p : processes[i]) {
                    list.pids.push_back(p.pid);
                }
                lists.push_back(list);
            }
        } catch (const Error& e) {
            m_check_processes = false;
            m_why_unchecked = e.what();
            say(fmt::format(
                "{}: cannot read NVML's process lists: {}; one rank per GPU is not checked", m_host, e.what()));
            return;
        }
        // Read each time: a helper replaces its record by the program's pid once it has started it.
        m_records = read_rank_records(m_o.job_dir);
        OwnershipCheck check = check_ownership(m_records, lists, m_lookup, m_counts_only);
        m_job_processes_seen = m_job_processes_seen || check.job_processes > 0;
        if (!m_counts_only && check.looks_like_container && ++m_container_seen >= container_confirmations) {
            m_counts_only = true;
            say(fmt::format("{}: {}", m_host, counts_only_notice(check.processes_on_job_gpus)));
            check = check_ownership(m_records, lists, m_lookup, true);
        } else if (!check.looks_like_container) {
            m_container_seen = 0;
        }
        for (const auto& issue : check.issues) {
            note_issue(issue);
        }
    }

    // Says an issue the first time it is seen on its GPU, and again when more ranks or processes join it.
    void note_issue(const OwnershipIssue& issue)
    {
        const auto key = std::pair{static_cast<int>(issue.kind), issue.gpu.index};
        auto& seen = m_issues[key];
        const std::set<unsigned> members = issue.kind == OwnershipIssueKind::wrong_gpu
            ? std::set<unsigned>(issue.ranks.begin(), issue.ranks.end())
            : std::set<unsigned>(issue.pids.begin(), issue.pids.end());
        if (!seen.message.empty() &&
            std::includes(seen.members.begin(), seen.members.end(), members.begin(), members.end())) {
            return;
        }
        seen.members.insert(members.begin(), members.end());
        seen.message = issue.message;
        say(fmt::format("{}: {}", m_host, issue.message));
        if (m_o.monitor.enforce == EnforceMode::kill && issue.job_fault && !m_stopping) {
            m_stopping = true;
            m_kill_at = Clock::now() + kill_grace;
            say(fmt::format("{}: stopping the job (--enforce=kill): {}", m_host, issue.message));
            signal_ranks(SIGTERM);
        }
    }

    void signal_ranks(int sig) const
    {
        for (const auto& r : m_records) {
            if (rank_alive(r, m_lookup)) {
                kill(static_cast<pid_t>(r.pid), sig);
            }
        }
    }

    void report()
    {
        std::string text;
        const auto summaries = m_summariser.summaries(m_o.monitor.interval);
        if (!m_sampler) {
            text += fmt::format("{}: no samples: NVML could not be used (above)\n", m_host);
        } else if (m_samples == 0) {
            text += fmt::format("{}: no samples: the ranks ended before the first one\n", m_host);
        } else {
            text += fmt::format("{}: {} GPU{}, {} sample{} every {}s; kernel-active time is the share of each "
                                "sample with a kernel running, not how busy the SMs were\n",
                m_host, m_sampler->gpus().size(), m_sampler->gpus().size() == 1 ? "" : "s", m_samples,
                m_samples == 1 ? "" : "s", m_o.monitor.interval);
            text += base::usage::render_summary_text(m_sampler->gpus(), summaries);
        }
        std::vector<std::string> ownership;
        if (m_sampler) {
            ownership = ownership_summary();
            for (const auto& line : ownership) {
                text += fmt::format("one rank per GPU: {}\n", line);
            }
        }
        std::size_t start = 0;
        std::string out;
        while (start < text.size()) {
            const std::size_t end = text.find('\n', start);
            out += fmt::format("gpurun: monitor: {}\n", std::string_view(text).substr(start, end - start));
            start = end + 1;
        }
        fmt::print(stderr, "{}", out);
        std::fflush(stderr);
        if (m_json) {
            nlohmann::json list = nlohmann::json::array();
            for (const auto& s : summaries) {
                list.push_back(base::usage::to_json(s));
            }
            nlohmann::json issues = nlohmann::json::array();
            for (const auto& [key, seen] : m_issues) {
                issues.push_back(seen.message);
            }
            const std::string failed = m_json->finish({{"summary", list},
                {"ownership",
                    {{"checked", m_check_processes && !m_records.empty()}, {"counts_only", m_counts_only},
                        {"issues", issues}, {"lines", ownership}}},
                {"stopped_job", m_stopping}});
            if (!failed.empty()) {
                say(fmt::format("{}: {}", m_host, failed));
            }
        }
    }

    std::vector<std::string> ownership_summary() const
    {
        if (m_records.empty()) {
            return {"not checked: no rank recorded its GPU"};
        }
        if (!m_check_processes) {
            return {fmt::format("not checked: {}", m_why_unchecked)};
        }
        std::vector<std::string> lines;
        if (m_counts_only) {
            lines.emplace_back("judged by counts only: NVML shows host PIDs here (a container)");
        }
        for (const auto& [key, seen] : m_issues) {
            lines.push_back(seen.message);
        }
        if (m_stopping) {
            lines.emplace_back("the job was stopped (--enforce=kill)");
        }
        if (!lines.empty()) {
            return lines;
        }
        if (!m_job_processes_seen) {
            return {"no rank appeared in NVML's process lists: the program did not open its GPU, or not for long "
                    "enough to be seen"};
        }
        std::vector<unsigned> ranks;
        for (const auto& r : m_records) {
            ranks.push_back(r.rank);
        }
        return {fmt::format("ranks {} kept to their own GPUs", base::format_ranges(ranks))};
    }

    struct SeenIssue {
        std::set<unsigned> members;
        std::string message;
    };

    NodeMonitorOptions m_o;
    std::string m_host;
    ProcessLookup m_lookup = proc_lookup(base::Sysroot("/"));
    std::unique_ptr<base::Nvml> m_nvml;
    std::unique_ptr<base::usage::GpuSampler> m_sampler;
    std::unique_ptr<base::usage::GpuSampler> m_everything; ///< every GPU of the node, for process lists
    std::unique_ptr<JsonFile> m_json;
    base::usage::GpuSummariser m_summariser;
    unsigned m_samples = 0;
    std::vector<RankRecord> m_records;
    bool m_check_processes = true;
    std::string m_why_unchecked;
    bool m_counts_only = false;
    unsigned m_container_seen = 0;
    bool m_job_processes_seen = false;
    std::map<std::pair<int, unsigned>, SeenIssue> m_issues;
    bool m_stopping = false;
    bool m_killed = false;
    Clock::time_point m_kill_at{};
};

} // namespace

MonitorOptions monitor_for_helpers(const MonitorOptions& options, bool several_hosts, std::vector<std::string>& notes)
{
    MonitorOptions out = options;
    if (options.json_file.empty()) {
        return out;
    }
    std::error_code ec;
    std::filesystem::path file = std::filesystem::absolute(options.json_file, ec).lexically_normal();
    if (ec) {
        file = options.json_file;
    }
    std::string escaped;
    for (char c : file.string()) {
        escaped += c == '%' ? std::string("%%") : std::string(1, c);
    }
    if (several_hosts) {
        const std::string extension = file.extension().string();
        escaped.insert(escaped.size() - extension.size(), ".%h");
        notes.push_back(fmt::format("--monitor-json: each node's monitor writes its own file, {} with the node's "
                                    "short host name for %h; on a shared file system they all arrive here",
            escaped));
    }
    out.json_file = escaped;
    return out;
}

std::vector<std::string> node_monitor_arguments(const NodeMonitorOptions& o)
{
    std::vector<std::string> gpus;
    for (const auto& g : o.gpus) {
        gpus.push_back(g.to_string());
    }
    std::vector<std::string> args{"--local-ranks", std::to_string(o.local_ranks), "--gpus",
        fmt::format("{}", fmt::join(gpus, ",")), "--interval", fmt::format("{}", o.monitor.interval), "--enforce",
        to_string(o.monitor.enforce)};
    if (!o.monitor.json_file.empty()) {
        args.insert(args.end(), {"--json", o.monitor.json_file});
    }
    return args;
}

NodeMonitorOptions parse_node_monitor_arguments(const std::vector<std::string>& args)
{
    NodeMonitorOptions o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (i + 1 >= args.size()) {
            throw Error(fmt::format("{} needs a value", a));
        }
        const std::string& v = args[++i];
        if (a == "--local-ranks") {
            o.local_ranks = parse_number<unsigned>(a, v);
        } else if (a == "--gpus") {
            for (std::size_t start = 0; start <= v.size();) {
                const std::size_t end = std::min(v.find(',', start), v.size());
                auto bus = base::PciAddress::parse(v.substr(start, end - start));
                if (!bus) {
                    throw Error(fmt::format("--gpus {}: not a list of PCI bus ids", v));
                }
                o.gpus.push_back(*bus);
                start = end + 1;
            }
        } else if (a == "--interval") {
            o.monitor.interval = parse_number<double>(a, v);
        } else if (a == "--enforce") {
            if (v != "warn" && v != "kill") {
                throw Error(fmt::format("--enforce {}: expected warn or kill", v));
            }
            o.monitor.enforce = v == "kill" ? EnforceMode::kill : EnforceMode::warn;
        } else if (a == "--json") {
            o.monitor.json_file = v;
        } else {
            throw Error(fmt::format("unknown option '{}'; the node monitor is started by gpurun-rank", a));
        }
    }
    if (o.gpus.empty() || !(o.monitor.interval > 0)) {
        throw Error("the node monitor needs --gpus and --interval; it is started by gpurun-rank");
    }
    return o;
}

std::string expand_host(const std::string& pattern, const std::string& host)
{
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'h' || pattern[i + 1] == '%')) {
            out += pattern[i + 1] == 'h' ? host : "%";
            ++i;
        } else {
            out += pattern[i];
        }
    }
    return out;
}

void start_node_monitor(const std::string& program, const NodeMonitorOptions& options)
{
    std::vector<std::string> argv{program, node_monitor_flag};
    const auto rest = node_monitor_arguments(options);
    argv.insert(argv.end(), rest.begin(), rest.end());
    // Detached: the monitor's first parent goes at once, so the rank's program never sees a child
    // it did not start; it starts with no signal blocked, whatever the rank's helper blocked.
    sigset_t none;
    sigemptyset(&none);
    base::SpawnOptions spawn;
    spawn.detach = true;
    spawn.mask = &none;
    try {
        base::spawn_program(argv, spawn);
    } catch (const base::Error& e) {
        throw Error(fmt::format("cannot start the GPU monitor: {}", e.what()));
    }
}

std::function<void(pid_t program)> join_node_monitor(
    const MonitorOptions& monitor, const RankContext& context, const NodePlan& plan)
{
    const RankBinding& mine = plan.ranks.at(context.local_rank);
    if (!mine.gpu) {
        throw Error(fmt::format("--monitor: local rank {} has no GPU to watch", context.local_rank));
    }
    NodeMonitorOptions node;
    node.job_dir = job_dir_from_environment();
    node.local_ranks = context.local_size;
    node.monitor = monitor;
    for (const auto& r : plan.ranks) {
        if (r.gpu && std::find(node.gpus.begin(), node.gpus.end(), r.gpu->bus_id) == node.gpus.end()) {
            node.gpus.push_back(r.gpu->bus_id);
        }
    }
    make_private_dir(node.job_dir);
    if (context.local_rank == 0) {
        std::error_code ec;
        const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
        if (ec) {
            throw Error(fmt::format("cannot start the GPU monitor: /proc/self/exe: {}", ec.message()));
        }
        start_node_monitor(self.string(), node);
    }
    RankRecord record;
    record.rank = context.rank;
    record.local_rank = context.local_rank;
    record.pid = static_cast<unsigned>(getpid());
    const auto me = proc_lookup(base::Sysroot("/"))(record.pid);
    record.start_time = me ? me->start_time : 0;
    record.gpu = mine.gpu->bus_id;
    write_rank_record(node.job_dir, record);
    return [dir = node.job_dir, record](pid_t program) mutable {
        record.pid = static_cast<unsigned>(program);
        const auto started = proc_lookup(base::Sysroot("/"))(record.pid);
        record.start_time = started ? started->start_time : 0;
        try {
            write_rank_record(dir, record);
        } catch (const Error&) {
            // The helper's own record stays: the program is found as its child.
        }
    };
}

int run_node_monitor(const NodeMonitorOptions& options) noexcept
{
    try {
        return NodeMonitor(options).run();
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpurun: monitor: internal error: {}\n", e.what());
        base::remove_private_dir(options.job_dir);
        return 3;
    }
}

} // namespace launcher
