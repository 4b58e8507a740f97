// Stands in for MPICH's (and Intel MPI's) Hydra `mpiexec`/`mpirun` and for Slurm's `srun` in the
// launcher tests; it acts by the name it is run through (a symlink). It starts every rank on this
// machine with fork+exec, giving each the variables the real launcher would (PMI_RANK,
// MPI_LOCALRANKID, ... for Hydra; SLURM_PROCID, SLURM_LOCALID, ... for srun) and
// FAKE_LAUNCHER_HOST, the host the rank would have run on. It accepts only the options gpurun is
// expected to pass, and refuses any other, so a test sees a wrong command line as a failed job.
// With FAKE_LAUNCHER_LOG set, it appends the argv it got there, one argument per line, argv[0]
// first. FAKE_HYDRA_FLAVOUR=intel makes `mpiexec --version` answer like Intel MPI.
// It forwards SIGINT and SIGTERM to the ranks, waits for all of them and exits with the first
// non-zero status (128+signal for a rank killed by a signal), else 0.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

/// What the fake says when it refuses a command line: the message goes to stderr, exit status 1.
struct Refusal : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// One process to start: its argv, the variables to set on top of the environment, its host.
struct Task {
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;
};

constexpr std::size_t max_tasks = 4096;
volatile sig_atomic_t g_count = 0;
pid_t g_pids[max_tasks];

void forward(int sig)
{
    for (sig_atomic_t i = 0; i < g_count; ++i) {
        if (g_pids[i] > 0) {
            kill(g_pids[i], sig);
        }
    }
}

unsigned number(std::string_view what, std::string_view text)
{
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        throw Refusal(std::string(what) + ": not a number: '" + std::string(text) + "'");
    }
    return value;
}

std::vector<std::string> split(std::string_view text, char sep)
{
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        auto end = text.find(sep, start);
        out.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) {
            return out;
        }
        start = end + 1;
    }
}

void log_argv(int argc, char** argv)
{
    const char* path = std::getenv("FAKE_LAUNCHER_LOG");
    if (path == nullptr || *path == '\0') {
        return;
    }
    std::ofstream log(path, std::ios::app);
    for (int i = 0; i < argc; ++i) {
        log << argv[i] << '\n';
    }
}

/// Starts every task, forwards SIGINT/SIGTERM to them, waits for all; the first non-zero status.
int run_tasks(const std::vector<Task>& tasks)
{
    if (tasks.size() > max_tasks) {
        throw Refusal("too many ranks: " + std::to_string(tasks.size()));
    }
    struct sigaction sa { };
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::fflush(nullptr);
    for (const auto& task : tasks) {
        pid_t pid = fork();
        if (pid < 0) {
            std::perror("fake launcher: fork");
            forward(SIGKILL);
            return 1;
        }
        if (pid == 0) {
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            for (const auto& [name, value] : task.env) {
                setenv(name.c_str(), value.c_str(), 1);
            }
            std::vector<char*> args;
            for (const auto& a : task.argv) {
                args.push_back(const_cast<char*>(a.c_str()));
            }
            args.push_back(nullptr);
            execvp(args[0], args.data());
            std::fprintf(stderr, "fake launcher: cannot run '%s': %s\n", args[0], std::strerror(errno));
            _exit(127);
        }
        g_pids[g_count] = pid;
        g_count = g_count + 1;
    }
    int first_failure = 0;
    std::size_t left = tasks.size();
    while (left > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (sig_atomic_t i = 0; i < g_count; ++i) {
            if (g_pids[i] == pid) {
                g_pids[i] = 0;
                --left;
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (code != 0 && first_failure == 0) {
                    first_failure = code;
                }
            }
        }
    }
    return first_failure;
}

// ------------------------------------------------------------------------------------------------
// Hydra (MPICH, Intel MPI): mpiexec [globals] -n N [-hosts H] PROGRAM ARGS [: -n N ... ]

struct HydraHost {
    std::string name;
    std::optional<unsigned> count;
};

struct HydraSection {
    std::optional<unsigned> n;
    std::vector<HydraHost> hosts;
    std::vector<std::string> program;
};

std::vector<HydraHost> parse_hydra_hosts(const std::string& list)
{
    std::vector<HydraHost> hosts;
    for (const auto& item : split(list, ',')) {
        auto colon = item.find(':');
        if (item.empty() || colon == 0) {
            throw Refusal("empty host in '" + list + "'");
        }
        if (colon == std::string::npos) {
            hosts.push_back({item, std::nullopt});
        } else {
            hosts.push_back({item.substr(0, colon), number("host count", item.substr(colon + 1))});
        }
    }
    return hosts;
}

int hydra_version()
{
    const char* flavour = std::getenv("FAKE_HYDRA_FLAVOUR");
    if (flavour != nullptr && std::string_view(flavour) == "intel") {
        std::printf("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
                    "Copyright 2003-2023, Intel Corporation.\n");
    } else {
        std::printf("HYDRA build details:\n"
                    "    Version:                                 4.0.2\n"
                    "    Release Date:                            Thu Mar 31 10:32:41 CDT 2022\n"
                    "    CC:                              gcc\n"
                    "    Configure options:                       '--disable-option-checking' '--prefix=/usr'\n"
                    "    Process Manager:                         pmi\n"
                    "    Launchers available:                     ssh rsh fork slurm ll lsf sge manual persist\n"
                    "    Topology libraries available:            hwloc\n"
                    "    Resource management kernels available:   user slurm ll lsf sge pbs cobalt\n"
                    "    Demux engines available:                 poll select\n");
    }
    return 0;
}

int run_hydra(const std::string& name, const std::vector<std::string>& args)
{
    if (!args.empty() && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v")) {
        return hydra_version();
    }
    std::vector<std::pair<std::string, std::string>> genv;
    std::optional<unsigned> ppn;
    std::vector<HydraSection> sections(1);
    for (std::size_t i = 0; i < args.size();) {
        HydraSection& section = sections.back();
        const std::string& a = args[i];
        auto value = [&](std::size_t k) -> const std::string& {
            if (i + k >= args.size()) {
                throw Refusal("option " + a + " needs " + std::to_string(k) + " value(s)");
            }
            return args[i + k];
        };
        if (!section.program.empty()) {
            if (a == ":") {
                sections.emplace_back();
            } else {
                section.program.push_back(a);
            }
            ++i;
        } else if (a == "-genv") {
            genv.emplace_back(value(1), value(2));
            i += 3;
        } else if (a == "-genvlist") {
            // The variables are in the environment every rank inherits here already.
            for (const auto& var : split(value(1), ',')) {
                if (var.empty()) {
                    throw Refusal("empty name in -genvlist " + value(1));
                }
            }
            i += 2;
        } else if (a == "-bind-to") {
            if (value(1) != "none") {
                throw Refusal("-bind-to " + value(1) + ": the fake only knows none");
            }
            i += 2;
        } else if (a == "-ppn") {
            ppn = number("-ppn", value(1));
            i += 2;
        } else if (a == "-n" || a == "-np") {
            section.n = number(a, value(1));
            i += 2;
        } else if (a == "-hosts" || a == "-host") {
            auto hosts = parse_hydra_hosts(value(1));
            if (a == "-host" && hosts.size() != 1) {
                throw Refusal("-host takes one host, not '" + value(1) + "'");
            }
            section.hosts.insert(section.hosts.end(), hosts.begin(), hosts.end());
            i += 2;
        } else if (a == ":") {
            throw Refusal("':' before any program");
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(stderr, "fake %s: unknown option %s\n", name.c_str(), a.c_str());
            return 1;
        } else {
            section.program.push_back(a);
            ++i;
        }
    }

    struct Placed {
        std::string host;
        const HydraSection* section;
    };
    std::vector<Placed> ranks;
    for (const auto& section : sections) {
        if (section.program.empty()) {
            throw Refusal("a section without a program");
        }
        if (!section.n) {
            throw Refusal("a section without -n (program " + section.program[0] + ")");
        }
        std::vector<HydraHost> hosts = section.hosts;
        if (hosts.empty()) {
            hosts.push_back({"localhost", std::nullopt});
        }
        const bool one_host_all = hosts.size() == 1 && !hosts[0].count && !ppn;
        auto slots = [&](const HydraHost& h) { return h.count.value_or(ppn.value_or(1)); };
        if (!one_host_all && std::none_of(hosts.begin(), hosts.end(), slots)) {
            throw Refusal("the hosts take no ranks");
        }
        unsigned left = *section.n;
        for (std::size_t h = 0; left > 0; h = (h + 1) % hosts.size()) {
            unsigned here = one_host_all ? left : slots(hosts[h]);
            for (unsigned k = 0; k < here && left > 0; ++k, --left) {
                ranks.push_back({hosts[h].name, &section});
            }
        }
    }
    std::map<std::string, unsigned> per_host;
    for (const auto& r : ranks) {
        ++per_host[r.host];
    }
    std::map<std::string, unsigned> seen;
    std::vector<Task> tasks;
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
        Task task;
        task.argv = ranks[rank].section->program;
        task.env = genv;
        task.env.emplace_back("PMI_RANK", std::to_string(rank));
        task.env.emplace_back("PMI_SIZE", std::to_string(ranks.size()));
        task.env.emplace_back("MPI_LOCALRANKID", std::to_string(seen[ranks[rank].host]++));
        task.env.emplace_back("MPI_LOCALNRANKS", std::to_string(per_host[ranks[rank].host]));
        task.env.emplace_back("FAKE_LAUNCHER_HOST", ranks[rank].host);
        tasks.push_back(std::move(task));
    }
    return run_tasks(tasks);
}

// ------------------------------------------------------------------------------------------------
// Slurm: srun [options] PROGRAM ARGS

/// "node[1-3,7]x" → node1x node2x node3x node7x; a plain "a,b" → a b. One bracket group at most.
std::vector<std::string> expand_nodes(const std::string& text)
{
    auto open = text.find('[');
    if (open == std::string::npos) {
        auto names = split(text, ',');
        for (const auto& n : names) {
            if (n.empty()) {
                throw Refusal("empty node name in '" + text + "'");
            }
        }
        return names;
    }
    auto close = text.find(']', open);
    if (close == std::string::npos || text.find('[', close) != std::string::npos || text.find(',') < open) {
        throw Refusal("node list '" + text + "': the fake expands one prefix[a-b,...] group only");
    }
    const std::string prefix = text.substr(0, open);
    const std::string suffix = text.substr(close + 1);
    std::vector<std::string> out;
    for (const auto& range : split(std::string_view(text).substr(open + 1, close - open - 1), ',')) {
        auto dash = range.find('-');
        const std::string low = range.substr(0, dash);
        unsigned a = number("node range", low);
        unsigned b = dash == std::string::npos ? a : number("node range", range.substr(dash + 1));
        for (unsigned v = a; v <= b; ++v) {
            std::string digits = std::to_string(v);
            if (digits.size() < low.size()) {
                digits.insert(0, low.size() - digits.size(), '0');
            }
            out.push_back(prefix + digits + suffix);
        }
    }
    return out;
}

/// Slurm's compressed per-node counts: {2,2,1} → "2(x2),1".
std::string compress(const std::vector<unsigned>& counts)
{
    std::string out;
    for (std::size_t i = 0; i < counts.size();) {
        std::size_t j = i;
        while (j < counts.size() && counts[j] == counts[i]) {
            ++j;
        }
        out += (out.empty() ? "" : ",") + std::to_string(counts[i]);
        if (j - i > 1) {
            out += "(x" + std::to_string(j - i) + ")";
        }
        i = j;
    }
    return out;
}

int run_srun(const std::vector<std::string>& args)
{
    if (!args.empty() && (args[0] == "--version" || args[0] == "-V")) {
        std::printf("slurm 23.02.7\n");
        return 0;
    }
    std::optional<unsigned> ntasks, per_node, nodes;
    std::optional<std::string> nodelist;
    std::vector<std::pair<std::string, std::string>> exports;
    std::vector<std::string> program;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (!program.empty() || a.empty() || a[0] != '-') {
            program.push_back(a);
            continue;
        }
        // Split "--opt=value" and "-n4"; options with a value take the next word otherwise.
        std::string opt = a;
        std::optional<std::string> inline_value;
        if (a.rfind("--", 0) == 0) {
            if (auto eq = a.find('='); eq != std::string::npos) {
                opt = a.substr(0, eq);
                inline_value = a.substr(eq + 1);
            }
        } else if (a.size() > 2) {
            opt = a.substr(0, 2);
            inline_value = a.substr(2);
        }
        auto value = [&]() -> std::string {
            if (inline_value) {
                return *inline_value;
            }
            if (i + 1 >= args.size()) {
                throw Refusal("option " + opt + " needs a value");
            }
            return args[++i];
        };
        if (opt == "--ntasks" || opt == "-n") {
            ntasks = number(opt, value());
        } else if (opt == "--ntasks-per-node") {
            per_node = number(opt, value());
        } else if (opt == "--nodes" || opt == "-N") {
            nodes = number(opt, value());
        } else if (opt == "--nodelist" || opt == "-w") {
            nodelist = value();
        } else if (opt == "--cpu-bind") {
            if (auto v = value(); v != "none") {
                throw Refusal("--cpu-bind=" + v + ": the fake only knows none (gpurun binds the ranks itself)");
            }
        } else if (opt == "--export") {
            auto v = value();
            if (v != "ALL" && v.rfind("ALL,", 0) != 0) {
                throw Refusal("--export=" + v + ": must be ALL or ALL,...: the ranks need the whole environment");
            }
            for (const auto& item : split(v, ',')) {
                if (auto eq = item.find('='); eq != std::string::npos) {
                    exports.emplace_back(item.substr(0, eq), item.substr(eq + 1));
                }
            }
        } else if (opt == "--kill-on-bad-exit" || opt == "-K") {
            // A flag; "--kill-on-bad-exit=1" and "-K1" carry an inline value, which is fine.
        } else {
            std::fprintf(stderr, "fake srun: unknown option %s\n", a.c_str());
            return 1;
        }
    }
    if (program.empty()) {
        throw Refusal("no program");
    }
    std::vector<std::string> hosts;
    if (nodelist) {
        hosts = expand_nodes(*nodelist);
    } else if (const char* job = std::getenv("SLURM_JOB_NODELIST"); job != nullptr && *job != '\0') {
        hosts = expand_nodes(job);
    } else {
        throw Refusal("no nodes: neither --nodelist nor SLURM_JOB_NODELIST");
    }
    if (nodes && *nodes != hosts.size()) {
        throw Refusal("--nodes " + std::to_string(*nodes) + " but the node list has " + std::to_string(hosts.size()));
    }
    const unsigned node_count = static_cast<unsigned>(hosts.size());
    const unsigned total = ntasks.value_or(per_node.value_or(1) * node_count);
    const unsigned each = per_node.value_or((total + node_count - 1) / node_count);
    if (each == 0 || total > each * node_count) {
        throw Refusal(std::to_string(total) + " tasks do not fit " + std::to_string(node_count) + " nodes x " +
            std::to_string(each));
    }
    std::vector<unsigned> counts;
    for (unsigned left = total; left > 0;) {
        counts.push_back(std::min(each, left));
        left -= counts.back();
    }
    std::string used;
    for (std::size_t n = 0; n < counts.size(); ++n) {
        used += (n == 0 ? "" : ",") + hosts[n];
    }
    std::vector<Task> tasks;
    unsigned rank = 0;
    for (std::size_t n = 0; n < counts.size(); ++n) {
        for (unsigned local = 0; local < counts[n]; ++local, ++rank) {
            Task task;
            task.argv = program;
            task.env = exports;
            task.env.emplace_back("SLURM_PROCID", std::to_string(rank));
            task.env.emplace_back("SLURM_NTASKS", std::to_string(total));
            task.env.emplace_back("SLURM_NPROCS", std::to_string(total));
            task.env.emplace_back("SLURM_LOCALID", std::to_string(local));
            task.env.emplace_back("SLURM_NODEID", std::to_string(n));
            task.env.emplace_back("SLURM_STEP_NUM_TASKS", std::to_string(total));
            task.env.emplace_back("SLURM_STEP_NUM_NODES", std::to_string(counts.size()));
            task.env.emplace_back("SLURM_STEP_TASKS_PER_NODE", compress(counts));
            task.env.emplace_back("SLURM_STEP_NODELIST", used);
            if (per_node) {
                // Real srun sets it only when --ntasks-per-node was given.
                task.env.emplace_back("SLURM_NTASKS_PER_NODE", std::to_string(*per_node));
            }
            task.env.emplace_back("FAKE_LAUNCHER_HOST", hosts[n]);
            tasks.push_back(std::move(task));
        }
    }
    return run_tasks(tasks);
}

} // namespace

int main(int argc, char** argv)
{
    log_argv(argc, argv);
    std::string name = argv[0];
    if (auto slash = name.rfind('/'); slash != std::string::npos) {
        name = name.substr(slash + 1);
    }
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (name == "mpiexec" || name == "mpirun") {
            return run_hydra(name, args);
        }
        if (name == "srun") {
            return run_srun(args);
        }
        std::fprintf(stderr, "fake launcher: run me as mpiexec, mpirun or srun, not '%s'\n", name.c_str());
        return 1;
    } catch (const Refusal& e) {
        std::fprintf(stderr, "fake %s: %s\n", name.c_str(), e.what());
        return 1;
    }
}
