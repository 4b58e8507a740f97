#include "base/atomic_file.hpp"
#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/process.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/commands/node_options.hpp"
#include "doctor/fleet/launch.hpp"
#include "doctor/fleet/merge.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <set>
#include <unistd.h>

namespace doctor::commands {

namespace {

using base::Error;

/// gpudoctor fleet's options beside check's selection and policy.
struct FleetOptions {
    NodeOptions node; ///< --only, --skip, --policy, --timeout, --deep, --deep-timeout
    bool json = false;
    bool no_color = false;
    bool strict = false;
    int expect_gpus = -1;
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

void add_fleet_options(CLI::App& app, FleetOptions& f)
{
    app.add_option("-H,--host", f.hosts, "The nodes, as gpurun takes them: n01,n02 or 'gpu[01-16]' (slots ignored)")
        ->type_name("LIST");
    app.add_option("--hostfile", f.hostfile, "The nodes of a hostfile (gpurun's: 'host slots=N' or 'host:N')")
        ->type_name("FILE");
    app.add_option("--launcher", f.launcher,
           "What starts the checks, as gpurun's --launcher (default auto; local: this node only)")
        ->type_name("auto|openmpi|mpich|srun|local");
    app.add_option("--launcher-args", f.launcher_args, "Extra arguments for the launcher, split like shell words")
        ->type_name("'ARGS'");
    base::add_number(app, "--deadline", f.deadline,
        "Seconds each node's check may take; a node still checking is reported as timed out (default 60, 900 with "
        "--deep)",
        "S");
    app.add_flag("--deep", f.node.deep,
        "Also measure: copy bandwidth and an NCCL all-reduce on every node, and all-reduces across node pairs "
        "(slow nodes and links)");
    base::add_number(app, "--timeout", f.node.timeout, "Seconds each collector may take on a node (default 10)", "S");
    base::add_number(
        app, "--deep-timeout", f.node.deep_timeout, "Seconds each deep measurement may take (default 300)", "S");
    base::add_number(app, "--pair-port", f.pair_port,
        "With --deep: the TCP port the first pair of nodes meets on, the next pair one above (default 29600)", "PORT");
    app.add_option("--from", f.files,
           "Judge snapshots already collected instead (gpudoctor snapshot > FILE on each node), once per node; a "
           "directory: every *.json in it")
        ->type_name("FILE");
    app.add_option("--only", f.node.only, "Judge only these probes (names or prefixes, comma-separated)")
        ->type_name("LIST");
    app.add_option("--skip", f.node.skip, "Leave out these probes")->type_name("LIST");
    app.add_option("--policy", f.node.policy_file, "Policy TOML over the built-in defaults")->type_name("FILE");
    base::add_number(app, "--expect-gpus", f.expect_gpus, "GPUs each node must have (0 for CPU nodes)", "N");
    app.add_flag("--strict", f.strict, "Warnings fail too");
    app.add_flag("--json", f.json, "Print the report as JSON");
    app.add_flag("--no-color", f.no_color, "No colour (also when NO_COLOR is set)");
    app.add_option(
           "--healthy-hostfile", f.healthy_file, "Write the fit nodes to FILE (atomically), as a hostfile for gpurun")
        ->type_name("FILE");
    cli::add_verdict_files(app, f.verdict_files);
    // The node's side of a launch: gpurun starts it on every node.
    app.add_flag(fleet::node_side_option, f.node_side)->group("");
    app.add_option("--pair-hosts", f.pair_hosts)->group("");
    app.add_option("--pair-timeout", f.pair_timeout)->group("");
    app.footer("Exit status: 0 every node fit, 1 a node failed or did not answer, 2 usage or input error, 3 "
               "gpudoctor itself could not run, 128+N stopped by signal N (the report is printed). See "
               "gpudoctor(1).");
}

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

/// What every node's check collects: the same selection and tier, the same collector times.
std::vector<std::string> node_arguments(const NodeOptions& o)
{
    std::vector<std::string> args;
    for (const auto& [option, value] : {std::pair{"--only", o.only}, {"--skip", o.skip}}) {
        if (!value.empty()) {
            args.insert(args.end(), {option, value});
        }
    }
    args.insert(args.end(), {"--timeout", fmt::format("{:g}", o.timeout)});
    if (o.deep) {
        args.insert(args.end(), {"--deep", "--deep-timeout", fmt::format("{:g}", o.deep_timeout)});
    }
    return args;
}

/// The nodes' outputs: the snapshot files (--from), or each node's answer to a launch through
/// gpurun on every node (-H, --hostfile, a Slurm allocation). A file that cannot be read is an
/// input error (exit 2); one that holds no snapshot is that node's answer.
std::vector<fleet::NodeOutput> node_outputs(const FleetOptions& f, fleet::FleetLaunch& launch, int* signal)
{
    const auto hosts = fleet::fleet_hosts(f.hosts, f.hostfile, [](const char* name) { return std::getenv(name); });
    if (!f.files.empty() && (!f.hosts.empty() || !f.hostfile.empty())) {
        throw Error("fleet: --from and -H/--hostfile: judge snapshots already collected, or check the nodes; not both");
    }
    std::vector<fleet::NodeOutput> outputs;
    if (!f.files.empty()) {
        for (const auto& file : snapshot_files(f.files)) {
            outputs.push_back({file, fleet::Answer::snapshot, base::read_input_file(file, "snapshot")});
        }
        return outputs;
    }
    if (hosts.empty()) {
        throw Error("fleet: name the nodes: -H LIST, --hostfile FILE, or run inside a Slurm allocation; or judge "
                    "snapshots already collected with --from FILE (gpudoctor snapshot > FILE on each node)");
    }
    launch.hosts = hosts;
    launch.gpudoctor = own_path();
    launch.gpurun = find_gpurun(launch.gpudoctor);
    launch.launcher = fleet::resolve_launcher(f.launcher, [](const char* name) { return std::getenv(name); });
    launch.launcher_args = f.launcher_args;
    launch.deadline_seconds = f.deadline;
    launch.node_args = node_arguments(f.node);
    return fleet::launch(launch, signal);
}

/// With --deep across nodes: the answering nodes paired, each pair's all-reduce measured, slow
/// pairs taken apart.
void measure_pairs(
    const FleetOptions& f, const fleet::FleetLaunch& launch, const engine::Policy& policy, fleet::FleetReport& report)
{
    for (const auto& node : report.nodes) {
        if (node.answer == fleet::Answer::snapshot) {
            report.pair_hosts.push_back(node.host);
        }
    }
    if (report.pair_hosts.size() < 2) {
        return;
    }
    fleet::PairLaunch pair;
    pair.timeout = std::chrono::milliseconds(static_cast<long>(f.deadline * 1000));
    pair.base_port = f.pair_port;
    std::vector<fleet::PairFailure> failures;
    report.pairs = fleet::search_node_pairs(launch, report.pair_hosts, policy.outlier_fraction, pair, failures);
    for (auto& failure : failures) {
        report.pair_failures.emplace_back(std::move(failure.host), std::move(failure.why));
    }
}

/// The node's side of a launch: this node's snapshot, or its half of a pair's all-reduce, framed
/// for the fleet on standard output.
int answer_as_node(const FleetOptions& f, const NodeRun& run)
{
    if (!f.pair_hosts.empty()) {
        fleet::PairLaunch pair;
        pair.hosts = fleet::pair_hosts(f.pair_hosts);
        pair.base_port = f.pair_port;
        pair.settings.bytes = run.policy.allreduce_bytes;
        pair.settings.iterations = run.policy.allreduce_iterations;
        pair.timeout = std::chrono::milliseconds(static_cast<long>(f.pair_timeout * 1000));
        return fleet::answer_as_node([&](unsigned rank) { return fleet::measure_pair(rank, pair); }, f.deadline);
    }
    return fleet::answer_as_node(
        [&](unsigned) { return snapshot_document(run).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); },
        f.deadline);
}

} // namespace

int run_fleet(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    FleetOptions f;
    add_fleet_options(app, f);
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    check_timeout(f.node);
    check_deep_timeout(f.node);
    NodeRun run = prepare_node_run(f.node, !f.node_side);
    if (app.count("--deadline") == 0) {
        f.deadline = f.node.deep ? 900 : 60;
    } else if (!(f.deadline > 0 && f.deadline <= 86400)) {
        throw Error(fmt::format("--deadline {}: expected seconds, more than 0 and at most 86400", f.deadline));
    }
    if (!(f.pair_port > 0 && f.pair_port < 65536)) {
        throw Error(fmt::format("--pair-port {}: expected a TCP port, 1 to 65535", f.pair_port));
    }
    if (f.node_side) {
        return answer_as_node(f, run);
    }
    if (f.expect_gpus >= 0) {
        run.policy.expect_gpus = static_cast<unsigned>(f.expect_gpus);
    } else if (app.count("--expect-gpus") > 0) {
        throw Error(fmt::format("--expect-gpus {}: expected a number of GPUs, 0 or more", f.expect_gpus));
    }

    fleet::FleetLaunch launch;
    int signal = 0; // passed on to the launch: the report is printed, and the status says so
    const auto outputs = node_outputs(f, launch, &signal);
    fleet::FleetReport report = fleet::merge(outputs, run.probes, run.policy, f.strict);
    if (f.node.deep && !launch.hosts.empty() && signal == 0) {
        measure_pairs(f, launch, run.policy, report);
    }
    engine::write_verdict_files(f.verdict_files, fleet::verdict(report), nullptr);
    if (!f.healthy_file.empty()) {
        base::write_file_atomically(f.healthy_file, fleet::healthy_hostfile(report), "--healthy-hostfile");
    }
    std::cout << (f.json ? fleet::render_json(report).dump(2) + "\n"
                         : fleet::render_text(report, cli::use_color(f.no_color)));
    return signal != 0 ? 128 + signal : fleet::exit_status(report);
}

} // namespace doctor::commands
