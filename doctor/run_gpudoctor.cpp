#include "base/atomic_file.hpp"
#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/library_versions.hpp"
#include "base/nccl/log.hpp"
#include "base/process.hpp"
#include "base/python.hpp"
#include "base/spelling.hpp"
#include "base/sysroot.hpp"
#include "base/topology.hpp"
#include "doctor/cli/subcommand_args.hpp"
#include "doctor/codes.hpp"
#include "doctor/engine/report.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/engine/snapshot.hpp"
#include "doctor/engine/verdict.hpp"
#include "doctor/fit/cli.hpp"
#include "doctor/fleet/launch.hpp"
#include "doctor/fleet/merge.hpp"
#include "doctor/gpudoctor.hpp"
#include "doctor/monitor/cli.hpp"
#include "doctor/probes/checks.hpp"
#include "doctor/probes/topo_matrix.hpp"
#include "doctor/profile/report.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string_view>
#include <unistd.h>

#ifndef GPUKIT_VERSION
#define GPUKIT_VERSION "unknown"
#endif

namespace doctor {

namespace {

using base::Error;

engine::CollectContext make_context(const std::string& sysroot, const std::string& topology, double timeout)
{
    engine::CollectContext ctx;
    // Absolute: the collectors run from "/".
    ctx.sysroot = std::filesystem::absolute(sysroot).lexically_normal().string();
    ctx.topology_file = topology.empty() ? topology : std::filesystem::absolute(topology).string();
    ctx.timeout = std::chrono::milliseconds(static_cast<long>(timeout * 1000));
    ctx.progress = isatty(STDERR_FILENO) != 0;
    ctx.env = base::environment();
    return ctx;
}

engine::Facts load_snapshot(const std::string& path)
{
    return engine::read_snapshot(
        path == "-" ? base::read_input_fd(STDIN_FILENO, "-", "snapshot") : base::read_input_file(path, "snapshot"),
        path);
}

using cli::use_color;

/// fleet's --from: each FILE as it is; a DIR is every *.json in it, in name order.
std::vector<std::string> snapshot_files(const std::vector<std::string>& given)
{
    std::vector<std::string> files;
    for (const auto& path : given) {
        std::error_code ec;
        if (!std::filesystem::is_directory(path, ec)) {
            files.push_back(path);
            continue;
        }
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
            if (entry.path().extension() == ".json" && entry.is_regular_file(ec)) {
                found.push_back(entry.path().string());
            }
        }
        if (ec || found.empty()) {
            throw Error(fmt::format(
                "--from {}: {}", base::quote_input(path), ec ? ec.message() : "no *.json snapshots in this directory"));
        }
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    std::set<std::string> seen;
    for (const auto& file : files) {
        std::error_code ec;
        const auto canonical = std::filesystem::weakly_canonical(file, ec);
        if (!seen.insert(ec ? file : canonical.string()).second) {
            throw Error(fmt::format("--from {}: given twice; give each node's snapshot once", base::quote_input(file)));
        }
    }
    return files;
}

/// gpudoctor fleet's options beside check's selection and policy.
struct FleetCommand {
    std::vector<std::string> files; ///< --from
    std::string hosts; ///< -H
    std::string hostfile;
    std::string launcher;
    std::string launcher_args;
    double deadline = 0; ///< --deadline, or the default for the tier
    bool node_side = false;
    // The node's side of a round of node pairs (set by the fleet, not by users).
    std::string pair_hosts;
    int pair_port = fleet::PairLaunch::default_pair_port;
    double pair_timeout = 60;
    std::string healthy_file;
    engine::VerdictFiles verdict_files;
};

/// This gpudoctor's absolute path, as every node is to find it.
std::string own_path()
{
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        throw base::Unavailable(
            fmt::format("fleet: cannot find gpudoctor's own location (/proc/self/exe: {})", ec.message()));
    }
    return self.string();
}

/// gpurun: beside this gpudoctor (an install, a build tree), else in PATH.
std::string find_gpurun(const std::string& self)
{
    const auto beside = std::filesystem::path(self).parent_path() / "gpurun";
    if (access(beside.c_str(), X_OK) == 0) {
        return beside.string();
    }
    if (auto found = base::find_executable("gpurun", std::getenv("PATH"))) {
        return *found;
    }
    throw base::Unavailable("fleet: gpurun, which starts the checks on the nodes, is neither beside gpudoctor nor "
                            "in PATH; install gpukit's gpurun, or collect snapshots and use --from");
}

/// gpudoctor fleet: the nodes' snapshots, from files (--from) or from a launch through gpurun on
/// every node (-H, --hostfile, a Slurm allocation), judged with check's probes and policy and
/// merged (fleet::merge names each node). A file that cannot be read is an input error (exit 2);
/// one that holds no snapshot, or a node that did not answer, is that node's answer.
int run_fleet(const FleetCommand& f, const std::vector<std::string>& node_args,
    const std::vector<const engine::Probe*>& selected, const engine::Policy& policy, bool strict, bool deep, bool json,
    bool color)
{
    const auto hosts = fleet::fleet_hosts(f.hosts, f.hostfile, [](const char* name) { return std::getenv(name); });
    if (!f.files.empty() && (!f.hosts.empty() || !f.hostfile.empty())) {
        throw Error("fleet: --from and -H/--hostfile: judge snapshots already collected, or check the nodes; not both");
    }
    std::vector<fleet::NodeOutput> outputs;
    int signal = 0; // passed on to the launch: the report is printed, and the status says so
    if (!f.files.empty()) {
        for (const auto& file : snapshot_files(f.files)) {
            outputs.push_back({file, fleet::Answer::snapshot, base::read_input_file(file, "snapshot")});
        }
    }
    fleet::FleetLaunch launch;
    if (f.files.empty() && !hosts.empty()) {
        launch.hosts = hosts;
        launch.gpudoctor = own_path();
        launch.gpurun = find_gpurun(launch.gpudoctor);
        launch.launcher = fleet::resolve_launcher(f.launcher, [](const char* name) { return std::getenv(name); });
        launch.launcher_args = f.launcher_args;
        launch.deadline_seconds = f.deadline;
        launch.node_args = node_args;
        outputs = fleet::launch(launch, &signal);
    } else if (f.files.empty()) {
        throw Error("fleet: name the nodes: -H LIST, --hostfile FILE, or run inside a Slurm allocation; or judge "
                    "snapshots already collected with --from FILE (gpudoctor snapshot > FILE on each node)");
    }
    fleet::FleetReport report = fleet::merge(outputs, selected, policy, strict);
    if (deep && !launch.hosts.empty() && signal == 0) {
        // Across nodes: the answering nodes paired, each pair's all-reduce measured, slow pairs taken apart.
        for (const auto& node : report.nodes) {
            if (node.answer == fleet::Answer::snapshot) {
                report.pair_hosts.push_back(node.host);
            }
        }
        if (report.pair_hosts.size() >= 2) {
            fleet::PairLaunch pair;
            pair.timeout = std::chrono::milliseconds(static_cast<long>(f.deadline * 1000));
            pair.base_port = f.pair_port;
            std::vector<fleet::PairFailure> failures;
            report.pairs = fleet::search_node_pairs(launch, report.pair_hosts, policy.outlier_fraction, pair, failures);
            for (auto& failure : failures) {
                report.pair_failures.emplace_back(std::move(failure.host), std::move(failure.why));
            }
        }
    }
    engine::write_verdict_files(f.verdict_files, fleet::verdict(report), nullptr);
    if (!f.healthy_file.empty()) {
        base::write_file_atomically(f.healthy_file, fleet::healthy_hostfile(report), "--healthy-hostfile");
    }
    std::cout << (json ? fleet::render_json(report).dump(2) + "\n" : fleet::render_text(report, color));
    return signal != 0 ? 128 + signal : fleet::exit_status(report);
}

struct NcclLogOptions {
    std::vector<std::string> files;
    bool json = false;
    bool no_color = false;
    engine::JudgingOptions judging;
};

int run_nccl_log(const NcclLogOptions& options)
{
    namespace nccl = base::nccl;
    const auto& files = options.files;
    const auto threshold = base::parse_fail_on(options.judging.fail_on);
    if (files.empty()) {
        throw Error("nccl-log: name the log files to read (- for stdin); see gpudoctor nccl-log --help");
    }
    if (std::count(files.begin(), files.end(), "-") > 1) {
        throw Error("stdin (-) named more than once; name it once");
    }
    nccl::Analyzer analyzer;
    // A directory holds per-rank logs (NCCL_DEBUG_FILE, gpurun --nccl-log-dir): its logs are read,
    // not what lies beside them (a README, a JSON report that quote NCCL lines).
    std::vector<std::string> skipped;
    for (const auto& file : base::input_files(files, nccl::looks_like_log,
             "holds no logs (files named *.log, *.txt, *.out, *.err or *.gz, or holding NCCL records; logs in its "
             "subdirectories are not read); name the log files or their own directory",
             &skipped)) {
        analyzer.read_file(file);
    }
    for (const auto& file : skipped) {
        analyzer.skip(file);
    }
    const nccl::Analysis analysis = analyzer.analysis();
    const engine::Verdict verdict = engine::findings_verdict("nccl-log", analysis.findings, threshold);
    engine::write_verdict_files(options.judging.files, verdict, nullptr);
    if (options.json) {
        std::string text;
        nccl::write_json(analysis, text);
        std::cout << text << '\n';
    } else if (options.judging.quiet) {
        std::cout << engine::render_problems(verdict, use_color(options.no_color));
    } else {
        std::cout << nccl::render_text(analysis, use_color(options.no_color));
    }
    return verdict.exit_code();
}

/// gpudoctor's subcommands, in the order --help lists them. Most share one CLI11 parser (run);
/// those with their own parser take a command of the user's after "--".
struct Subcommand {
    const char* name;
    const char* summary;
    int (*own_parser)(int argc, char** argv);
};

constexpr Subcommand subcommands[] = {
    {"check", "Check the node and report (the default)", nullptr},
    {"snapshot", "Print every collected fact as JSON, for check --from", nullptr},
    {"fleet", "Check every node of a job at once: the odd node, the facts that differ, the healthy hosts", nullptr},
    {"list", "List the probes in the order they run", nullptr},
    {"explain", "Explain a finding code and its remedy", nullptr},
    {"topo", "Print the GPU link matrix like nvidia-smi topo -m, with NUMA and NIC", nullptr},
    {"nccl-log", "Read NCCL_DEBUG=INFO logs: the transports NCCL used, and what is slow", nullptr},
    {"profile", "Read Nsight Systems SQLite exports: GPU busy share, top kernels, copies, idle gaps", nullptr},
    {"fit", "The largest batch that fits, the learning rate, the split over unequal GPUs", fit::run_fit},
    {"monitor", "Sample GPU kernel-active time, memory and power like nvidia-smi dmon; judge them",
        monitor::run_monitor},
};

/// The summary of a subcommand in the table.
const char* summary_of(std::string_view name)
{
    for (const auto& sub : subcommands) {
        if (name == sub.name) {
            return sub.summary;
        }
    }
    return "";
}

int run(int argc, char** argv)
{
    CLI::App app("Tell whether this node is fit to train, and why not.", "gpudoctor");
    app.require_subcommand(0, 1);
    bool version = false;
    app.add_flag("--version", version, "Print the version and exit");
    app.footer("Exit status: 0 fit (warnings allowed), 1 a check failed, 2 usage or input error, 3 gpudoctor "
               "itself could not run. See gpudoctor(1).");

    // Options shared by the subcommands that collect.
    struct Common {
        bool json = false;
        bool no_color = false;
        bool strict = false;
        std::string sysroot = "/";
        std::string topology;
        std::string only;
        std::string skip;
        std::string policy_file;
        std::string from;
        double timeout = 10.0;
        double deep_timeout = 300.0;
        bool deep = false;
        int expect_gpus = -1;
        std::string gpus;
    } c;
    auto add_selection = [&](CLI::App* sub) {
        sub->add_option("--only", c.only, "Run only these probes (names or prefixes, comma-separated)")
            ->type_name("LIST");
        sub->add_option("--skip", c.skip, "Leave out these probes")->type_name("LIST");
        sub->add_option("--sysroot", c.sysroot, "Read /sys and /proc under DIR (default /)")->type_name("DIR");
        sub->add_option("--topology", c.topology, "Use this hwloc XML instead of this machine's topology")
            ->type_name("FILE");
        base::add_number(*sub, "--timeout", c.timeout, "Seconds each collector may take (default 10)", "S");
        sub->add_flag("--deep", c.deep,
            "Also measure: copy bandwidth (host, device, GPU pairs) and an NCCL all-reduce (seconds to minutes)");
        base::add_number(
            *sub, "--deep-timeout", c.deep_timeout, "Seconds each deep measurement may take (default 300)", "S");
        sub->add_option("--policy", c.policy_file, "Policy TOML over the built-in defaults")->type_name("FILE");
    };

    auto* check = app.add_subcommand("check", summary_of("check"));
    add_selection(check);
    check->add_flag("--json", c.json, "Print the report as JSON");
    check->add_flag("--no-color", c.no_color, "No colour (also when NO_COLOR is set)");
    check->add_flag("--strict", c.strict, "Warnings fail too");
    bool quick = false;
    check->add_flag("--quick", quick, "Quick tier only: NVML, sysfs and files, no timed GPU work (the default)");
    base::add_number(*check, "--expect-gpus", c.expect_gpus, "GPUs this node must have (0 for a CPU node)", "N");
    check
        ->add_option("--gpus", c.gpus,
            "Judge only these GPUs: NVML indexes, bus ids or UUIDs, comma-separated (default: the job's, from "
            "GPURUN_GPU_BUS_ID or CUDA_VISIBLE_DEVICES, else all); node-wide checks run either way")
        ->type_name("LIST");
    check->add_option("--from", c.from, "Judge a snapshot (gpudoctor snapshot > node.json) instead of this node")
        ->type_name("FILE");
    engine::JudgingOptions check_judging; // its --fail-on is spelled --strict
    bool fail_summary = false;
    cli::add_judging_options(*check, check_judging, false);
    check->add_flag("--fail-summary", fail_summary,
        "Print one line instead of the report: the first failing finding (CODE: SUBJECT: MESSAGE), else the summary");

    auto* snapshot = app.add_subcommand("snapshot", summary_of("snapshot"));
    add_selection(snapshot);
    snapshot->footer(
        "Exit status: 0 done, 2 usage or input error, 3 gpudoctor itself could not run. See gpudoctor(1).");

    auto* fleet = app.add_subcommand("fleet", summary_of("fleet"));
    FleetCommand f;
    fleet->add_option("-H,--host", f.hosts, "The nodes, as gpurun takes them: n01,n02 or 'gpu[01-16]' (slots ignored)")
        ->type_name("LIST");
    fleet->add_option("--hostfile", f.hostfile, "The nodes of a hostfile (gpurun's: 'host slots=N' or 'host:N')")
        ->type_name("FILE");
    fleet
        ->add_option("--launcher", f.launcher,
            "What starts the checks, as gpurun's --launcher (default auto; local: this node only)")
        ->type_name("auto|openmpi|mpich|srun|local");
    fleet->add_option("--launcher-args", f.launcher_args, "Extra arguments for the launcher, split like shell words")
        ->type_name("'ARGS'");
    base::add_number(*fleet, "--deadline", f.deadline,
        "Seconds each node's check may take; a node still checking is reported as timed out (default 60, 900 with "
        "--deep)",
        "S");
    fleet->add_flag("--deep", c.deep,
        "Also measure: copy bandwidth and an NCCL all-reduce on every node, and all-reduces across node pairs "
        "(slow nodes and links)");
    base::add_number(*fleet, "--timeout", c.timeout, "Seconds each collector may take on a node (default 10)", "S");
    base::add_number(
        *fleet, "--deep-timeout", c.deep_timeout, "Seconds each deep measurement may take (default 300)", "S");
    base::add_number(*fleet, "--pair-port", f.pair_port,
        "With --deep: the TCP port the first pair of nodes meets on, the next pair one above (default 29600)", "PORT");
    fleet
        ->add_option("--from", f.files,
            "Judge snapshots already collected instead (gpudoctor snapshot > FILE on each node), once per node; a "
            "directory: every *.json in it")
        ->type_name("FILE");
    fleet->add_option("--only", c.only, "Judge only these probes (names or prefixes, comma-separated)")
        ->type_name("LIST");
    fleet->add_option("--skip", c.skip, "Leave out these probes")->type_name("LIST");
    fleet->add_option("--policy", c.policy_file, "Policy TOML over the built-in defaults")->type_name("FILE");
    base::add_number(*fleet, "--expect-gpus", c.expect_gpus, "GPUs each node must have (0 for CPU nodes)", "N");
    fleet->add_flag("--strict", c.strict, "Warnings fail too");
    fleet->add_flag("--json", c.json, "Print the report as JSON");
    fleet->add_flag("--no-color", c.no_color, "No colour (also when NO_COLOR is set)");
    fleet
        ->add_option(
            "--healthy-hostfile", f.healthy_file, "Write the fit nodes to FILE (atomically), as a hostfile for gpurun")
        ->type_name("FILE");
    cli::add_verdict_files(*fleet, f.verdict_files);
    // The node's side of a launch: gpurun starts it on every node.
    fleet->add_flag(fleet::node_side_option, f.node_side)->group("");
    fleet->add_option("--pair-hosts", f.pair_hosts)->group("");
    fleet->add_option("--pair-timeout", f.pair_timeout)->group("");
    fleet->footer("Exit status: 0 every node fit, 1 a node failed or did not answer, 2 usage or input error, 3 "
                  "gpudoctor itself could not run, 128+N stopped by signal N (the report is printed). See "
                  "gpudoctor(1).");

    auto* list = app.add_subcommand("list", summary_of("list"));
    bool list_json = false;
    bool list_codes = false;
    list->add_flag("--json", list_json, "As JSON");
    list->add_flag("--codes", list_codes, "List every finding code instead, with its title");
    list->add_flag("--no-color", c.no_color, "No colour (also when NO_COLOR is set)");
    list->footer("Exit status: 0 done, 2 usage error. See gpudoctor(1).");

    auto* explain = app.add_subcommand("explain", summary_of("explain"));
    std::string code;
    explain->add_option("CODE", code, "A finding code, e.g. gpus.ecc_uncorrected; without one, every code is listed");
    explain->add_flag("--no-color", c.no_color, "No colour (also when NO_COLOR is set)");
    explain->footer("Exit status: 0 done, 2 usage error or an unknown code. See gpudoctor(1).");

    auto* topo = app.add_subcommand("topo", summary_of("topo"));
    topo->add_flag("--json", c.json, "As JSON");
    topo->add_flag("--no-color", c.no_color, "No colour (also when NO_COLOR is set)");
    topo->add_option("--sysroot", c.sysroot, "Read /sys and /proc under DIR (default /)")->type_name("DIR");
    topo->add_option("--topology", c.topology, "Use this hwloc XML (NVML is then not asked)")->type_name("FILE");
    base::add_number(*topo, "--timeout", c.timeout, "Seconds each collector may take (default 10)", "S");
    topo->footer("Exit status: 0 done, 2 usage or input error (a --topology file that cannot be read), 3 this "
                 "machine's topology could not be read. See gpudoctor(1).");

    auto* nccl_log = app.add_subcommand("nccl-log", summary_of("nccl-log"));
    NcclLogOptions n;
    nccl_log->add_option("files", n.files, "Log files or directories of them (- for stdin; gzip is decompressed)")
        ->type_name("FILE");
    nccl_log->add_flag("--json", n.json, "Print the report as JSON");
    nccl_log->add_flag("--no-color", n.no_color, "No colour (also when NO_COLOR is set)");
    cli::add_judging_options(*nccl_log, n.judging, true);
    nccl_log->footer(
        "Exit status: 0 no finding at the --fail-on level (warnings allowed), 1 a finding failed (or reached "
        "--fail-on), 2 unreadable input or usage error.");

    auto* profile = app.add_subcommand("profile", summary_of("profile"));
    profile::ProfileCommand prof;
    bool prof_no_color = false;
    profile->add_option("files", prof.files, "SQLite exports (nsys --export sqlite), or directories of them")
        ->type_name("FILE");
    profile->add_flag("--json", prof.json, "Print the report as JSON");
    profile->add_flag("--no-color", prof_no_color, "No colour (also when NO_COLOR is set)");
    cli::add_judging_options(*profile, prof.judging, true);
    base::add_number(*profile, "--gap", prof.gap_seconds, "List idle gaps at least this long (default 0.5)", "S");
    base::add_number(*profile, "--top", prof.top, "Kernels listed per GPU (default 10)", "N");
    base::add_number(
        *profile, "--min-busy", prof.min_busy_percent, "A busy share below this is a finding (default 50)", "PERCENT");
    profile->footer(
        "Exit status: 0 no finding at the --fail-on level (warnings allowed), 1 a finding failed (or reached "
        "--fail-on), 2 unreadable input or usage error.");

    // Listed for --help: the subcommands that parse their own command line (they take a command
    // after "--") are handed it by run_gpudoctor before this parser sees it.
    for (const auto& sub : subcommands) {
        if (sub.own_parser != nullptr) {
            app.add_subcommand(sub.name, sub.summary);
        }
    }

    // CLI11 alone names an unknown option without suggesting the closest one.
    const std::string name = argv[1];
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == name) {
            cli::reject_unknown_options(*sub, cli::split_at_dashes(argc - 1, argv + 1), name);
        }
    }
    if (!cli::parse_or_help(app, argc, argv, fmt::format("gpudoctor {} --help", name).c_str())) {
        return 0;
    }
    if (version) {
        std::cout << base::version_text("gpudoctor", GPUKIT_VERSION, base::library_versions());
        return 0;
    }

    if (nccl_log->parsed()) {
        return run_nccl_log(n);
    }
    if (profile->parsed()) {
        prof.color = use_color(prof_no_color);
        return profile::run_profile(prof);
    }
    if ((list->parsed() && list_codes) || (explain->parsed() && code.empty())) {
        nlohmann::json out = nlohmann::json::array();
        std::string text;
        for (const auto& info : all_codes()) {
            out.push_back({{"code", info.code}, {"title", info.title}, {"explanation", info.explanation},
                {"remedy", info.remedy}});
            text += fmt::format("{:<34} {}\n", info.code, info.title);
        }
        std::cout << (list_json ? out.dump(2) + "\n" : text);
        return 0;
    }
    if (list->parsed()) {
        nlohmann::json out = nlohmann::json::array();
        std::string text;
        for (const auto& p : probes::probe_table()) {
            out.push_back({{"name", p.name}, {"summary", p.summary}, {"collectors", p.collectors}});
            text += fmt::format("{:<11} {}\n", p.name, p.summary);
        }
        std::cout << (list_json ? out.dump(2) + "\n" : text);
        return 0;
    }
    if (explain->parsed()) {
        std::vector<std::string> names;
        for (const auto& info : all_codes()) {
            if (info.code == code) {
                std::cout << fmt::format("{}: {}\n\n{}\n\nRemedy: {}\n", info.code, info.title, info.explanation,
                    info.remedy.empty() ? "none needed" : info.remedy);
                return 0;
            }
            names.push_back(info.code);
        }
        std::string hint = base::closest_match(code, names);
        throw Error(fmt::format("no finding code '{}'{}; 'gpudoctor list' shows the probes", code,
            hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
    }

    if (!(c.timeout > 0 && c.timeout <= 3600)) {
        throw Error(fmt::format("--timeout {}: expected seconds, more than 0 and at most 3600", c.timeout));
    }
    if (quick && c.deep) {
        throw Error("--quick and --deep: choose one tier (--deep includes the quick probes)");
    }
    if (fail_summary && c.json) {
        throw Error("--fail-summary and --json: choose one report on standard output");
    }
    if (!(c.deep_timeout > 0 && c.deep_timeout <= 86400)) {
        throw Error(fmt::format("--deep-timeout {}: expected seconds, more than 0 and at most 86400", c.deep_timeout));
    }
    std::vector<const engine::Probe*> probes = probes::select_probes(c.only, c.skip, c.deep);
    if (!c.topology.empty() && c.from.empty()) {
        // An unreadable topology file is an input error, not a broken node.
        base::Topology::load_xml(c.topology);
    }
    engine::Policy policy = engine::Policy::defaults();
    if (!c.policy_file.empty()) {
        policy.merge_toml(base::read_input_file(c.policy_file, "policy"), c.policy_file);
    }
    engine::CollectContext ctx = make_context(c.sysroot, c.topology, c.timeout);
    ctx.deep_timeout = std::chrono::milliseconds(static_cast<long>(c.deep_timeout * 1000));
    ctx.policy = policy;
    ctx.progress = ctx.progress && !check_judging.quiet;
    base::require_sysroot_directory(c.sysroot);
    if (topo->parsed()) {
        return probes::run_topo(ctx, c.json);
    }

    auto snapshot_document = [&] {
        return nlohmann::json{{"gpudoctor_snapshot", engine::snapshot_format}, {"version", GPUKIT_VERSION},
            {"facts", engine::collect(probes::collectors_for(probes), ctx)}};
    };
    if (snapshot->parsed()) {
        std::cout << snapshot_document().dump(2) << '\n';
        return 0;
    }
    if (fleet->count("--deadline") == 0) {
        f.deadline = c.deep ? 900 : 60;
    } else if (!(f.deadline > 0 && f.deadline <= 86400)) {
        throw Error(fmt::format("--deadline {}: expected seconds, more than 0 and at most 86400", f.deadline));
    }
    if (!(f.pair_port > 0 && f.pair_port < 65536)) {
        throw Error(fmt::format("--pair-port {}: expected a TCP port, 1 to 65535", f.pair_port));
    }
    if (fleet->parsed() && f.node_side) {
        ctx.progress = false;
        if (!f.pair_hosts.empty()) {
            fleet::PairLaunch pair;
            pair.hosts = fleet::pair_hosts(f.pair_hosts);
            pair.base_port = f.pair_port;
            pair.settings.bytes = policy.allreduce_bytes;
            pair.settings.iterations = policy.allreduce_iterations;
            pair.timeout = std::chrono::milliseconds(static_cast<long>(f.pair_timeout * 1000));
            return fleet::answer_as_node([&](unsigned rank) { return fleet::measure_pair(rank, pair); }, f.deadline);
        }
        return fleet::answer_as_node(
            [&](unsigned) {
                return snapshot_document().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            },
            f.deadline);
    }

    if (c.expect_gpus >= 0) {
        policy.expect_gpus = static_cast<unsigned>(c.expect_gpus);
    } else if (check->count("--expect-gpus") + fleet->count("--expect-gpus") > 0) {
        throw Error(fmt::format("--expect-gpus {}: expected a number of GPUs, 0 or more", c.expect_gpus));
    }

    if (fleet->parsed()) {
        // What every node's check collects: the same selection and tier, the same collector times.
        std::vector<std::string> node_args;
        for (const auto& [option, value] : {std::pair{"--only", c.only}, {"--skip", c.skip}}) {
            if (!value.empty()) {
                node_args.insert(node_args.end(), {option, value});
            }
        }
        node_args.insert(node_args.end(), {"--timeout", fmt::format("{:g}", c.timeout)});
        if (c.deep) {
            node_args.insert(node_args.end(), {"--deep", "--deep-timeout", fmt::format("{:g}", c.deep_timeout)});
        }
        return run_fleet(f, node_args, probes, policy, c.strict, c.deep, c.json, use_color(c.no_color));
    }

    engine::ReportOptions options;
    const engine::Facts facts = c.from.empty()
        ? engine::collect(probes::collectors_for(probes), ctx, &options.collector_seconds)
        : load_snapshot(c.from);
    auto results = engine::judge(probes, facts, policy, c.from == "-" ? "standard input" : c.from);
    options.scope = engine::gpu_scope(facts, c.gpus, c.from.empty() ? &ctx.env : nullptr);
    engine::keep_in_scope(results, options.scope);
    options.strict = c.strict;
    options.quiet = check_judging.quiet;
    options.color = use_color(c.no_color);
    for (const auto& collector : probes::collector_table()) {
        if (collector.deep) {
            options.measured.push_back(collector.name);
        }
    }
    // The extra files first: one that cannot be written is exit 2, before any report is printed.
    engine::write_verdict_files(check_judging.files, engine::check_verdict(results, facts, c.strict), facts);
    if (fail_summary) {
        std::cout << engine::render_fail_summary(results, options);
    } else if (c.json) {
        std::cout << engine::render_json(results, facts, options).dump(2) << '\n';
    } else {
        std::cout << engine::render_text(results, facts, options);
    }
    return engine::exit_code(results, c.strict);
}

} // namespace

int run_gpudoctor(int argc, char** argv)
{
    // A subcommand comes first, as in git; anything else (options, or nothing) means check.
    std::vector<char*> args(argv, argv + argc);
    static char check_word[] = "check";
    const std::string first = argc > 1 ? argv[1] : "";
    try {
        const Subcommand* chosen = nullptr;
        std::vector<std::string> names;
        for (const auto& sub : subcommands) {
            chosen = first == sub.name ? &sub : chosen;
            names.emplace_back(sub.name);
        }
        if (chosen != nullptr && chosen->own_parser != nullptr) {
            return chosen->own_parser(argc - 1, argv + 1);
        }
        if (chosen == nullptr && first != "--help" && first != "-h" && first != "--version") {
            if (!first.empty() && first.front() != '-') {
                const std::string hint = base::closest_match(first, names);
                throw Error(fmt::format("unknown subcommand '{}'{}; see gpudoctor --help", first,
                    hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
            }
            args.insert(args.begin() + 1, check_word);
        }
        return run(static_cast<int>(args.size()), args.data());
    } catch (const Error& e) {
        fmt::print(stderr, "gpudoctor: {}\n", base::printable(e.what()));
        return 2;
    } catch (const base::Unavailable& e) {
        fmt::print(stderr, "gpudoctor: {}\n", base::printable(e.what()));
        return 3;
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpudoctor: internal error: {}\n", base::printable(e.what()));
        return 3;
    }
}

} // namespace doctor
