#include "doctor/commands/node_options.hpp"

#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/python.hpp"
#include "base/sysroot.hpp"
#include "base/topology.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/engine/snapshot.hpp"
#include "doctor/probes/table.hpp"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

#ifndef GPUKIT_VERSION
#define GPUKIT_VERSION "unknown"
#endif

namespace doctor::commands {

void add_node_options(CLI::App& app, NodeOptions& o)
{
    app.add_option("--only", o.only, "Run only these probes (names or prefixes, comma-separated)")->type_name("LIST");
    app.add_option("--skip", o.skip, "Leave out these probes")->type_name("LIST");
    app.add_option("--sysroot", o.sysroot, "Read /sys and /proc under DIR (default /)")->type_name("DIR");
    app.add_option("--topology", o.topology, "Use this hwloc XML instead of this machine's topology")
        ->type_name("FILE");
    base::add_number(app, "--timeout", o.timeout, "Seconds each collector may take (default 10)", "S");
    app.add_flag("--deep", o.deep,
        "Also measure: copy bandwidth (host, device, GPU pairs) and an NCCL all-reduce (seconds to minutes)");
    base::add_number(
        app, "--deep-timeout", o.deep_timeout, "Seconds each deep measurement may take (default 300)", "S");
    app.add_option("--policy", o.policy_file, "Policy TOML over the built-in defaults")->type_name("FILE");
}

void check_timeout(const NodeOptions& o)
{
    if (!(o.timeout > 0 && o.timeout <= 3600)) {
        throw base::Error(fmt::format("--timeout {}: expected seconds, more than 0 and at most 3600", o.timeout));
    }
}

void check_deep_timeout(const NodeOptions& o)
{
    if (!(o.deep_timeout > 0 && o.deep_timeout <= 86400)) {
        throw base::Error(
            fmt::format("--deep-timeout {}: expected seconds, more than 0 and at most 86400", o.deep_timeout));
    }
}

NodeRun prepare_node_run(const NodeOptions& o, bool progress, bool live)
{
    NodeRun run;
    run.probes = probes::select_probes(o.only, o.skip, o.deep);
    if (!o.topology.empty() && live) {
        // An unreadable topology file is an input error, not a broken node.
        base::Topology::load_xml(o.topology);
    }
    run.policy = engine::Policy::defaults();
    if (!o.policy_file.empty()) {
        run.policy.merge_toml(base::read_input_file(o.policy_file, "policy"), o.policy_file);
    }
    engine::CollectContext& ctx = run.context;
    // Absolute: the collectors run from "/".
    ctx.sysroot = std::filesystem::absolute(o.sysroot).lexically_normal().string();
    ctx.topology_file = o.topology.empty() ? o.topology : std::filesystem::absolute(o.topology).string();
    ctx.timeout = std::chrono::milliseconds(static_cast<long>(o.timeout * 1000));
    ctx.deep_timeout = std::chrono::milliseconds(static_cast<long>(o.deep_timeout * 1000));
    ctx.progress = progress && isatty(STDERR_FILENO) != 0;
    ctx.env = base::environment();
    ctx.policy = run.policy;
    base::require_sysroot_directory(o.sysroot);
    return run;
}

nlohmann::json snapshot_document(const NodeRun& run)
{
    return nlohmann::json{{"gpudoctor_snapshot", engine::snapshot_format}, {"version", GPUKIT_VERSION},
        {"facts", engine::collect(probes::collectors_for(run.probes), run.context).write()}};
}

} // namespace doctor::commands
