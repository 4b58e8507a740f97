#pragma once

// gpudoctor fleet, the merge: every node's snapshot judged by check's own probes and policy, the
// findings grouped across nodes ("shm too small on n07, n12"), the nodes that did not answer named
// with what happened, the facts that should be equal across nodes and are not (drift: each with
// its majority value and the odd nodes), and the nodes fit to run on. Pure: the nodes' answers
// come in as text; nothing is run here.

#include "doctor/engine/facts.hpp"
#include "doctor/engine/policy.hpp"
#include "doctor/engine/probe.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/engine/verdict.hpp"
#include "doctor/fleet/pairs.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace doctor::fleet {

/// How a node answered. Anything but `snapshot` (or a snapshot that cannot be read, which becomes
/// `garbage`) is a node that did not answer: it fails the fleet.
enum class Answer { snapshot, unreachable, timed_out, crashed, garbage };
/// "snapshot", "unreachable", "timed out", "crashed", "garbage": the words of the reports.
const char* to_string(Answer answer);

/// What came back from one node: the text of its snapshot (`gpudoctor snapshot`), or what was
/// seen of its failure ("exit status 255: ssh: connect to host n09 port 22: No route to host").
/// `origin` is where it came from: the host a launcher reached, or the file it was read from.
struct NodeOutput {
    std::string origin;
    Answer answer = Answer::snapshot;
    std::string text;
    /// The origin is the host a launcher reached: the node keeps that name (the one gpurun and a
    /// hostfile know it by) rather than its snapshot's hostname.
    bool origin_is_host = false;
};

/// One node, judged.
struct NodeResult {
    /// The hostname its snapshot gives; its origin when it gives none, or one another node took
    /// already (containers often share a hostname), or when it did not answer, or when the origin
    /// is the host a launcher reached.
    std::string host;
    Answer answer = Answer::snapshot;
    std::string why; ///< not answered: what was seen
    engine::Facts facts; ///< empty when not answered
    std::vector<engine::Finding> findings; ///< the warnings, failures and errors of check's probes
};

/// One finding (code and severity) and the nodes that have it.
struct FindingGroup {
    std::string code;
    engine::Severity severity = engine::Severity::warn;
    std::string message; ///< as the first of those nodes has it
    std::vector<std::string> hosts;
};

/// A fact that differs between the answering nodes.
struct Drift {
    struct Odd {
        std::string host;
        std::string value;
    };
    std::string fact; ///< "driver", "nccl", "NCCL_P2P_DISABLE", ...
    std::string majority; ///< the value most nodes have (the first node's among equals)
    std::vector<Odd> odd;
};

/// A node whose measurement (check --deep's, in its snapshot) is below the fleet's median times
/// the policy's outlier_fraction: a slow link or GPU that the node's own floors let pass.
struct Outlier {
    std::string metric; ///< "all-reduce busbw", "host→device copy", ...
    std::string host;
    double gbps = 0; ///< the node's (for copies: its slowest GPU's median)
    double median_gbps = 0; ///< the median of every node that has the measurement
};

struct FleetReport {
    std::vector<NodeResult> nodes; ///< in the order given
    std::vector<FindingGroup> groups; ///< failures and errors first, then warnings
    std::vector<Drift> drift;
    std::vector<Outlier> outliers; ///< a warning each: with strict, the node is not fit
    double outlier_fraction = 0;
    bool strict = false;
    /// The all-reduce across node pairs (--deep through a launch), when it ran: the hosts it
    /// numbers, and what the search found (a slow node or link is a warning, as an outlier is).
    std::vector<std::string> pair_hosts;
    std::optional<PairSearch> pairs;
    std::vector<std::pair<std::string, std::string>> pair_failures; ///< host, why its part failed
};

/// The outliers among `nodes` (host and facts): for each measurement that at least two nodes
/// have, those below `fraction` × the median.
std::vector<Outlier> find_outliers(
    const std::vector<std::pair<std::string, const engine::Facts*>>& nodes, double fraction);

/// The value of each fact that should be equal across the nodes of a job, as text ("" for a fact
/// this node's snapshot does not have): versions (driver, CUDA, cuDNN, NCCL, cuBLAS, Python, the
/// frameworks, MPI, kernel), the GPUs (count, model, PCIe link), the InfiniBand ports, the limits,
/// and every NCCL_* variable set (by its name).
std::vector<std::pair<std::string, std::string>> comparable_facts(const engine::Facts& facts);

/// The facts that differ between `nodes` (host and facts), in the order of comparable_facts; a
/// fact missing on a node counts as the value "(none)".
std::vector<Drift> find_drift(const std::vector<std::pair<std::string, const engine::Facts*>>& nodes);

/// Reads and judges every node's snapshot (check's probes and policy; `strict`: warnings fail
/// too), names each node, groups the findings, finds the drift and the outliers
/// (policy.outlier_fraction). A snapshot that cannot be read makes its node `garbage`, with the
/// reason; it does not stop the merge. An origin given twice is base::Error.
FleetReport merge(const std::vector<NodeOutput>& outputs, const std::vector<const engine::Probe*>& probes,
    const engine::Policy& policy, bool strict);

/// The fleet's verdict, for the exit status, --junit and --prometheus: one group per node (its
/// findings, fleet.no_answer when it gave no snapshot, fleet.outlier for each slow measurement,
/// fleet.slow_node when the pair search found it slow beside good nodes), a group "drift"
/// (fleet.drift, info, per odd value) and, when the pairs were measured, a group "pairs"
/// (fleet.slow_link per slow link, fleet.pairs_unresolved per node not told apart); warnings
/// fail with strict.
engine::Verdict verdict(const FleetReport& report);

/// 0 every node answered and is fit, 1 otherwise (the verdict's).
int exit_status(const FleetReport& report);

/// Whether a node is fit: it answered, and nothing in its group of the verdict fails (check's
/// findings, its outliers; warnings too with strict).
bool is_fit(const FleetReport& report, const NodeResult& node);

/// The fit nodes in gpurun's hostfile format ("n01 slots=8", slots from the node's GPU count;
/// the host alone on a node without GPUs), one per line.
std::string healthy_hostfile(const FleetReport& report);

/// {"nodes":[{"host","answer","why","exit_code" (0 fit, 1 not),"findings","facts"}],"groups":[{"code",
/// "severity","message","hosts"}],"drift":[{"fact","majority","odd":[{"host","value"}]}],
/// "outliers":[{"metric","host","gbps","median_gbps"}],"pairs":null or {"threshold_gbps",
/// "rounds":[{"pairs":[[host,host]],"gbps":[...]}],"slow_nodes","slow_links":[[host,host]],
/// "unresolved","failed":[{"host","why"}]},"summary":{"nodes","fit","failed","not_answering","strict"}}
nlohmann::json render_json(const FleetReport& report);

/// The text report: the summary line, the grouped findings, the drift, the outliers, the node
/// pairs, the nodes that did not answer.
std::string render_text(const FleetReport& report, bool color);

} // namespace doctor::fleet
