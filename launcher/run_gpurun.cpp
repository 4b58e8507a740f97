#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/library_versions.hpp"
#include "base/process.hpp"
#include "base/sysroot.hpp"
#include "base/topology.hpp"
#include "launcher/cli.hpp"
#include "launcher/gpurun.hpp"
#include "launcher/job_dir.hpp"
#include "launcher/job_process.hpp"
#include "launcher/launch_plan.hpp"
#include "launcher/nccl_check.hpp"
#include "launcher/node_handoff.hpp"
#include "launcher/plan_report.hpp"
#include "launcher/rank_profiler.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <memory>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef GPUKIT_VERSION
#define GPUKIT_VERSION "unknown"
#endif

namespace launcher {

namespace {

using base::Error;

const char* env(const char* name)
{
    return std::getenv(name);
}

// A TCP port nobody listens on now, for MASTER_PORT; the kernel picks it.
unsigned free_port()
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 29500;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    unsigned port = 29500;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
}

std::string rank_helper_path()
{
    if (const char* forced = env("GPUKIT_RANK_HELPER"); forced != nullptr && *forced != '\0') {
        return forced;
    }
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        throw Error(fmt::format("cannot find gpurun's own location (/proc/self/exe: {}); set GPUKIT_RANK_HELPER to "
                                "the gpurun-rank program",
            ec.message()));
    }
    return (self.parent_path() / "gpurun-rank").string();
}

// The helpers may start in another directory (or on another host with a shared file system).
void make_paths_absolute(LaunchOptions& o)
{
    auto absolute = [](std::string& path) {
        std::error_code ec;
        auto a = std::filesystem::absolute(path, ec).lexically_normal();
        if (!ec) {
            path = (a.has_filename() ? a : a.parent_path()).string();
        }
    };
    if (!o.plan.topology_file.empty()) {
        absolute(o.plan.topology_file);
    }
    for (auto& [host, file] : o.host_topologies) {
        absolute(file);
    }
    if (!o.nccl_log_dir.empty()) {
        absolute(o.nccl_log_dir); // ranks write there from their own working directory
    }
    if (!o.output.log_dir.empty()) {
        absolute(o.output.log_dir);
    }
}

// The launcher; for --dry-run without one installed, the one that would be looked for, and why.
launchers::Launcher launcher_for(const LaunchOptions& o, std::vector<std::string>& notes)
{
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    const bool this_node_only = std::all_of(
        o.hosts.begin(), o.hosts.end(), [&](const launchers::HostSlots& h) { return is_this_node(h.name, name); });
    try {
        return launchers::find_launcher(o.launcher, env, this_node_only);
    } catch (const Error& e) {
        if (!o.dry_run) {
            throw;
        }
        notes.push_back(e.what());
        const LauncherKind kind = o.launcher == LauncherKind::automatic ? LauncherKind::openmpi : o.launcher;
        return launchers::Launcher{kind, launchers::row(kind).program, "", "not found"};
    }
}

int run(const std::vector<std::string>& argv)
{
    CliRequest request = parse_command_line(argv);
    if (request.action == CliRequest::Action::help) {
        std::cout << request.help_text;
        return 0;
    }
    if (request.action == CliRequest::Action::version) {
        std::cout << base::version_text("gpurun", GPUKIT_VERSION, base::library_versions());
        return 0;
    }
    LaunchOptions& o = request.options;
    make_paths_absolute(o);

    const HostSource hosts = resolve_hosts(o, env);
    PlanContext ctx;
    ctx.env = env;
    ctx.launcher = launcher_for(o, ctx.launcher_notes);
    const bool refuses_root = launchers::row(ctx.launcher.kind).refuses_root;
    ctx.allow_root = refuses_root &&
        launchers::root_allowed(
            o.allow_run_as_root, env("OMPI_ALLOW_RUN_AS_ROOT"), env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"));
    if (!o.dry_run && refuses_root && geteuid() == 0 && !ctx.allow_root) {
        throw Error("running as root, which Open MPI refuses; pass --allow-run-as-root, or set both "
                    "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    }

    base::require_sysroot_directory(o.plan.sysroot);
    ThisNode node = read_this_node(o.plan, env("CUDA_VISIBLE_DEVICES"));
    ctx.layout = std::move(node.layout);
    ctx.inventory = std::move(node.inventory);
    for (const auto& [host, file] : o.host_topologies) {
        NodeSpec spec{base::Topology::load_xml(file).layout(), {}};
        if (!o.plan.cpu_only) {
            base::InventoryOptions inv;
            inv.from_topology_file = true;
            spec.pool = base::discover_gpus(spec.layout, inv).pool;
        }
        ctx.host_specs.emplace(host, std::move(spec));
    }
    for (char** e = environ; *e != nullptr; ++e) {
        std::string_view entry(*e);
        if (const auto eq = entry.find('='); eq != 0 && eq != std::string_view::npos) {
            ctx.variables.emplace_back(entry.substr(0, eq));
        }
    }
    if (ctx.launcher.kind == LauncherKind::srun && !ctx.launcher.path.empty()) {
        const auto list = base::run_command({ctx.launcher.path, "--mpi=list"}, std::chrono::seconds(5));
        if (list.exit_code == 0) {
            ctx.srun_mpi_plugins = launchers::parse_mpi_plugins(list.output);
        }
    }
    ctx.program_start = [](const std::string& program) -> std::optional<std::string> {
        const auto path = base::find_executable(program, env("PATH"));
        std::ifstream in(path ? *path : program, std::ios::binary);
        std::string bytes(std::size_t{4} << 20, '\0');
        if (!path || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())).gcount()) {
            return std::nullopt;
        }
        bytes.resize(static_cast<std::size_t>(in.gcount()));
        return bytes;
    };
    ctx.lookup = system_address_lookup();
    ctx.free_port = free_port;
    ctx.helper_path = rank_helper_path();
    if (auto found = base::find_executable("env", env("PATH"))) {
        ctx.env_program = *found;
    }
    // The check's log directory exists only for a real run (--dry-run shows where it would be), and
    // goes with `nccl` on every way out of this function.
    std::unique_ptr<NcclCheck> nccl;
    ctx.nccl_dir = [&](unsigned ranks) {
        if (o.dry_run) {
            return o.nccl_log_dir.empty() ? std::string(nccl_private_dir_shown) : o.nccl_log_dir;
        }
        const char* tmpdir = env("TMPDIR");
        nccl = std::make_unique<NcclCheck>(o.nccl_check, ranks, o.nccl_log_dir, tmpdir != nullptr ? tmpdir : "");
        return nccl->dir();
    };

    const LaunchPlan plan = plan_launch(o, hosts, ctx);
    const auto ranks = static_cast<unsigned>(plan.job.ranks.size());
    if (o.dry_run) {
        PlanReport report{plan.job, o, ctx.inventory.source, plan.notes, plan.command, plan.batch, ctx.launcher,
            plan.left_out, &plan.helper, plan.passed};
        if (o.json) {
            // Arguments are bytes: what is not UTF-8 is shown as U+FFFD rather than refused.
            std::string text;
            write_json(report, text);
            std::cout << text << '\n';
        } else {
            std::cout << render_text(report);
        }
        return 0;
    }
    for (const auto& note : plan.notes) {
        fmt::print(stderr, "gpurun: note: {}\n", note);
    }
    if (!base::find_executable(ctx.helper_path, nullptr)) {
        throw Error(
            fmt::format("the rank helper {} is missing; reinstall gpukit or set GPUKIT_RANK_HELPER", ctx.helper_path));
    }
    create_profile_dir(o.profile);
    if (!o.output.log_dir.empty()) {
        // Checked here before anything starts; each rank's helper makes and checks it on its host.
        const std::string dir = base::own_directory(o.output.log_dir, "--log-dir");
        if (access(dir.c_str(), W_OK | X_OK) != 0) {
            throw Error(
                fmt::format("--log-dir {}: cannot write there: {}", base::quote_input(dir), std::strerror(errno)));
        }
    }
    // The helpers on this node bind from this node's plan instead of loading the topology again; a
    // value already in the environment was not made for this job.
    if (plan.this_node) {
        const std::string handed = write_node_plan(this_node_key(env("CUDA_VISIBLE_DEVICES")), *plan.this_node);
        if (setenv(node_plan_variable, handed.c_str(), 1) != 0) {
            throw Error(fmt::format("cannot set {}: {}", node_plan_variable, std::strerror(errno)));
        }
    } else {
        unsetenv(node_plan_variable);
    }
    if (!plan.helper.monitor_job.empty() && setenv(job_id_variable, plan.helper.monitor_job.c_str(), 1) != 0) {
        throw Error(fmt::format("cannot set {}: {}", job_id_variable, std::strerror(errno)));
    }
    // Opened before the job starts, so a path that cannot be written stops gpurun at once; put in
    // place when the job has ended (and never half written).
    std::optional<base::AtomicFile> summary;
    if (!o.json_summary.empty()) {
        summary.emplace(o.json_summary, "--json-summary");
    }
    std::cout.flush();
    std::function<void()> tick;
    if (nccl && o.nccl_check == NcclCheckMode::init) {
        tick = [&nccl] { fmt::print(stderr, "{}", nccl->poll()); };
    }
    const auto& backend = launchers::row(ctx.launcher.kind);
    const JobEnd end = run_job(plan.command, {o.grace_seconds, backend.stops_on_failure, backend.interrupt_as}, tick);
    if (!plan.helper.monitor_job.empty()) {
        // The monitor removes its node's directory; this covers one that was killed on this node.
        const char* tmpdir = env("TMPDIR");
        base::remove_private_dir(job_dir_path(plan.helper.monitor_job, tmpdir != nullptr ? tmpdir : ""));
    }
    if (nccl) {
        fmt::print(stderr, "{}", nccl->finish());
    }
    fmt::print(stderr, "{}", profile_epilogue(o.profile, ranks));
    if (summary) {
        summary->write(
            summary_json(end, plan.command, ranks).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
            "\n");
        summary->commit();
    }
    return end.status;
}

} // namespace

int run_gpurun(int argc, char** argv)
{
    try {
        return run(std::vector<std::string>(argv, argv + argc));
    } catch (const Error& e) {
        fmt::print(stderr, "gpurun: {}\n", base::printable(e.what()));
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpurun: internal error: {}\n", base::printable(e.what()));
        return 3;
    }
}

} // namespace launcher
