#pragma once

// One rank per GPU, checked while the job runs: what each rank's helper recorded (pid -> GPU)
// against the processes NVML lists on each GPU.

#include "base/cpu_set.hpp"
#include "base/pci_address.hpp"
#include "base/sysroot.hpp"
#include "base/usage/summary.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// What a rank's helper writes before it execs the program (the program keeps the pid).
struct RankRecord {
    unsigned rank = 0;
    unsigned local_rank = 0;
    unsigned pid = 0;
    unsigned long long start_time = 0; ///< /proc/<pid>/stat field 22: tells a reused pid apart
    base::PciAddress gpu; ///< the GPU the plan gave it
    friend bool operator==(const RankRecord&, const RankRecord&) = default;
};

/// The compute processes NVML lists on one GPU of the node.
struct GpuProcessList {
    base::usage::MonitoredGpu gpu;
    bool job_gpu = false; ///< one of the GPUs the plan gave this node's ranks
    std::vector<unsigned> pids;
};

/// What /proc says about a process.
struct ProcessInfo {
    unsigned ppid = 0;
    char state = '?';
    unsigned long long start_time = 0;
    std::string name; ///< /proc/<pid>/comm
};

/// A process of this pid namespace by pid; nullopt when there is none.
using ProcessLookup = std::function<std::optional<ProcessInfo>(unsigned pid)>;

/// Reads /proc/<pid>/stat and comm under `sysroot`.
ProcessLookup proc_lookup(const base::Sysroot& sysroot);

/// Whether the recorded rank still runs: its pid exists, is not a zombie and started when it did
/// (when the record knows; 0 = unknown).
bool rank_alive(const RankRecord& rank, const ProcessLookup& lookup);

enum class OwnershipIssueKind {
    wrong_gpu, ///< ranks' processes on a GPU that is not theirs (two ranks on one GPU, or a rank on another's)
    crowded, ///< counts only: more processes on a job GPU than ranks given it
    foreign, ///< processes of no rank on the job's GPUs
};

struct OwnershipIssue {
    OwnershipIssueKind kind = OwnershipIssueKind::wrong_gpu;
    base::usage::MonitoredGpu gpu;
    std::vector<unsigned> ranks; ///< wrong_gpu: every rank with a process on `gpu`
    std::vector<unsigned> pids; ///< foreign: theirs; crowded: all on `gpu`
    /// The job's own ranks break one rank per GPU: what --enforce=kill stops the job for. A foreign
    /// process is not: stopping this job would not free its GPU.
    bool job_fault = false;
    std::string message;
};

struct OwnershipCheck {
    /// NVML listed processes on the job's GPUs, none of them the job's and some unknown here: the
    /// pids are probably a container's host's (NVML does not see PID namespaces).
    bool looks_like_container = false;
    bool counts_only = false; ///< judged by counts per GPU (the caller said so)
    unsigned job_processes = 0; ///< NVML processes that are ranks or their descendants
    unsigned processes_on_job_gpus = 0;
    std::vector<OwnershipIssue> issues;
};

/// Judges one reading of NVML's process lists (every GPU of the node, the job's marked). A process
/// belongs to a rank when it is the rank or one of its descendants (a DataLoader worker that opened
/// CUDA), by the ppid chain `lookup` gives. With `counts_only` (the caller saw looks_like_container
/// before), pids are not matched: a job GPU with more processes than ranks given it is `crowded`.
/// Pure: everything it knows of processes comes through `lookup`.
OwnershipCheck check_ownership(const std::vector<RankRecord>& ranks, const std::vector<GpuProcessList>& lists,
    const ProcessLookup& lookup, bool counts_only);

/// The one line that says the check has fallen back to counts, with the number of processes seen.
std::string counts_only_notice(unsigned processes_on_job_gpus);

} // namespace launcher
