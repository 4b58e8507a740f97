#pragma once

// gpudoctor fleet across the nodes of a job: gpurun starts one `gpudoctor fleet --answer-as-node`
// on every node through its launchers (Open MPI's mpirun, Hydra, srun, or its own on this node),
// each node's answer comes back framed (answers.hpp) through the launcher's output, and the merge
// judges them here. No launcher of its own, no ssh, no shared file system.

#include "base/nccl_allreduce.hpp"
#include "doctor/fleet/answers.hpp"
#include "doctor/fleet/pairs.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::fleet {

/// The option that makes `gpudoctor fleet` a node's side of the launch (not for users).
inline constexpr const char* node_side_option = "--answer-as-node";

/// The nodes to check: `-H LIST` (gpurun's syntax, Slurm ranges too; slots are ignored), else
/// `--hostfile FILE`, else the Slurm allocation's (SLURM_JOB_NODELIST); empty when none is
/// given. Throws base::Error for a bad list or file, and for both -H and --hostfile.
std::vector<std::string> fleet_hosts(
    const std::string& host_list, const std::string& hostfile, const std::function<const char*(const char*)>& getenv);

struct FleetLaunch {
    std::vector<std::string> hosts;
    std::string gpurun; ///< the gpurun program
    std::string gpudoctor; ///< this gpudoctor, as every node finds it (an absolute path)
    std::string launcher; ///< gpurun's --launcher word; "" or "auto": chosen as gpurun chooses
    std::string launcher_args; ///< the user's --launcher-args
    double deadline_seconds = 60; ///< each node's check
    /// How much longer than the deadline the launch may take before it is stopped: the launcher's
    /// start-up on every node and the answers' way back.
    double launch_margin_seconds = 60;
    std::vector<std::string> node_args; ///< the snapshot's options for every node (--deep, --only, ...)
};

/// The --launcher word gpurun will use for `word` ("" or "auto": found as gpurun finds it, from
/// the environment and PATH). Throws base::Error for an unknown word or no launcher found.
std::string resolve_launcher(const std::string& word, const std::function<const char*(const char*)>& getenv);

/// gpurun's argv: one rank on every host, no binding and no GPU of its own (the check sees the whole
/// node), each rank running this gpudoctor's node side with the deadline and `node_args`; the
/// launcher (`options.launcher`, resolved) told to mark its output with the writer's rank.
std::vector<std::string> gpurun_command(const FleetLaunch& options);

/// Runs gpurun (`options.launcher` resolved already, resolve_launcher: once for the snapshots
/// and every pair round), passing SIGINT, SIGTERM and SIGHUP on to it, and stops it (SIGTERM, then SIGKILL)
/// when the deadline and the margin have passed. Returns every host's answer, in the order of the
/// hosts; `signal` (when not null) is set to the signal passed on, 0 for none. Throws base::Error
/// with gpurun's own message when it refused the launch (exit status 2, no answer at all): a bad
/// --launcher-args, no launcher found.
std::vector<NodeOutput> launch(const FleetLaunch& options, int* signal = nullptr);

/// The node pairs' all-reduce across nodes: the hosts of one round, in pair order (ranks 0 and
/// 1 are a pair, 2 and 3, ...), and where each pair meets: its even rank's host, port
/// `base_port` + rank / 2.
struct PairLaunch {
    std::vector<std::string> hosts;
    int base_port = default_pair_port;
    base::AllReduceSettings settings;
    std::chrono::milliseconds timeout{60000}; ///< to meet the other node
    static constexpr int default_pair_port = 29600;
};

/// The hosts of a round as --pair-hosts gives them to each node ("h1,h2,..."), split as every
/// host list is (base::launchers::split_node_list).
std::vector<std::string> pair_hosts(std::string_view list);

/// The node's side of a pair round, as rank `rank`: every GPU of this node joins one NCCL
/// communicator with every GPU of the other node of its pair (the even rank makes the id and
/// sends it with its GPU count; the odd one answers with its count), and the all-reduce is
/// timed. Returns {"busbw_gbps","algbw_gbps","gpus","ranks","peer"} as compact JSON. Throws
/// base::Error (no CUDA or NCCL, the other node not met, an NCCL call failed).
std::string measure_pair(unsigned rank, const PairLaunch& round);

/// A node whose part of a pair's all-reduce failed, and why.
struct PairFailure {
    std::string host;
    std::string why; ///< "crashed: the check failed (exit status 3): waiting for the peer on port 29600: ..."
};

/// Rounds of pair all-reduces across `hosts` (search_pairs chooses the pairs), each round one
/// launch through gpurun as `options` says, each pair's bus bandwidth the lower of its two
/// ranks' (-1 when either did not answer, which is added to `failures`). `fraction`: the
/// policy's outlier_fraction.
PairSearch search_node_pairs(const FleetLaunch& options, const std::vector<std::string>& hosts, double fraction,
    const PairLaunch& settings, std::vector<PairFailure>& failures);

/// The node's side: runs `snapshot` (the snapshot document, or a pair's measurement, as compact
/// JSON) in a child with `deadline_seconds`, and writes its answer as frames of rank $RANK
/// (gpurun's) to standard output: the snapshot, "timed out" or "crashed" with why. Returns 0 whatever the answer, so
/// the launcher does not stop the other nodes' checks; 3 when the answer could not be written.
int answer_as_node(const std::function<std::string(unsigned rank)>& answer, double deadline_seconds);

} // namespace doctor::fleet
