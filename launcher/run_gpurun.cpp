#include "launcher/binding_plan.hpp"
#include "launcher/cli.hpp"
#include "launcher/global_batch.hpp"
#include "launcher/gpurun.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/job_dir.hpp"
#include "launcher/job_process.hpp"
#include "launcher/launcher_backend.hpp"
#include "launcher/master_address.hpp"
#include "launcher/nccl_check.hpp"
#include "launcher/node_list.hpp"
#include "launcher/node_monitor.hpp"
#include "launcher/pack.hpp"
#include "launcher/plan_report.hpp"
#include "launcher/profile.hpp"
#include "probes/error.hpp"
#include "probes/gpu_inventory.hpp"
#include "probes/library_versions.hpp"
#include "probes/process.hpp"
#include "probes/sysroot.hpp"
#include "probes/topology.hpp"

#include <arpa/inet.h>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>

#ifndef GPUKIT_VERSION
#define GPUKIT_VERSION "unknown"
#endif

namespace launcher {

namespace {

using probes::Error;

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

bool is_local(const std::vector<HostSlots>& hosts, const std::string& local_host)
{
    return std::all_of(hosts.begin(), hosts.end(),
        [&](const HostSlots& h) { return h.name == "localhost" || h.name == "127.0.0.1" || h.name == local_host; });
}

std::string mps_note(const probes::Sysroot& sysroot)
{
    std::string dir = "/tmp/nvidia-mps";
    if (const char* pipe = env("CUDA_MPS_PIPE_DIRECTORY"); pipe != nullptr && *pipe != '\0') {
        dir = pipe;
    }
    if (sysroot.exists(dir + "/control")) {
        return fmt::format("ranks share GPUs; MPS is running (control pipe {}/control), so their kernels run "
                           "concurrently",
            dir);
    }
    return "ranks share GPUs and MPS is not running: they take turns on each GPU; start MPS with "
           "'nvidia-cuda-mps-control -d' for concurrent kernels";
}

// Each host's free GPUs, for --pack and the spread check: --free-gpus, else its slots, else what
// its topology holds.
std::vector<HostCapacity> capacities(const LaunchOptions& o, const std::function<HostSpec(const std::string&)>& spec_of)
{
    if (o.hosts.empty()) {
        throw Error("--pack chooses among hosts: give them with -H or --hostfile, or run inside a Slurm allocation");
    }
    std::map<std::string, unsigned> free;
    for (const auto& f : o.free_gpus) {
        free[f.name] = f.slots.value_or(0);
    }
    std::vector<HostCapacity> list;
    list.reserve(o.hosts.size());
    for (const auto& h : o.hosts) {
        auto it = free.find(h.name);
        const unsigned n = it != free.end() ? it->second
            : h.slots                       ? *h.slots
                                            : node_capacity(*spec_of(h.name).spec, o.plan);
        if (it != free.end()) {
            free.erase(it);
        }
        list.push_back(HostCapacity{h.name, n});
    }
    if (!free.empty()) {
        throw Error(fmt::format("--free-gpus: {} is not one of the hosts (-H, --hostfile)", free.begin()->first));
    }
    return list;
}

std::string pack_note(const PackChoice& choice, unsigned ranks)
{
    std::vector<std::string> chosen;
    for (const auto& h : choice.chosen) {
        chosen.push_back(h.name);
    }
    std::string out = fmt::format("--pack: {} rank{} on {} host{} ({})", ranks, ranks == 1 ? "" : "s", chosen.size(),
        chosen.size() == 1 ? "" : "s", fmt::join(chosen, ", "));
    if (choice.left_out.empty()) {
        return out + "; every host is needed";
    }
    constexpr std::size_t shown = 8;
    std::vector<std::string> left;
    for (std::size_t i = 0; i < choice.left_out.size() && i < shown; ++i) {
        left.push_back(fmt::format("{} ({})", choice.left_out[i].name, choice.left_out[i].reason));
    }
    if (choice.left_out.size() > shown) {
        left.push_back(fmt::format("and {} more", choice.left_out.size() - shown));
    }
    return out + fmt::format("; left out: {}", fmt::join(left, ", "));
}

// What --nic-binding does for these ranks, said once.
void nic_notes(const JobPlan& job, NicBinding binding, const std::function<const char*(const char*)>& getenv,
    std::vector<std::string>& notes)
{
    const bool any_hca =
        std::any_of(job.ranks.begin(), job.ranks.end(), [](const JobRank& r) { return !r.binding.hca.empty(); });
    if (!any_hca || binding == NicBinding::none) {
        return;
    }
    std::vector<std::string> set;
    std::vector<std::string> kept;
    for (const auto& [name, value] : nic_variables(binding, "HCA")) {
        if (const char* user = getenv(name.c_str()); user != nullptr) {
            kept.push_back(fmt::format("{}={}", name, user));
        } else {
            set.push_back(name);
        }
    }
    if (!set.empty()) {
        notes.push_back(fmt::format("each rank gets {} naming its NIC in the table, port 1 (--nic-binding {})",
            fmt::join(set, " and "), to_string(binding)));
    }
    if (!kept.empty()) {
        notes.push_back(fmt::format("{} set by you, kept for every rank", fmt::join(kept, " and ")));
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
        std::cout << probes::version_text("gpurun", GPUKIT_VERSION, probes::library_versions());
        return 0;
    }
    LaunchOptions& o = request.options;
    if (!o.plan.topology_file.empty()) {
        // The helpers may start in another directory (or on another host with a shared file system).
        std::error_code ec;
        auto absolute = std::filesystem::absolute(o.plan.topology_file, ec);
        if (!ec) {
            o.plan.topology_file = absolute.lexically_normal().string();
        }
    }
    for (auto& [host, file] : o.host_topologies) {
        std::error_code ec;
        auto absolute = std::filesystem::absolute(file, ec);
        if (!ec) {
            file = absolute.lexically_normal().string();
        }
    }
    if (!o.nccl_log_dir.empty()) {
        // Ranks write there from their own working directory.
        std::error_code ec;
        auto absolute = std::filesystem::absolute(o.nccl_log_dir, ec).lexically_normal();
        if (!ec) {
            o.nccl_log_dir = (absolute.has_filename() ? absolute : absolute.parent_path()).string();
        }
    }

    std::vector<std::string> launcher_notes;
    Launcher launcher;
    try {
        launcher = find_launcher(o.launcher, env);
    } catch (const Error& e) {
        if (!o.dry_run) {
            throw;
        }
        launcher_notes.push_back(e.what());
        const LauncherKind kind = o.launcher == LauncherKind::automatic ? LauncherKind::openmpi : o.launcher;
        launcher = Launcher{kind,
            kind == LauncherKind::openmpi     ? "mpirun"
                : kind == LauncherKind::hydra ? "mpiexec"
                                              : "srun",
            "", "not found"};
    }
    const bool allow_root = launcher.kind == LauncherKind::openmpi &&
        root_allowed(o.allow_run_as_root, env("OMPI_ALLOW_RUN_AS_ROOT"), env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"));
    if (!o.dry_run && launcher.kind == LauncherKind::openmpi && geteuid() == 0 && !allow_root) {
        throw Error("running as root, which Open MPI refuses; pass --allow-run-as-root, or set both "
                    "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    }
    bool hosts_given = !o.hosts.empty();
    if (!hosts_given) {
        // Inside a Slurm allocation, its nodes are the hosts.
        if (const char* nodes = env("SLURM_JOB_NODELIST"); nodes != nullptr && *nodes != '\0') {
            for (auto& name : expand_node_list(nodes)) {
                o.hosts.push_back(HostSlots{std::move(name), std::nullopt});
            }
            hosts_given = true;
        }
    }
    for (const auto& t : o.host_topologies) {
        if (std::none_of(o.hosts.begin(), o.hosts.end(), [&](const HostSlots& h) { return h.name == t.first; })) {
            throw Error(fmt::format(
                "--topology {}={}: {} is not one of the hosts (-H, --hostfile)", t.first, t.second, t.first));
        }
    }

    probes::require_sysroot_directory(o.plan.sysroot);
    const bool from_file = !o.plan.topology_file.empty();
    probes::Topology topology =
        from_file ? probes::Topology::load_xml(o.plan.topology_file) : probes::Topology::load_live(!o.plan.cpu_only);
    const probes::NodeLayout layout = topology.layout();

    probes::GpuInventory inventory;
    if (!o.plan.cpu_only) {
        probes::InventoryOptions inv;
        inv.from_topology_file = from_file;
        inv.sysroot = probes::Sysroot(o.plan.sysroot);
        if (const char* cvd = env("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
            inv.visible_devices = cvd;
        }
        inventory = probes::discover_gpus(layout, inv);
        const bool default_used =
            o.hosts.empty() || std::any_of(o.hosts.begin(), o.hosts.end(), [&](const HostSlots& h) {
                return std::none_of(o.host_topologies.begin(), o.host_topologies.end(),
                    [&](const auto& t) { return t.first == h.name; });
            });
        if (inventory.pool.empty() && default_used) {
            throw Error(fmt::format("no GPUs found on {}{}; pass --cpu-only to run ranks without GPUs",
                layout.hostname.empty() ? "this node" : layout.hostname,
                inventory.visible_devices_set ? " (CUDA_VISIBLE_DEVICES is empty)"
                    : from_file               ? fmt::format(" in {}", o.plan.topology_file)
                                              : fmt::format(" (NVML and the PCI devices hwloc sees)")));
        }
    }

    const std::string local_host = layout.hostname.empty() ? "localhost" : layout.hostname;
    const NodeSpec this_node{layout, inventory.pool};
    std::map<std::string, NodeSpec> own_specs;
    for (const auto& [host, file] : o.host_topologies) {
        probes::Topology t = probes::Topology::load_xml(file);
        NodeSpec spec{t.layout(), {}};
        if (!o.plan.cpu_only) {
            probes::InventoryOptions inv;
            inv.from_topology_file = true;
            spec.pool = probes::discover_gpus(spec.layout, inv).pool;
        }
        own_specs.emplace(host, std::move(spec));
    }
    auto spec_of = [&](const std::string& host) {
        auto it = own_specs.find(host);
        return it == own_specs.end() ? HostSpec{&this_node, false} : HostSpec{&it->second, true};
    };
    std::vector<std::string> host_notes;
    std::vector<LeftOutHost> left_out;
    if (o.pack) {
        PackChoice choice = pack_hosts(capacities(o, spec_of), *o.np);
        o.hosts = choice.chosen;
        left_out = choice.left_out;
        host_notes.push_back(pack_note(choice, *o.np));
    }
    JobPlan job = plan_job(spec_of, o.plan, o.np, o.hosts, local_host);
    // Whether the job runs on this node alone (no hosts, or only names of this node).
    const bool this_node_only = is_local(o.hosts, local_host);
    if (!o.pack && job.hosts.size() > 1) {
        const unsigned fewest = fewest_hosts(capacities(o, spec_of), static_cast<unsigned>(job.ranks.size()));
        if (fewest != 0 && fewest < job.hosts.size()) {
            host_notes.push_back(
                fmt::format("the job spans {} hosts, but {} would hold its {} ranks; pass --pack to use "
                            "the fewest",
                    job.hosts.size(), fewest, job.ranks.size()));
        }
    }
    std::optional<probes::BatchSplit> batch;
    if (o.batch.global_batch != 0) {
        batch = split_over_ranks(o.batch, static_cast<unsigned>(job.ranks.size()));
    }

    std::vector<std::string> notes = launcher_notes;
    notes.insert(notes.end(), inventory.notes.begin(), inventory.notes.end());
    notes.insert(notes.end(), job.notes.begin(), job.notes.end());
    notes.insert(notes.end(), host_notes.begin(), host_notes.end());
    if (o.plan.ranks_per_gpu > 1 && !o.plan.cpu_only) {
        notes.push_back(mps_note(probes::Sysroot(o.plan.sysroot)));
    }
    if (from_file && !o.dry_run) {
        notes.push_back(
            fmt::format("planning from {}: hwloc does not bind with an XML topology", o.plan.topology_file));
    }

    if (launcher.kind == LauncherKind::hydra) {
        o.profile.mpi_impl = "mpich"; // nsys traces MPICH-ABI calls (Intel MPI too) with --mpi-impl=mpich
    }
    prepare_profile(o.profile, static_cast<unsigned>(job.ranks.size()), o.dry_run, !this_node_only, env("PATH"), notes);

    if (!o.program.empty() && this_node_only && !probes::find_executable(o.program[0], env("PATH"))) {
        std::string what = fmt::format("program not found: '{}' is not {}", o.program[0],
            o.program[0].find('/') != std::string::npos ? "an executable file" : "an executable in PATH");
        if (!o.dry_run) {
            throw Error(what);
        }
        notes.push_back(what + " here");
    }

    HelperOptions helper;
    helper.plan = o.plan;
    helper.report_bindings = o.report_bindings;
    helper.batch = o.batch;
    helper.profile = o.profile;
    if (o.monitor.interval > 0) {
        helper.monitor = monitor_for_helpers(o.monitor, !this_node_only, notes);
        helper.monitor_job = o.dry_run ? monitor_job_shown : new_job_id();
        o.monitor = helper.monitor; // as the report shows it: the file made absolute
    }
    helper.program = o.program.empty() ? std::vector<std::string>{"PROGRAM"} : o.program;
    helper.nic_binding = o.nic_binding;
    if (const char* env_addr = env("MASTER_ADDR");
        !o.master_addr.empty() || (env_addr != nullptr && *env_addr != '\0')) {
        helper.master_addr = !o.master_addr.empty() ? o.master_addr : env_addr;
    } else {
        const std::string& first = job.hosts.front().name;
        MasterAddress chosen =
            choose_master_address(first, o.hosts.empty() || is_local({job.hosts.front()}, local_host),
                job.hosts.size() == 1, system_address_lookup());
        helper.master_addr = chosen.address;
        if (!chosen.note.empty()) {
            notes.push_back(chosen.note);
        }
    }
    if (o.master_port) {
        helper.master_port = *o.master_port;
    } else if (const char* port = env("MASTER_PORT"); port != nullptr && *port != '\0') {
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(port, port + std::strlen(port), value);
        if (ec != std::errc() || *ptr != '\0' || value == 0 || value > 65535) {
            throw Error(fmt::format("MASTER_PORT={}: expected a port number from 1 to 65535; fix or unset it, or "
                                    "pass --master-port",
                port));
        }
        helper.master_port = value;
    } else if (this_node_only) {
        helper.master_port = free_port();
    } else {
        // A port free here says nothing about the first host.
        helper.master_port = 29500;
        notes.push_back("MASTER_PORT 29500 (torch's default) on " + helper.master_addr +
            "; pass --master-port if it is taken there");
    }
    if (!this_node_only && env("CUDA_VISIBLE_DEVICES") != nullptr) {
        notes.push_back("CUDA_VISIBLE_DEVICES is not passed to other hosts: each host's ranks use that host's "
                        "own setting (pass -x CUDA_VISIBLE_DEVICES to force this one)");
    }

    std::vector<std::string> forwarded;
    for (const char* name : {"PATH", "LD_LIBRARY_PATH"}) {
        if (env(name) != nullptr) {
            forwarded.emplace_back(name);
        }
    }
    for (char** e = environ; *e != nullptr; ++e) {
        std::string_view entry(*e);
        if (entry.rfind("GPUKIT_", 0) == 0) {
            forwarded.emplace_back(entry.substr(0, entry.find('=')));
        }
    }

    // The check's log directory exists only for a real run (--dry-run shows where it would be), and
    // goes with `nccl` on every way out of this function.
    std::unique_ptr<NcclCheck> nccl;
    if (o.nccl_check != NcclCheckMode::off) {
        std::string dir = o.nccl_log_dir.empty() ? nccl_private_dir_shown : o.nccl_log_dir;
        if (!o.dry_run) {
            const char* tmpdir = env("TMPDIR");
            nccl = std::make_unique<NcclCheck>(
                o.nccl_check, static_cast<unsigned>(job.ranks.size()), o.nccl_log_dir, tmpdir != nullptr ? tmpdir : "");
            dir = nccl->dir();
        }
        NcclCheckEnv nccl_env = nccl_check_env(dir, env, o.exports);
        forwarded.insert(forwarded.end(), nccl_env.exports.begin(), nccl_env.exports.end());
        notes.insert(notes.end(), nccl_env.notes.begin(), nccl_env.notes.end());
        if (!this_node_only) {
            notes.push_back(fmt::format("--nccl-check reads the logs in {} on this node: ranks on other hosts write "
                                        "theirs into the same path there when it is a directory of yours that not "
                                        "every user can write to (else to their standard output), so only a "
                                        "--nccl-log-dir on a shared file system brings them in",
                dir));
        }
    }

    nic_notes(job, o.nic_binding, env, notes);
    LaunchRequest launch_request;
    launch_request.hosts =
        o.hosts.empty() ? std::vector<HostSlots>{HostSlots{"localhost", job.hosts.front().slots}} : job.hosts;
    launch_request.ranks = static_cast<unsigned>(job.ranks.size());
    launch_request.hosts_given = hosts_given;
    launch_request.allow_root = allow_root;
    launch_request.env = forwarded;
    launch_request.env.insert(launch_request.env.end(), o.exports.begin(), o.exports.end());
    launch_request.launcher_args = o.launcher_args;
    if (auto found = probes::find_executable("env", env("PATH"))) {
        launch_request.env_program = *found;
    }
    launch_request.helper = rank_helper_path();
    launch_request.helper_args = helper_arguments(helper);
    const std::vector<std::string> command = launcher_command(launcher, launch_request);
    const std::string& helper_path = launch_request.helper;

    if (o.dry_run) {
        PlanReport report{job, o, inventory.source, notes, command, batch, launcher, left_out, &helper};
        if (o.json) {
            // Arguments are bytes: what is not UTF-8 is shown as U+FFFD rather than refused.
            std::cout << render_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        } else {
            std::cout << render_text(report);
        }
        return 0;
    }
    for (const auto& note : notes) {
        fmt::print(stderr, "gpurun: note: {}\n", note);
    }
    if (!probes::find_executable(helper_path, nullptr)) {
        throw Error(
            fmt::format("the rank helper {} is missing; reinstall gpukit or set GPUKIT_RANK_HELPER", helper_path));
    }
    create_profile_dir(o.profile);
    std::cout.flush();
    std::function<void()> tick;
    if (nccl && o.nccl_check == NcclCheckMode::init) {
        tick = [&nccl] { fmt::print(stderr, "{}", nccl->poll()); };
    }
    const int status = run_job(command, o.grace_seconds, tick);
    if (!helper.monitor_job.empty()) {
        // The monitor removes its node's directory; this covers one that was killed on this node.
        const char* tmpdir = env("TMPDIR");
        remove_private_dir(job_dir_path(helper.monitor_job, tmpdir != nullptr ? tmpdir : ""));
    }
    if (nccl) {
        fmt::print(stderr, "{}", nccl->finish());
    }
    fmt::print(stderr, "{}", profile_epilogue(o.profile, static_cast<unsigned>(job.ranks.size())));
    return status;
}

} // namespace

int run_gpurun(int argc, char** argv)
{
    try {
        return run(std::vector<std::string>(argv, argv + argc));
    } catch (const Error& e) {
        fmt::print(stderr, "gpurun: {}\n", probes::printable(e.what()));
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpurun: internal error: {}\n", probes::printable(e.what()));
        return 3;
    }
}

} // namespace launcher
