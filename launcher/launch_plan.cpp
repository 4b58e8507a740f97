#include "launcher/launch_plan.hpp"

#include "base/error.hpp"
#include "base/launchers/node_list.hpp"
#include "base/process.hpp"
#include "base/sysroot.hpp"
#include "launcher/global_batch.hpp"
#include "launcher/job_dir.hpp"
#include "launcher/nccl_check.hpp"
#include "launcher/node_monitor.hpp"
#include "launcher/rank_profiler.hpp"
#include "launcher/slurm_allocation.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <initializer_list>
#include <string_view>

namespace launcher {

namespace {

using base::Error;

bool is_local(const std::vector<HostSlots>& hosts, const std::string& local_host)
{
    return std::all_of(
        hosts.begin(), hosts.end(), [&](const HostSlots& h) { return is_this_node(h.name, local_host); });
}

std::string mps_note(const base::Sysroot& sysroot, const std::function<const char*(const char*)>& env)
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

bool starts_with_any(const std::string& name, std::initializer_list<std::string_view> prefixes)
{
    return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return name.rfind(p, 0) == 0; });
}

/// The launcher's variables, NAME or NAME=VALUE, one per name: the last given wins (a value set for
/// the job over the caller's), in the order of those kept.
std::vector<std::string> one_per_name(const std::vector<std::string>& entries)
{
    std::vector<std::string> out;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::string name = entries[i].substr(0, entries[i].find('='));
        const bool later = std::any_of(entries.begin() + static_cast<std::ptrdiff_t>(i) + 1, entries.end(),
            [&](const std::string& e) { return e.substr(0, e.find('=')) == name; });
        if (!later) {
            out.push_back(entries[i]);
        }
    }
    return out;
}

// srun starts an MPI program's ranks only with the plugin its MPI speaks (Open MPI: PMIx; MPICH and
// Intel MPI: PMI-2); without it MPI_Init fails or each rank runs as a job of one. Chosen from the
// program's own libraries where it names them and srun offers it; said plainly otherwise.
void srun_mpi(
    const LaunchOptions& o, const PlanContext& ctx, std::vector<std::string>& args, std::vector<std::string>& notes)
{
    const bool given =
        std::any_of(args.begin(), args.end(), [](const std::string& a) { return a.rfind("--mpi", 0) == 0; }) ||
        ctx.env("SLURM_MPI_TYPE") != nullptr;
    if (given || o.program.empty()) {
        return;
    }
    const std::string offered = ctx.srun_mpi_plugins.empty()
        ? std::string()
        : fmt::format(" (this srun offers {})", fmt::join(ctx.srun_mpi_plugins, ", "));
    const auto start = ctx.program_start ? ctx.program_start(o.program[0]) : std::nullopt;
    const std::string plugin = start ? launchers::srun_mpi_for(*start) : "";
    if (plugin.empty()) {
        notes.push_back(fmt::format("srun starts the ranks with Slurm's default MPI plugin: an MPI program (mpi4py "
                                    "too) needs --launcher-args --mpi=pmix for Open MPI or --mpi=pmi2 for MPICH{}",
            offered));
        return;
    }
    const char* mpi = plugin == "pmix" ? "Open MPI" : "MPICH or Intel MPI";
    if (!ctx.srun_mpi_plugins.empty() &&
        std::find(ctx.srun_mpi_plugins.begin(), ctx.srun_mpi_plugins.end(), plugin) == ctx.srun_mpi_plugins.end()) {
        notes.push_back(fmt::format("{} is linked with {}, whose ranks need srun --mpi={}, and this srun offers only "
                                    "{}: install Slurm's {} plugin, or pass --launcher openmpi or mpich",
            o.program[0], mpi, plugin, fmt::join(ctx.srun_mpi_plugins, ", "), plugin));
        return;
    }
    args.insert(args.begin(), "--mpi=" + plugin);
    notes.push_back(fmt::format("srun --mpi={}: {} is linked with {}{}", plugin, o.program[0], mpi, offered));
}

} // namespace

std::vector<std::string> passed_variables(const std::vector<std::string>& names, bool all)
{
    std::vector<std::string> out;
    for (const auto& name : names) {
        // Host-specific: each host's own value applies (pass -x CUDA_VISIBLE_DEVICES to force it).
        if (name == "CUDA_VISIBLE_DEVICES") {
            continue;
        }
        const bool wanted = all
            ? !(starts_with_any(name,
                    {"SLURM_", "SLURMD_", "OMPI_", "PMI_", "PMIX_", "HYDRA_", "MPI_LOCAL", "SSH_", "XDG_", "DBUS_"}) ||
                  name == "HOSTNAME" || name == "HOST" || name == "PWD" || name == "OLDPWD" || name == "SHLVL" ||
                  name == "_" || name == "DISPLAY" || name == "TERM")
            : (name == "PATH" || name == "LD_LIBRARY_PATH" ||
                  starts_with_any(name, {"NCCL_", "UCX_", "CUDA_", "PYTHON", "TORCH", "HF_", "OMP_", "GPUKIT_"}));
        if (wanted && std::find(out.begin(), out.end(), name) == out.end()) {
            out.push_back(name);
        }
    }
    return out;
}

HostSource resolve_hosts(LaunchOptions& o, const std::function<const char*(const char*)>& env)
{
    HostSource source;
    source.given = !o.hosts.empty();
    std::optional<SlurmAllocation> allocation;
    if (!source.given) {
        // Inside a Slurm allocation, its nodes are the hosts.
        allocation = slurm_allocation(env, o.plan.ranks_per_gpu, o.plan.cpu_only);
        if (allocation) {
            o.hosts = allocation->hosts;
            source.notes = allocation->notes;
            source.given = true;
        }
    }
    if (o.gpus_per_node) {
        if (!source.given) {
            throw Error(
                "--gpus-per-node counts the GPUs of other hosts: give them with -H or --hostfile, or run inside "
                "a Slurm allocation (this node's GPUs are counted from its topology)");
        }
        if (allocation && allocation->gpus_per_node && *o.gpus_per_node > *allocation->gpus_per_node) {
            throw Error(fmt::format("--gpus-per-node {} but the Slurm allocation gives each node {} ({}); lower "
                                    "--gpus-per-node",
                *o.gpus_per_node, *allocation->gpus_per_node, base::quote_input(allocation->gpus_told_by)));
        }
        const std::uint64_t slots = std::uint64_t(*o.gpus_per_node) * std::max(1U, o.plan.ranks_per_gpu);
        for (auto& h : o.hosts) {
            if (!h.slots || allocation) {
                h.slots = static_cast<unsigned>(slots);
            }
        }
    }
    for (const auto& t : o.host_topologies) {
        if (std::none_of(o.hosts.begin(), o.hosts.end(), [&](const HostSlots& h) { return h.name == t.first; })) {
            throw Error(fmt::format(
                "--topology {}={}: {} is not one of the hosts (-H, --hostfile)", t.first, t.second, t.first));
        }
    }
    return source;
}

namespace {

/// The ranks planned on this node, when gpurun planned them from this node's own live topology
/// under one name of the node; nullopt when there are none or they were planned otherwise.
std::optional<NodePlan> plan_of_this_node(
    const JobPlan& job, const std::string& local_host, const PlanContext& ctx, bool from_file)
{
    if (from_file) {
        return std::nullopt;
    }
    NodePlan node;
    const std::string* name = nullptr;
    for (const JobRank& r : job.ranks) {
        if (!is_this_node(r.host, local_host)) {
            continue;
        }
        if (ctx.host_specs.count(r.host) != 0 || r.binding.on_host || (name != nullptr && *name != r.host)) {
            return std::nullopt;
        }
        name = &r.host;
        node.ranks.push_back(r.binding);
    }
    std::sort(node.ranks.begin(), node.ranks.end(),
        [](const RankBinding& a, const RankBinding& b) { return a.local_rank < b.local_rank; });
    for (std::size_t i = 0; i < node.ranks.size(); ++i) {
        if (node.ranks[i].local_rank != i) {
            return std::nullopt;
        }
    }
    if (node.ranks.empty()) {
        return std::nullopt;
    }
    return node;
}

} // namespace

LaunchPlan plan_launch(LaunchOptions& o, const HostSource& hosts, const PlanContext& ctx)
{
    const auto& env = ctx.env;
    const base::NodeLayout& layout = ctx.layout;
    const base::GpuInventory& inventory = ctx.inventory;
    const bool from_file = !o.plan.topology_file.empty();
    const std::string local_host = layout.hostname.empty() ? "localhost" : layout.hostname;
    if (!o.plan.cpu_only) {
        // Ranks on this node need its GPUs; other hosts are counted by their slots and bound there.
        const bool runs_here = o.hosts.empty() || std::any_of(o.hosts.begin(), o.hosts.end(), [&](const HostSlots& h) {
            return is_this_node(h.name, local_host) && ctx.host_specs.count(h.name) == 0;
        });
        if (inventory.pool.empty() && runs_here) {
            throw Error(fmt::format("no GPUs found on {}{}; pass --cpu-only to run ranks without GPUs",
                layout.hostname.empty() ? "this node" : layout.hostname,
                inventory.visible_devices_set ? " (CUDA_VISIBLE_DEVICES is empty)"
                    : from_file               ? fmt::format(" in {}", o.plan.topology_file)
                                              : fmt::format(" (NVML and the PCI devices hwloc sees)")));
        }
    }

    LaunchPlan plan;
    const NodeSpec this_node{layout, inventory.pool};
    auto spec_of = [&](const std::string& host) {
        auto it = ctx.host_specs.find(host);
        return it == ctx.host_specs.end() ? HostSpec{&this_node, false} : HostSpec{&it->second, true};
    };
    std::vector<std::string> host_notes = hosts.notes;
    if (o.pack) {
        PackChoice choice = pack_hosts(capacities(o, spec_of), *o.np);
        o.hosts = choice.chosen;
        plan.left_out = choice.left_out;
        host_notes.push_back(pack_note(choice, *o.np));
    }
    plan.job = plan_job(spec_of, o.plan, o.np, o.hosts, local_host);
    const JobPlan& job = plan.job;
    const auto ranks = static_cast<unsigned>(job.ranks.size());
    plan.this_node_only = is_local(o.hosts, local_host);
    if (!o.dry_run) {
        plan.this_node = plan_of_this_node(job, local_host, ctx, from_file);
    }
    const bool this_node_only = plan.this_node_only;
    if (!o.pack && job.hosts.size() > 1) {
        const unsigned fewest = fewest_hosts(capacities(o, spec_of), ranks);
        if (fewest != 0 && fewest < job.hosts.size()) {
            host_notes.push_back(
                fmt::format("the job spans {} hosts, but {} would hold its {} ranks; pass --pack to use "
                            "the fewest",
                    job.hosts.size(), fewest, job.ranks.size()));
        }
    }
    if (o.batch.global_batch != 0) {
        plan.batch = split_over_ranks(o.batch, ranks);
    }

    std::vector<std::string>& notes = plan.notes;
    notes = ctx.launcher_notes;
    notes.insert(notes.end(), inventory.notes.begin(), inventory.notes.end());
    notes.insert(notes.end(), job.notes.begin(), job.notes.end());
    notes.insert(notes.end(), host_notes.begin(), host_notes.end());
    if (o.plan.ranks_per_gpu > 1 && !o.plan.cpu_only) {
        notes.push_back(mps_note(base::Sysroot(o.plan.sysroot), env));
    }
    if (from_file && !o.dry_run) {
        notes.push_back(
            fmt::format("planning from {}: hwloc does not bind with an XML topology", o.plan.topology_file));
    }

    if (const char* impl = launchers::row(ctx.launcher.kind).nsys_mpi_impl; impl != nullptr) {
        o.profile.mpi_impl = impl; // nsys traces MPICH-ABI calls (Intel MPI too) with --mpi-impl=mpich
    }
    prepare_profile(o.profile, ranks, o.dry_run, !this_node_only, env("PATH"), notes);

    if (!o.program.empty() && this_node_only && !base::find_executable(o.program[0], env("PATH"))) {
        std::string what = fmt::format("program not found: '{}' is not {}", o.program[0],
            o.program[0].find('/') != std::string::npos ? "an executable file" : "an executable in PATH");
        if (!o.dry_run) {
            throw Error(what);
        }
        notes.push_back(what + " here");
    }

    HelperOptions& helper = plan.helper;
    helper.plan = o.plan;
    helper.report_bindings = o.report_bindings;
    helper.output = o.output;
    helper.grace_seconds = o.grace_seconds;
    helper.batch = o.batch;
    helper.profile = o.profile;
    if (o.monitor.interval > 0) {
        helper.monitor = monitor_for_helpers(o.monitor, !this_node_only, notes);
        helper.monitor_job = o.dry_run ? monitor_job_shown : new_job_id();
        o.monitor = helper.monitor; // as the report shows it: the file made absolute
    }
    helper.program = o.program.empty() ? std::vector<std::string>{"PROGRAM"} : o.program;
    for (const auto& h : job.hosts) {
        helper.host_ranks.push_back(h.slots.value_or(0));
    }
    helper.nic_binding = o.nic_binding;
    if (const char* env_addr = env("MASTER_ADDR");
        !o.master_addr.empty() || (env_addr != nullptr && *env_addr != '\0')) {
        helper.master_addr = !o.master_addr.empty() ? o.master_addr : env_addr;
    } else {
        const std::string& first = job.hosts.front().name;
        MasterAddress chosen = choose_master_address(
            first, o.hosts.empty() || is_local({job.hosts.front()}, local_host), job.hosts.size() == 1, ctx.lookup);
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
        helper.master_port = ctx.free_port();
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

    const auto passed_note_at = static_cast<std::ptrdiff_t>(notes.size());
    std::vector<std::string> forwarded = passed_variables(ctx.variables, o.env_all);
    if (!helper.monitor_job.empty()) {
        forwarded.emplace_back(job_id_variable); // its value is set in gpurun's environment: not in argv
    }
    if (o.nccl_check != NcclCheckMode::off) {
        const std::string dir = ctx.nccl_dir(ranks);
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

    if (ctx.launcher.kind == LauncherKind::local && !this_node_only) {
        throw Error("--launcher local starts ranks on this node only, and the job has other hosts; pass --launcher "
                    "openmpi, mpich or srun");
    }
    std::vector<std::string> launcher_args = o.launcher_args;
    if (ctx.launcher.kind == LauncherKind::srun) {
        srun_mpi(o, ctx, launcher_args, notes);
    }
    nic_notes(job, o.nic_binding, env, notes);
    launchers::LaunchRequest request;
    request.grace_seconds = o.grace_seconds;
    request.hosts =
        o.hosts.empty() ? std::vector<HostSlots>{HostSlots{"localhost", job.hosts.front().slots}} : job.hosts;
    request.ranks = ranks;
    request.hosts_given = hosts.given;
    request.allow_root = ctx.allow_root;
    forwarded.insert(forwarded.end(), o.exports.begin(), o.exports.end());
    request.env = one_per_name(forwarded);
    for (const auto& name : passed_variables(ctx.variables, o.env_all)) {
        if (std::find(request.env.begin(), request.env.end(), name) != request.env.end()) {
            plan.passed.push_back(name); // passed with the caller's value, not one set for the job
        }
    }
    if (!this_node_only && !plan.passed.empty()) {
        notes.insert(notes.begin() + passed_note_at,
            fmt::format("passed to the ranks on every host: {}{}", fmt::join(plan.passed, " "),
                o.env_all ? " (--env-all)" : "; pass -x NAME for others, or --env-all"));
    }
    request.launcher_args = launcher_args;
    request.env_program = ctx.env_program;
    request.helper = ctx.helper_path;
    request.helper_args = helper_arguments(helper);
    plan.command = launchers::launcher_command(ctx.launcher, request);
    return plan;
}

} // namespace launcher
