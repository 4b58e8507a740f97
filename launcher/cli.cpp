#include "launcher/cli.hpp"

#include "base/batch_split.hpp"
#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/launchers/backends.hpp"
#include "base/launchers/hostfile.hpp"
#include "base/spelling.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/rank_profiler.hpp"
#include "launcher/shell_words.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <optional>

namespace launcher {

namespace {

using base::Error;

// --monitor=SECONDS: NVML's utilisation sample period is 1/6 s to 1 s, so faster sampling only
// repeats readings; an hour apart says nothing about a job.
constexpr double min_monitor_interval = 0.1;
constexpr double max_monitor_interval = 3600;

constexpr const char* description =
    "Start one MPI rank per GPU, each bound to the CPU cores and NUMA memory nearest its GPU,\n"
    "with the environment PyTorch, Horovod and plain MPI+NCCL expect. Starts the ranks with Open MPI's\n"
    "mpirun, MPICH or Intel MPI's mpiexec, or Slurm's srun.";

constexpr const char* footer = R"(Examples:
  gpurun -np 8 python train.py            one rank per GPU on this node
  gpurun --dry-run                         show the plan and the launcher command
  gpurun --cpu-only -np 2 ./app            rehearse without GPUs
  gpurun -H n01:8,n02:8 python train.py    two nodes, eight GPUs each
  gpurun -H 'gpu[01-04]' python train.py   four nodes (Slurm's range syntax), one rank per GPU
  gpurun --hostfile hosts --pack -np 16 python train.py
                                           the fewest hosts of the hostfile that hold 16 ranks
  gpurun --nccl-check python train.py      what NCCL chose (transports) and what went wrong
  gpurun --profile nsys python train.py    an Nsight Systems report of rank 0 (gpudoctor profile)
  gpurun --monitor python train.py         GPU kernel-active time, memory, power; one rank per GPU

Exit status: the job's own status (128+N when it ended by signal N); 2 for usage or input
errors, before anything starts. See gpurun(1).)";

// CLI11's usage line cannot say that the program and its arguments follow the options.
class HelpFormatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App*, std::string) const override
    {
        return "\nUsage: gpurun [OPTIONS] [-np N] [--] PROGRAM [ARGS...]\n";
    }

    // Option groups one blank line apart (CLI11 puts two).
    std::string make_group(std::string group, bool is_positional, std::vector<const CLI::Option*> opts) const override
    {
        std::string out = group == "Options" ? "\n" : "";
        out += group + ":\n";
        for (const CLI::Option* opt : opts) {
            out += make_option(opt, is_positional);
        }
        return out;
    }

    // An optional value is attached with '=' ("--nccl-check[=WHEN]"), not after a space.
    std::string make_option_opts(const CLI::Option* opt) const override
    {
        const std::string& text = opt->get_option_text();
        if (text.rfind("[=", 0) == 0) {
            return text;
        }
        return CLI::Formatter::make_option_opts(opt);
    }
};

// "HOST=FILE": the host, when the text before '=' is a host name (a path has a '/' or is not a name).
std::optional<std::string> topology_host(const std::string& value)
{
    const auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
        return std::nullopt;
    }
    const std::string host = value.substr(0, eq);
    for (char c : host) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                c == '_')) {
            return std::nullopt;
        }
    }
    return host;
}

// `separator` is how the value was attached to the option in the message: " " or "=".
template <typename T>
T choose(const std::string& option, const std::string& value, const std::vector<std::pair<std::string, T>>& choices,
    const char* separator = " ")
{
    std::vector<std::string> names;
    for (const auto& [name, v] : choices) {
        if (name == value) {
            return v;
        }
        names.push_back(name);
    }
    std::string hint = base::closest_match(value, names);
    throw Error(fmt::format("{}{}{}: expected one of {}{}", option, separator, value, fmt::join(names, ", "),
        hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

/// What CLI11 fills before it is checked and turned into LaunchOptions: the values that are words
/// to choose from, lists to parse, or counts whose absence means something.
struct RawOptions {
    unsigned np = 0;
    std::string host_list;
    unsigned gpus_per_node = 0;
    std::string launcher = "auto";
    std::string launcher_args;
    std::string free_gpus;
    unsigned master_port = 0;
    std::string bind = "numa";
    std::string visibility = "all";
    std::string memory = "preferred";
    std::string nic_binding = "ucx";
    std::vector<std::string> topologies;
    unsigned global_batch = 0;
    std::string speeds;
    std::optional<std::string> nccl_check; ///< read by rewrite_for_cli11, not by CLI11
    std::string nccl_check_unused;
    std::string profiler;
    std::string profile_ranks;
    std::optional<std::string> monitor; ///< read by rewrite_for_cli11, not by CLI11
    std::string monitor_unused;
    std::string enforce;
};

/// Where the ranks run and what starts them.
void add_launch_options(CLI::App& app, RawOptions& r, LaunchOptions& o)
{
    const char* group = "Launch";
    base::add_number(app, "-n,--np", r.np, "Number of ranks (-np N also works); default: one per GPU", "N")
        ->group(group);
    app.add_option("-H,--host", r.host_list, "Hosts and slots, as h1:8,h2:8")->type_name("LIST")->group(group);
    app.add_option("--hostfile", o.hostfile, "Hostfile: 'host slots=N' or 'host:N' lines")
        ->type_name("FILE")
        ->group(group);
    base::add_number(app, "--gpus-per-node", r.gpus_per_node,
        "GPUs of each host without slots (default: Slurm's count, else the host's topology)", "N")
        ->group(group);
    app.add_option("--launcher", r.launcher,
           "What starts the ranks: auto (default: srun in a Slurm job, else by mpirun --version, else local), "
           "openmpi, mpich (MPICH or Intel MPI), srun, local (gpurun's own, this node only)")
        ->type_name("NAME")
        ->group(group);
    app.add_option("--launcher-args", r.launcher_args, "Extra arguments for the launcher, split like shell words")
        ->type_name("'ARGS'")
        ->group(group);
    app.add_flag("--pack", o.pack, "Use the fewest hosts that hold the job (most free GPUs first)")->group(group);
    app.add_option("--free-gpus", r.free_gpus, "With --pack: free GPUs per host, as h1:4,h2:8 (default: slots)")
        ->type_name("LIST")
        ->group(group);
    app.add_option("-x", o.exports, "Export NAME (or NAME=VALUE) to every rank, as mpirun -x (any launcher)")
        ->type_name("NAME[=VALUE]")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group(group);
    app.add_flag("--env-all", o.env_all,
           "Pass every variable to the ranks on other hosts, not only PATH, NCCL_*, CUDA_*, PYTHON*, ...")
        ->group(group);
    app.add_option("--master-addr", o.master_addr, "MASTER_ADDR for the ranks (default: the first host's address)")
        ->type_name("ADDR")
        ->group(group);
    base::add_number(app, "--master-port", r.master_port,
        "MASTER_PORT for the ranks (default: a free port for a job on this node alone, else 29500)", "PORT")
        ->group(group);
    app.add_flag("--allow-run-as-root", o.allow_run_as_root, "Let Open MPI run as root (passed to mpirun)")
        ->group(group);
    base::add_number(
        app, "--grace", o.grace_seconds, "Seconds between passing on a signal and SIGKILL (default 10)", "SECONDS")
        ->group(group);
}

/// Which GPU, cores and memory each rank gets.
void add_placement_options(CLI::App& app, RawOptions& r, LaunchOptions& o)
{
    const char* group = "Placement";
    app.add_option("--bind", r.bind, "CPU binding: numa (default), socket, cores or none")
        ->type_name("MODE")
        ->group(group);
    base::add_number(
        app, "--cpus-per-rank", o.plan.cpus_per_rank, "Whole cores per rank (default: an equal share)", "K")
        ->group(group);
    base::add_number(app, "--ranks-per-gpu", o.plan.ranks_per_gpu, "Ranks that share each GPU (default 1)", "K")
        ->group(group);
    app.add_option("--gpu-visibility", r.visibility,
           "all (default: every GPU visible, rank's is GPURUN_GPU) or isolate (CUDA_VISIBLE_DEVICES=its GPU)")
        ->type_name("MODE")
        ->group(group);
    app.add_option("--mem-bind", r.memory, "Memory policy on the rank's NUMA nodes: preferred (default), strict, none")
        ->type_name("POLICY")
        ->group(group);
    app.add_flag("--cpu-only", o.plan.cpu_only, "Run without GPUs: ranks get disjoint cores spread over NUMA nodes")
        ->group(group);
    app.add_option("--topology", r.topologies,
           "Plan from this hwloc XML instead of this machine; HOST=FILE (with --dry-run): preview HOST from FILE")
        ->type_name("[HOST=]FILE")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group(group);
    app.add_option(
           "--sysroot", o.plan.sysroot, "Read sysfs (GPU locality fallback) and the MPS pipe under DIR (default /)")
        ->type_name("DIR")
        ->group(group);
    app.add_option("--nic-binding", r.nic_binding,
           "Point each rank at its GPU's nearest NIC (InfiniBand HCA): ucx (default: UCX_NET_DEVICES), nccl (also "
           "NCCL_IB_HCA), none")
        ->type_name("MODE")
        ->group(group);
}

/// What gpurun and the ranks print, and where.
void add_output_options(CLI::App& app, LaunchOptions& o)
{
    const char* group = "Output";
    app.add_flag("--dry-run", o.dry_run, "Print the plan and the launcher command; start nothing")->group(group);
    app.add_flag("--json", o.json, "With --dry-run: print the plan as JSON")->group(group);
    app.add_flag("--report-bindings", o.report_bindings, "Each rank prints the binding it really got")->group(group);
    app.add_flag("--tag-output", o.output.tag, "Put [rank] before every line the ranks write (stdout and stderr)")
        ->group(group);
    app.add_option(
           "--log-dir", o.output.log_dir, "Also write each rank's output to DIR/rank<R>.out and .err, on its host")
        ->type_name("DIR")
        ->group(group);
    app.add_option("--json-summary", o.json_summary,
           "When the job ends, write how it ended to FILE as JSON: exit status, the rank that failed first (host, "
           "local rank, status, time, last stderr lines)")
        ->type_name("FILE")
        ->group(group);
}

/// What gpurun adds to the job: a split batch, the NCCL check, a profiler, the monitor.
void add_feature_options(CLI::App& app, RawOptions& r, LaunchOptions& o)
{
    const char* group = "Job features";
    base::add_number(app, "--global-batch", r.global_batch,
        "Split B samples per step over the ranks: GPURUN_LOCAL_BATCH, GPURUN_LOSS_WEIGHT", "B")
        ->group(group);
    app.add_option("--speeds", r.speeds, "With --global-batch: each rank's relative speed, in rank order (1,2,2)")
        ->type_name("LIST")
        ->group(group);
    // Read by rewrite_for_cli11, not by CLI11 (which would take the program as its value): listed
    // here for --help and the did-you-mean of unknown options.
    app.add_option("--nccl-check", r.nccl_check_unused,
           "Print a verdict on the ranks' NCCL logs when the job ends (=init: also right after NCCL init)")
        ->option_text("[=WHEN]")
        ->group(group);
    app.add_option("--nccl-log-dir", o.nccl_log_dir, "With --nccl-check: keep the NCCL logs in DIR")
        ->type_name("DIR")
        ->group(group);
    app.add_option(
           "--profile", r.profiler, "Run ranks under a profiler: nsys (Nsight Systems; read with gpudoctor profile)")
        ->type_name("TOOL")
        ->group(group);
    app.add_option(
           "--profile-ranks", r.profile_ranks, "With --profile: ranks to profile, as 0,3 or 0-7 or all (default 0)")
        ->type_name("LIST")
        ->group(group);
    app.add_option("--profile-dir", o.profile.dir,
           "With --profile: write the reports to DIR (default ./gpurun-profile-DATE-TIME)")
        ->type_name("DIR")
        ->group(group);
    // Like --nccl-check: its value is only ever attached with '='.
    app.add_option("--monitor", r.monitor_unused,
           "Sample GPUs every SECONDS (default 1): kernel-active time, memory, power, one rank per GPU; a summary at "
           "the end")
        ->option_text("[=SECONDS]")
        ->group(group);
    app.add_option("--monitor-json", o.monitor.json_file, "With --monitor: write the samples and summary to FILE")
        ->type_name("FILE")
        ->group(group);
    app.add_option(
           "--enforce", r.enforce, "With --monitor, when ranks share a GPU or use another's: warn (default) or kill")
        ->type_name("MODE")
        ->group(group);
}

/// gpurun's argv as CLI11 is to read it: mpirun's single-dash "-np" is what users type and CLI11
/// reads as --np; --nccl-check and --monitor take a value only after '=' (the next word may be the
/// program), so they are taken out here into `r`. Only words in option position are touched: the
/// scan stops at "--" or the program, and skips option values.
std::vector<std::string> rewrite_for_cli11(const CLI::App& app, const std::vector<std::string>& argv, RawOptions& r)
{
    std::vector<std::string> args;
    bool in_options = true;
    bool value_next = false;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        std::string a = argv[i];
        if (in_options && !value_next) {
            if (a == "-np") {
                a = "--np";
            } else if (a.rfind("-np=", 0) == 0) {
                a = "--np=" + a.substr(4);
            } else if (a == "--nccl-check" || a.rfind("--nccl-check=", 0) == 0) {
                r.nccl_check = a == "--nccl-check" ? "end" : a.substr(a.find('=') + 1);
                continue;
            } else if (a == "--monitor" || a.rfind("--monitor=", 0) == 0) {
                r.monitor = a == "--monitor" ? "1" : a.substr(a.find('=') + 1);
                continue;
            }
            if (a == "--" || a.empty() || a[0] != '-') {
                in_options = false;
            } else if (a.find('=') == std::string::npos) {
                const std::string name = a.rfind("--", 0) == 0 ? a.substr(2) : a.substr(1);
                for (const CLI::Option* opt : app.get_options()) {
                    if (opt->get_items_expected_min() > 0 && (opt->check_lname(name) || opt->check_sname(name))) {
                        value_next = true;
                    }
                }
            }
        } else {
            value_next = false;
        }
        args.push_back(a);
    }
    return args;
}

/// The program and its arguments: what CLI11 left after the options, without a leading "--". A
/// word left that looks like an option is an unknown one (base::Error with the closest name).
std::vector<std::string> program_words(const CLI::App& app)
{
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front() == "--") {
        rest.erase(rest.begin());
    } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
        std::vector<std::string> names;
        for (const CLI::Option* opt : app.get_options()) {
            for (const auto& n : opt->get_lnames()) {
                names.push_back("--" + n);
            }
        }
        names.push_back("-np");
        std::string word = rest.front().substr(0, rest.front().find('='));
        std::string hint = base::closest_match(word, names);
        throw Error(fmt::format("unknown option {}{}; see gpurun --help", base::quote_input(word),
            hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
    }
    return rest;
}

/// -x NAME[=VALUE]: a name as the shell and the launchers take it ("-x --" would hand mpirun "--"
/// as a name).
void check_exports(const std::vector<std::string>& exports)
{
    for (const auto& e : exports) {
        const std::string name = e.substr(0, e.find('='));
        const bool valid = !name.empty() &&
            (std::isalpha(static_cast<unsigned char>(name[0])) != 0 || name[0] == '_') &&
            std::all_of(name.begin(), name.end(),
                [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
        if (!valid) {
            throw Error(fmt::format("-x {}: expected NAME or NAME=VALUE, NAME of letters, digits and _, not starting "
                                    "with a digit",
                base::quote_input(e)));
        }
    }
}

void apply_launch(const CLI::App& app, const RawOptions& r, LaunchOptions& o)
{
    if (app.count("--gpus-per-node") > 0) {
        if (r.gpus_per_node == 0 || r.gpus_per_node > max_gpus_per_node) {
            throw Error(fmt::format(
                "--gpus-per-node {}: expected a count of GPUs from 1 to {}", r.gpus_per_node, max_gpus_per_node));
        }
        o.gpus_per_node = r.gpus_per_node;
    }
    if (app.count("--np") > 0) {
        o.np = r.np;
    }
    if (app.count("--master-port") > 0) {
        if (r.master_port == 0 || r.master_port > 65535) {
            throw Error(fmt::format("--master-port {}: expected a port number from 1 to 65535", r.master_port));
        }
        o.master_port = r.master_port;
    }
    if (!(o.grace_seconds >= 0 && o.grace_seconds <= 86400)) {
        throw Error(fmt::format("--grace {}: expected a number of seconds from 0 to 86400", o.grace_seconds));
    }
    std::vector<std::pair<std::string, LauncherKind>> launchers = {{"auto", LauncherKind::automatic}};
    for (const auto& b : launchers::table()) {
        launchers.emplace_back(b.word, b.kind);
    }
    o.launcher = choose<LauncherKind>("--launcher", r.launcher, launchers);
    if (app.count("--launcher-args") > 0) {
        o.launcher_args = split_shell_words(r.launcher_args, "--launcher-args");
    }
    if (app.count("--free-gpus") > 0) {
        if (!o.pack) {
            throw Error("--free-gpus needs --pack: the free GPUs are what --pack chooses hosts by");
        }
        o.free_gpus = launchers::parse_host_list(r.free_gpus, "--free-gpus", 0);
        for (const auto& h : o.free_gpus) {
            if (!h.slots) {
                throw Error(fmt::format("--free-gpus {}: {} has no count; write host:N", r.free_gpus, h.name));
            }
        }
    }
    if (o.pack && !o.np) {
        throw Error("--pack needs -np N: the number of ranks decides how few hosts hold the job");
    }
    if (o.np && *o.np == 0) {
        throw Error("-np 0: a job needs at least one rank");
    }
    if (o.np && *o.np > max_job_ranks) {
        throw Error(fmt::format("-np {}: more than {} ranks, more than a job may have", *o.np, max_job_ranks));
    }
    if (!r.host_list.empty() && !o.hostfile.empty()) {
        throw Error("-H and --hostfile both given; use one of them");
    }
    if (!r.host_list.empty()) {
        o.hosts = launchers::parse_host_list(r.host_list);
    }
    if (!o.hostfile.empty()) {
        o.hosts = launchers::read_hostfile(o.hostfile);
    }
    check_exports(o.exports);
    if (!o.master_addr.empty() &&
        (o.master_addr.front() == '-' || std::any_of(o.master_addr.begin(), o.master_addr.end(), [](char c) {
            return std::isspace(static_cast<unsigned char>(c)) != 0 || std::iscntrl(static_cast<unsigned char>(c)) != 0;
        }))) {
        throw Error(
            fmt::format("--master-addr {}: expected a host name or IP address", base::quote_input(o.master_addr)));
    }
}

void apply_placement(const RawOptions& r, LaunchOptions& o)
{
    o.plan.bind = choose<BindMode>("--bind", r.bind,
        {{"numa", BindMode::numa}, {"socket", BindMode::socket}, {"cores", BindMode::cores}, {"none", BindMode::none}});
    o.plan.visibility = choose<GpuVisibility>(
        "--gpu-visibility", r.visibility, {{"all", GpuVisibility::all}, {"isolate", GpuVisibility::isolate}});
    o.plan.memory = choose<base::MemoryPolicy>("--mem-bind", r.memory,
        {{"preferred", base::MemoryPolicy::preferred}, {"strict", base::MemoryPolicy::strict},
            {"none", base::MemoryPolicy::none}});
    if (o.plan.ranks_per_gpu == 0) {
        throw Error("--ranks-per-gpu 0: a GPU needs at least one rank");
    }
    if (o.plan.ranks_per_gpu > max_ranks_per_gpu) {
        throw Error(fmt::format("--ranks-per-gpu {}: at most {} ranks can share a GPU (MPS serves 48 clients on a "
                                "GPU)",
            o.plan.ranks_per_gpu, max_ranks_per_gpu));
    }
    o.nic_binding = choose<NicBinding>("--nic-binding", r.nic_binding,
        {{"ucx", NicBinding::ucx}, {"nccl", NicBinding::nccl}, {"none", NicBinding::none}});
    for (const auto& t : r.topologies) {
        if (auto host = topology_host(t)) {
            const std::string file = t.substr(host->size() + 1);
            if (file.empty()) {
                throw Error(fmt::format("--topology {}: expected HOST=FILE with an hwloc XML file", t));
            }
            for (const auto& [seen, unused] : o.host_topologies) {
                if (seen == *host) {
                    throw Error(fmt::format("--topology {}: {} has a topology already", t, *host));
                }
            }
            o.host_topologies.emplace_back(*host, file);
        } else if (!o.plan.topology_file.empty()) {
            throw Error(fmt::format("--topology {} and --topology {}: one topology for every host; for a host of "
                                    "its own, write --topology HOST=FILE",
                o.plan.topology_file, t));
        } else {
            o.plan.topology_file = t;
        }
    }
    if (!o.host_topologies.empty() && !o.dry_run) {
        throw Error(fmt::format("--topology {}={} needs --dry-run: in a real run each host's rank helper plans from "
                                "that host's own topology",
            o.host_topologies.front().first, o.host_topologies.front().second));
    }
}

void apply_output(const CLI::App& app, const LaunchOptions& o)
{
    if (o.json && !o.dry_run) {
        throw Error("--json needs --dry-run: a running job's output is the program's own");
    }
    if (app.count("--log-dir") > 0 && o.output.log_dir.empty()) {
        throw Error("--log-dir '': expected a directory");
    }
    if (app.count("--json-summary") > 0 && o.json_summary.empty()) {
        throw Error("--json-summary '': expected a file name");
    }
}

void apply_nccl_check(const CLI::App& app, const RawOptions& r, LaunchOptions& o)
{
    if (r.nccl_check) {
        o.nccl_check = choose<NcclCheckMode>(
            "--nccl-check", *r.nccl_check, {{"end", NcclCheckMode::end}, {"init", NcclCheckMode::init}}, "=");
    }
    if (app.count("--nccl-log-dir") > 0 && o.nccl_log_dir.empty()) {
        throw Error("--nccl-log-dir '': expected a directory");
    }
    if (app.count("--nccl-log-dir") > 0 && o.nccl_check == NcclCheckMode::off) {
        throw Error("--nccl-log-dir needs --nccl-check: only the check makes NCCL write log files");
    }
    if (o.nccl_check != NcclCheckMode::off) {
        for (const auto& e : o.exports) {
            if (e.substr(0, e.find('=')) == "NCCL_DEBUG_FILE") {
                throw Error(fmt::format("-x {} and --nccl-check both given: the check has NCCL write its own log "
                                        "files; pass --nccl-log-dir DIR to keep them",
                    e));
            }
        }
    }
}

void apply_profile(const CLI::App& app, const RawOptions& r, LaunchOptions& o)
{
    if (app.count("--profile") > 0) {
        o.profile.profiler = choose<Profiler>("--profile", r.profiler, {{"nsys", Profiler::nsys}});
    }
    if (app.count("--profile-ranks") > 0 && o.profile.profiler == Profiler::none) {
        throw Error("--profile-ranks needs --profile: say which profiler runs the ranks (--profile nsys)");
    }
    if (app.count("--profile-dir") > 0 && o.profile.profiler == Profiler::none) {
        throw Error("--profile-dir needs --profile: say which profiler writes the reports (--profile nsys)");
    }
    if (app.count("--profile-dir") > 0 && o.profile.dir.empty()) {
        throw Error("--profile-dir '': expected a directory");
    }
    if (app.count("--profile-ranks") > 0) {
        o.profile.ranks = parse_rank_list(r.profile_ranks, "--profile-ranks");
    }
}

void apply_monitor(const CLI::App& app, const RawOptions& r, LaunchOptions& o)
{
    const auto& monitor = r.monitor;
    if (monitor) {
        double seconds = 0;
        auto [ptr, ec] = std::from_chars(monitor->data(), monitor->data() + monitor->size(), seconds);
        if (monitor->empty() || ec != std::errc() || ptr != monitor->data() + monitor->size() ||
            !(seconds >= min_monitor_interval && seconds <= max_monitor_interval)) {
            throw Error(fmt::format("--monitor={}: expected the seconds between samples, from {} to {}", *monitor,
                min_monitor_interval, max_monitor_interval));
        }
        o.monitor.interval = seconds;
        if (o.plan.cpu_only) {
            throw Error("--monitor and --cpu-only: the monitor samples GPUs, and the ranks get none");
        }
    }
    if (app.count("--monitor-json") > 0 && !monitor) {
        throw Error("--monitor-json needs --monitor: only the monitor has samples to write");
    }
    if (app.count("--monitor-json") > 0 && o.monitor.json_file.empty()) {
        throw Error("--monitor-json '': expected a file");
    }
    if (app.count("--enforce") > 0) {
        o.monitor.enforce =
            choose<EnforceMode>("--enforce", r.enforce, {{"warn", EnforceMode::warn}, {"kill", EnforceMode::kill}});
        if (!monitor) {
            throw Error(
                fmt::format("--enforce {} needs --monitor: the monitor is what sees ranks share a GPU", r.enforce));
        }
    }
}

void apply_global_batch(const CLI::App& app, const RawOptions& r, LaunchOptions& o)
{
    if (app.count("--speeds") > 0 && app.count("--global-batch") == 0) {
        throw Error("--speeds needs --global-batch: the speeds say how to split a global batch over the ranks");
    }
    if (app.count("--global-batch") > 0) {
        if (r.global_batch == 0) {
            throw Error("--global-batch 0: expected at least one sample per rank");
        }
        o.batch.global_batch = r.global_batch;
        if (app.count("--speeds") > 0) {
            o.batch.speeds = base::parse_speeds(r.speeds, "--speeds");
        }
    }
}

} // namespace

CliRequest parse_command_line(const std::vector<std::string>& argv)
{
    CliRequest request;
    LaunchOptions& o = request.options;

    CLI::App app(description, "gpurun");
    app.prefix_command();
    app.set_help_flag();
    app.footer(footer);
    app.formatter(std::make_shared<HelpFormatter>());
    app.get_formatter()->column_width(30);
    bool help = false;
    bool version = false;
    app.add_flag("-h,--help", help, "Print this help and exit");
    app.add_flag("--version", version, "Print the version and exit");
    RawOptions raw;
    add_launch_options(app, raw, o);
    add_placement_options(app, raw, o);
    add_output_options(app, o);
    add_feature_options(app, raw, o);

    const std::vector<std::string> args = rewrite_for_cli11(app, argv, raw);
    try {
        app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
    } catch (const CLI::ParseError& e) {
        std::string what = e.what();
        throw Error(fmt::format("{}; see gpurun --help", what));
    }
    base::refuse_empty_values(app);
    if (help) {
        request.help_text = app.help(); // made only when asked: formatting it is a good part of a launch's parse
        request.action = CliRequest::Action::help;
        return request;
    }
    if (version) {
        request.action = CliRequest::Action::version;
        return request;
    }
    o.program = program_words(app);
    apply_launch(app, raw, o);
    apply_placement(raw, o);
    apply_output(app, o);
    apply_nccl_check(app, raw, o);
    apply_profile(app, raw, o);
    apply_monitor(app, raw, o);
    apply_global_batch(app, raw, o);
    if (o.program.empty() && !o.dry_run) {
        throw Error("no program to run; usage: gpurun [OPTIONS] -np N [--] PROGRAM [ARGS...]");
    }
    return request;
}

} // namespace launcher
