#pragma once

#include "base/launchers/backends.hpp"
#include "base/topology.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace launcher {

/// The launchers and the host lists gpurun shares with gpudoctor fleet.
namespace launchers = base::launchers;
using launchers::HostSlots;
using launchers::LauncherKind;

/// Which CPUs a rank is bound to: its share of the GPU's NUMA node, of its package, a fixed number
/// of whole cores near the GPU, or no binding.
enum class BindMode { numa, socket, cores, none };

/// `all`: every GPU stays visible and the rank's GPU is CUDA device GPURUN_GPU (== LOCAL_RANK with
/// one rank per GPU), so CUDA IPC between ranks keeps working. `isolate`: CUDA_VISIBLE_DEVICES
/// holds only the rank's GPU.
enum class GpuVisibility { all, isolate };

/// When gpurun reads the ranks' NCCL logs (--nccl-check): never, once the job has ended, or also
/// as soon as every rank has finished NCCL init.
enum class NcclCheckMode { off, end, init };

/// Everything the node plan depends on besides the machine. gpurun and the rank helper both compute
/// the plan from these, so they travel to the helper as arguments.
struct PlanOptions {
    BindMode bind = BindMode::numa;
    unsigned cpus_per_rank = 0; ///< whole cores per rank; 0 = an equal share (1 in cores mode)
    unsigned ranks_per_gpu = 1;
    bool cpu_only = false;
    GpuVisibility visibility = GpuVisibility::all;
    base::MemoryPolicy memory = base::MemoryPolicy::preferred;
    std::string topology_file; ///< "" = this machine
    std::string sysroot = "/";

    friend bool operator==(const PlanOptions&, const PlanOptions&) = default;
};

/// --global-batch B [--speeds LIST]: each rank's share of a global batch, in proportion to its
/// speed, and the loss weight that keeps the gradient an average over all samples. gpurun checks it
/// and the rank helper computes its own rank's share from it, with the same function.
struct BatchOptions {
    unsigned global_batch = 0; ///< 0 = not asked for
    std::vector<double> speeds; ///< relative speed of each global rank, in rank order; empty = equal
    friend bool operator==(const BatchOptions&, const BatchOptions&) = default;
};

/// The profiler that wraps the chosen ranks (--profile).
enum class Profiler { none, nsys };

/// --profile nsys [--profile-ranks LIST] [--profile-dir DIR]: the chosen ranks run under `nsys
/// profile`, each writing DIR/rank<RANK>.nsys-rep and its SQLite export for gpudoctor profile.
/// gpurun and the rank helper both read it: the helper wraps its program when its rank is chosen.
struct ProfileOptions {
    Profiler profiler = Profiler::none;
    std::vector<unsigned> ranks{0}; ///< sorted, unique; empty = every rank. Default: rank 0 only
    std::string dir; ///< "" = ./gpurun-profile-DATE-TIME, made by gpurun
    std::string mpi_impl = "openmpi"; ///< nsys --mpi-impl: "openmpi", or "mpich" under MPICH/Intel MPI's Hydra
    friend bool operator==(const ProfileOptions&, const ProfileOptions&) = default;
};

/// What the monitor does when the job's ranks break one rank per GPU: say so, or also stop the job.
enum class EnforceMode { warn, kill };

/// --monitor[=SECONDS] [--monitor-json FILE] [--enforce warn|kill]: local rank 0's helper on each
/// node starts a monitor that samples the node's job GPUs through NVML and checks that every rank
/// stays on its own GPU; it prints a summary when the ranks exit.
struct MonitorOptions {
    double interval = 0; ///< seconds between samples; 0 = no monitor
    std::string json_file; ///< samples and summary go here ("" = none); %h is the node's short host name
    EnforceMode enforce = EnforceMode::warn;
    friend bool operator==(const MonitorOptions&, const MonitorOptions&) = default;
};

/// Which variables point each rank's communication library at the InfiniBand HCA nearest its GPU:
/// UCX_NET_DEVICES (UCX-based MPI; the default), that and NCCL_IB_HCA, or none. A variable the
/// user set already is never replaced.
enum class NicBinding { ucx, nccl, none };

/// What becomes of each rank's output.
struct OutputOptions {
    bool tag = false; ///< --tag-output: "[rank] " before every line of standard output and error
    std::string log_dir; ///< --log-dir: rank<R>.out and rank<R>.err there, on each rank's host
    friend bool operator==(const OutputOptions&, const OutputOptions&) = default;
};

/// The whole gpurun command line.
struct LaunchOptions {
    PlanOptions plan;
    std::optional<unsigned> np;
    std::string json_summary; ///< --json-summary: how the job ended, written here as JSON
    std::vector<HostSlots> hosts;
    std::string hostfile;
    /// --gpus-per-node N: the ranks of each host whose slots are not given are N times
    /// --ranks-per-gpu, without a look at any topology (a login node plans with it)
    std::optional<unsigned> gpus_per_node;
    bool dry_run = false;
    bool json = false;
    bool report_bindings = false;
    bool allow_run_as_root = false;
    double grace_seconds = 10.0;
    std::string master_addr;
    std::optional<unsigned> master_port;
    std::vector<std::string> exports; ///< -x NAME[=VALUE], passed to the launcher as given
    bool env_all = false; ///< --env-all: pass every variable but those of this host or process
    LauncherKind launcher = LauncherKind::automatic;
    std::vector<std::string> launcher_args; ///< --launcher-args, split into words, passed before the helper
    /// --topology HOST=FILE (with --dry-run): the hosts previewed from their own topology
    std::vector<std::pair<std::string, std::string>> host_topologies;
    bool pack = false; ///< --pack: the fewest hosts that hold the job
    std::vector<HostSlots> free_gpus; ///< --free-gpus h:N,...: free GPUs per host, for --pack
    NicBinding nic_binding = NicBinding::ucx;
    NcclCheckMode nccl_check = NcclCheckMode::off;
    std::string nccl_log_dir; ///< --nccl-log-dir: keep the NCCL logs here; "" = a private directory
    BatchOptions batch;
    ProfileOptions profile;
    MonitorOptions monitor;
    OutputOptions output;
    std::vector<std::string> program; ///< PROGRAM ARGS..., byte-exact
};

const char* to_string(BindMode mode);
const char* to_string(GpuVisibility visibility);
const char* to_string(base::MemoryPolicy policy);
const char* to_string(NcclCheckMode mode);
const char* to_string(Profiler profiler);
const char* to_string(EnforceMode mode);
const char* to_string(NicBinding binding);

} // namespace launcher
