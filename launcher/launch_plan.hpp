#pragma once

// From gpurun's options and what it knows of the machines to the exact launch: the hosts, each
// rank's binding, what every rank's helper is given, the launcher's argv and the notes. Pure but
// for what PlanContext hands in, so tests plan any job without a machine of that shape.

#include "base/batch_split.hpp"
#include "base/gpu_inventory.hpp"
#include "base/launchers/backends.hpp"
#include "launcher/binding_plan.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/master_address.hpp"
#include "launcher/pack.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace launcher {

/// What planning reads from outside gpurun's options. run_gpurun fills it from this machine.
struct PlanContext {
    std::function<const char*(const char*)> env; ///< the environment gpurun runs in
    std::vector<std::string> variables; ///< the names of the variables set in gpurun's environment
    base::NodeLayout layout; ///< this node's topology
    base::GpuInventory inventory; ///< this node's GPUs (none with --cpu-only)
    std::map<std::string, NodeSpec> host_specs; ///< --topology HOST=FILE: those hosts' own
    launchers::Launcher launcher; ///< what starts the ranks
    /// srun: the --mpi plugins `srun --mpi=list` offers (empty: not known)
    std::vector<std::string> srun_mpi_plugins;
    /// The first bytes of the program's file (nullopt: not found or not readable), to tell the MPI
    /// it is linked with.
    std::function<std::optional<std::string>(const std::string& program)> program_start;
    std::vector<std::string> launcher_notes; ///< --dry-run without the launcher installed: why
    bool allow_root = false; ///< Open MPI: pass --allow-run-as-root
    AddressLookup lookup; ///< for MASTER_ADDR
    std::function<unsigned()> free_port; ///< a port free on this node, for a job on this node alone
    std::string helper_path; ///< the gpurun-rank program
    std::string env_program = "/usr/bin/env";
    /// --nccl-check: the directory the ranks' logs go to, made for a real run (given the job's
    /// size), or where it would be for --dry-run.
    std::function<std::string(unsigned ranks)> nccl_dir;
};

/// The launch, ready to run or to show.
struct LaunchPlan {
    JobPlan job;
    std::optional<base::BatchSplit> batch; ///< --global-batch: each rank's share
    std::vector<LeftOutHost> left_out; ///< --pack: the hosts not used
    HelperOptions helper; ///< what each rank's helper is given
    std::vector<std::string> command; ///< the launcher's argv
    std::vector<std::string> notes; ///< launcher, inventory, plan, host, profile and variable notes, in that order
    bool this_node_only = true; ///< no hosts, or only names of this node
    std::vector<std::string> passed; ///< the variables of gpurun's environment the launcher passes to every rank
    /// The plan of this node's ranks when gpurun made it from this node's own live topology: what
    /// their helpers would make themselves, handed to them (node_handoff.hpp). nullopt otherwise.
    std::optional<NodePlan> this_node;
};

/// The variables of gpurun's environment (`names`) that the ranks on every host get: PATH,
/// LD_LIBRARY_PATH, and those a training job depends on, by prefix (NCCL_, UCX_, CUDA_ but
/// CUDA_VISIBLE_DEVICES, PYTHON, TORCH, HF_, OMP_, GPUKIT_); with `all`, every one but those that
/// describe this host or this process (HOSTNAME, PWD, SSH_*, SLURM_*, OMPI_*, PMI_*, ...). In the
/// order of `names`.
std::vector<std::string> passed_variables(const std::vector<std::string>& names, bool all);

/// Where the job's hosts came from.
struct HostSource {
    bool given = false; ///< by the user (-H, --hostfile) or a Slurm allocation
    std::vector<std::string> notes; ///< how the allocation's ranks per node were counted
};

/// The hosts of the job: -H or --hostfile, else inside a Slurm allocation its nodes and their
/// ranks (slurm_allocation); --gpus-per-node gives the ranks of each host without slots (of every
/// node in an allocation, at most Slurm's GPUs). Checks that each --topology HOST=FILE names one of
/// the hosts. Throws base::Error.
HostSource resolve_hosts(LaunchOptions& options, const std::function<const char*(const char*)>& env);

/// The plan. `options` are completed as the report shows them (packed hosts, the monitor's file
/// made absolute, nsys's MPI flavour). Throws base::Error for a job that cannot be planned (no
/// GPUs, a bad MASTER_PORT, a program that is not there for a real run, ...).
LaunchPlan plan_launch(LaunchOptions& options, const HostSource& hosts, const PlanContext& context);

} // namespace launcher
