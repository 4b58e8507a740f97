#pragma once

// What the subcommands that look at a node (check, snapshot, fleet, topo) share: which probes run
// (--only, --skip, --deep), where the facts come from (--sysroot, --topology), how long collectors
// may take, and the policy they are judged by.

#include "doctor/engine/probe.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace doctor::commands {

struct NodeOptions {
    std::string only; ///< --only LIST
    std::string skip; ///< --skip LIST
    std::string sysroot = "/";
    std::string topology; ///< --topology FILE; "" = this machine
    std::string policy_file; ///< --policy FILE over the built-in one
    double timeout = 10.0; ///< seconds per collector
    double deep_timeout = 300.0; ///< seconds per deep measurement
    bool deep = false;
};

/// --only, --skip, --sysroot, --topology, --timeout, --deep, --deep-timeout and --policy, as check
/// and snapshot take them.
void add_node_options(CLI::App& app, NodeOptions& options);

/// --timeout: more than 0 and at most an hour; else base::Error with the value.
void check_timeout(const NodeOptions& options);
/// --deep-timeout: more than 0 and at most a day; else base::Error with the value.
void check_deep_timeout(const NodeOptions& options);

/// What --only, --skip and --deep select, the policy (--policy over the built-in one) and the
/// context the collectors run in. A --topology file that cannot be read, a bad policy file and a
/// --sysroot that is no directory are base::Error (exit 2), found before anything is collected.
struct NodeRun {
    std::vector<const engine::Probe*> probes;
    engine::Policy policy;
    engine::CollectContext context;
};

/// Checks and resolves `options` after the two timeouts were checked; `progress`: the deep
/// collectors may say on stderr what they measure (when stderr is a terminal); `live`: this node
/// is to be read (not a snapshot of one), so --topology must be readable.
NodeRun prepare_node_run(const NodeOptions& options, bool progress, bool live = true);

/// What `gpudoctor snapshot` prints: the format, this gpudoctor's version and every fact the
/// probes' collectors gather here.
nlohmann::json snapshot_document(const NodeRun& run);

} // namespace doctor::commands
