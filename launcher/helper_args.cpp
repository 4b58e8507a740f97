#include "launcher/helper_args.hpp"

#include "base/batch_split.hpp"
#include "base/error.hpp"
#include "base/launchers/node_list.hpp"
#include "launcher/global_batch.hpp"
#include "launcher/rank_profiler.hpp"

#include <charconv>
#include <fmt/format.h>

namespace launcher {

namespace {

using base::Error;

unsigned to_unsigned(const std::string& option, const std::string& text)
{
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        throw Error(fmt::format("{} {}: not a number", option, text));
    }
    return value;
}

} // namespace

std::vector<std::string> helper_arguments(const HelperOptions& o)
{
    const PlanOptions defaults;
    std::vector<std::string> args;
    if (o.plan.cpu_only) {
        args.emplace_back("--cpu-only");
    }
    if (o.plan.bind != defaults.bind) {
        args.insert(args.end(), {"--bind", to_string(o.plan.bind)});
    }
    if (o.plan.cpus_per_rank != defaults.cpus_per_rank) {
        args.insert(args.end(), {"--cpus-per-rank", std::to_string(o.plan.cpus_per_rank)});
    }
    if (o.plan.ranks_per_gpu != defaults.ranks_per_gpu) {
        args.insert(args.end(), {"--ranks-per-gpu", std::to_string(o.plan.ranks_per_gpu)});
    }
    if (o.plan.visibility != defaults.visibility) {
        args.insert(args.end(), {"--gpu-visibility", to_string(o.plan.visibility)});
    }
    if (o.plan.memory != defaults.memory) {
        args.insert(args.end(), {"--mem-bind", to_string(o.plan.memory)});
    }
    if (!o.plan.topology_file.empty()) {
        args.insert(args.end(), {"--topology", o.plan.topology_file});
    }
    if (o.plan.sysroot != defaults.sysroot) {
        args.insert(args.end(), {"--sysroot", o.plan.sysroot});
    }
    if (!o.master_addr.empty()) {
        args.insert(args.end(), {"--master-addr", o.master_addr});
    }
    if (o.master_port != 0) {
        args.insert(args.end(), {"--master-port", std::to_string(o.master_port)});
    }
    if (o.batch.global_batch != 0) {
        args.insert(args.end(), {"--global-batch", std::to_string(o.batch.global_batch)});
    }
    if (!o.batch.speeds.empty()) {
        args.insert(args.end(), {"--speeds", format_speeds(o.batch.speeds)});
    }
    if (o.report_bindings) {
        args.emplace_back("--report-bindings");
    }
    if (!o.host_ranks.empty()) {
        args.insert(args.end(), {"--host-ranks", launchers::compress_count_list(o.host_ranks)});
    }
    if (o.output.tag) {
        args.emplace_back("--tag-output");
    }
    if (!o.output.log_dir.empty()) {
        args.insert(args.end(), {"--log-dir", o.output.log_dir});
    }
    if (o.grace_seconds != HelperOptions{}.grace_seconds) {
        args.insert(args.end(), {"--grace", fmt::format("{}", o.grace_seconds)});
    }
    if (o.nic_binding != NicBinding::ucx) {
        args.insert(args.end(), {"--nic-binding", to_string(o.nic_binding)});
    }
    if (o.profile.profiler != Profiler::none) {
        args.insert(args.end(),
            {"--profile", to_string(o.profile.profiler), "--profile-dir", o.profile.dir, "--profile-ranks",
                format_rank_list(o.profile.ranks)});
        if (o.profile.mpi_impl != ProfileOptions{}.mpi_impl) {
            args.insert(args.end(), {"--profile-mpi", o.profile.mpi_impl});
        }
    }
    if (o.monitor.interval > 0) {
        args.insert(args.end(), {"--monitor-interval", fmt::format("{}", o.monitor.interval)});
        if (!o.monitor.json_file.empty()) {
            args.insert(args.end(), {"--monitor-json", o.monitor.json_file});
        }
        if (o.monitor.enforce != EnforceMode::warn) {
            args.insert(args.end(), {"--enforce", to_string(o.monitor.enforce)});
        }
    }
    args.emplace_back("--");
    args.insert(args.end(), o.program.begin(), o.program.end());
    return args;
}

HelperOptions parse_helper_arguments(const std::vector<std::string>& args)
{
    HelperOptions o;
    std::size_t i = 0;
    auto value = [&](const std::string& option) -> const std::string& {
        if (i + 1 >= args.size()) {
            throw Error(fmt::format("{} needs a value", option));
        }
        return args[++i];
    };
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "--cpu-only") {
            o.plan.cpu_only = true;
        } else if (a == "--report-bindings") {
            o.report_bindings = true;
        } else if (a == "--host-ranks") {
            o.host_ranks = launchers::expand_count_list(value(a));
        } else if (a == "--tag-output") {
            o.output.tag = true;
        } else if (a == "--log-dir") {
            o.output.log_dir = value(a);
            if (o.output.log_dir.empty()) {
                throw Error("--log-dir '': expected a directory");
            }
        } else if (a == "--grace") {
            const std::string& v = value(a);
            double seconds = -1;
            auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
            if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || !(seconds >= 0 && seconds <= 86400)) {
                throw Error(fmt::format("--grace {}: expected seconds from 0 to 86400", v));
            }
            o.grace_seconds = seconds;
        } else if (a == "--nic-binding") {
            const std::string& v = value(a);
            if (v == "ucx") {
                o.nic_binding = NicBinding::ucx;
            } else if (v == "nccl") {
                o.nic_binding = NicBinding::nccl;
            } else if (v == "none") {
                o.nic_binding = NicBinding::none;
            } else {
                throw Error(fmt::format("--nic-binding {}: expected ucx, nccl or none", v));
            }
        } else if (a == "--bind") {
            const std::string& v = value(a);
            if (v == "numa") {
                o.plan.bind = BindMode::numa;
            } else if (v == "socket") {
                o.plan.bind = BindMode::socket;
            } else if (v == "cores") {
                o.plan.bind = BindMode::cores;
            } else if (v == "none") {
                o.plan.bind = BindMode::none;
            } else {
                throw Error(fmt::format("--bind {}: expected numa, socket, cores or none", v));
            }
        } else if (a == "--cpus-per-rank") {
            o.plan.cpus_per_rank = to_unsigned(a, value(a));
        } else if (a == "--ranks-per-gpu") {
            o.plan.ranks_per_gpu = to_unsigned(a, value(a));
        } else if (a == "--gpu-visibility") {
            const std::string& v = value(a);
            if (v != "all" && v != "isolate") {
                throw Error(fmt::format("--gpu-visibility {}: expected all or isolate", v));
            }
            o.plan.visibility = v == "all" ? GpuVisibility::all : GpuVisibility::isolate;
        } else if (a == "--mem-bind") {
            const std::string& v = value(a);
            if (v == "none") {
                o.plan.memory = base::MemoryPolicy::none;
            } else if (v == "preferred") {
                o.plan.memory = base::MemoryPolicy::preferred;
            } else if (v == "strict") {
                o.plan.memory = base::MemoryPolicy::strict;
            } else {
                throw Error(fmt::format("--mem-bind {}: expected preferred, strict or none", v));
            }
        } else if (a == "--topology") {
            o.plan.topology_file = value(a);
        } else if (a == "--sysroot") {
            o.plan.sysroot = value(a);
        } else if (a == "--master-addr") {
            o.master_addr = value(a);
        } else if (a == "--master-port") {
            o.master_port = to_unsigned(a, value(a));
        } else if (a == "--global-batch") {
            o.batch.global_batch = to_unsigned(a, value(a));
            if (o.batch.global_batch == 0) {
                throw Error("--global-batch 0: expected at least one sample");
            }
        } else if (a == "--speeds") {
            o.batch.speeds = base::parse_speeds(value(a), a);
        } else if (a == "--profile") {
            const std::string& v = value(a);
            if (v != "nsys") {
                throw Error(fmt::format("--profile {}: expected nsys", v));
            }
            o.profile.profiler = Profiler::nsys;
        } else if (a == "--profile-dir") {
            o.profile.dir = value(a);
        } else if (a == "--profile-ranks") {
            o.profile.ranks = parse_rank_list(value(a), a);
        } else if (a == "--profile-mpi") {
            const std::string& v = value(a);
            if (v != "openmpi" && v != "mpich") {
                throw Error(fmt::format("--profile-mpi {}: expected openmpi or mpich", v));
            }
            o.profile.mpi_impl = v;
        } else if (a == "--monitor-interval") {
            const std::string& v = value(a);
            double seconds = 0;
            auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
            if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || !(seconds > 0)) {
                throw Error(fmt::format("--monitor-interval {}: expected seconds above 0", v));
            }
            o.monitor.interval = seconds;
        } else if (a == "--monitor-json") {
            o.monitor.json_file = value(a);
        } else if (a == "--enforce") {
            const std::string& v = value(a);
            if (v != "warn" && v != "kill") {
                throw Error(fmt::format("--enforce {}: expected warn or kill", v));
            }
            o.monitor.enforce = v == "kill" ? EnforceMode::kill : EnforceMode::warn;
        } else {
            throw Error(fmt::format("unknown option '{}'; gpurun-rank is started by gpurun", a));
        }
    }
    if (!o.batch.speeds.empty() && o.batch.global_batch == 0) {
        throw Error("--speeds needs --global-batch");
    }
    if (o.profile != ProfileOptions{} && o.profile.profiler == Profiler::none) {
        throw Error("--profile-dir, --profile-ranks and --profile-mpi need --profile");
    }
    if (o.profile.profiler != Profiler::none && o.profile.dir.empty()) {
        throw Error("--profile needs --profile-dir");
    }
    if (o.monitor.interval <= 0 && (!o.monitor.json_file.empty() || o.monitor.enforce != EnforceMode::warn)) {
        throw Error("--monitor-json and --enforce need --monitor-interval");
    }
    o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
    if (o.program.empty()) {
        throw Error("no program to run after '--'");
    }
    return o;
}

} // namespace launcher
