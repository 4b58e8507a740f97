#pragma once

// The launchers gpurun drives (Open MPI's mpirun, Hydra's mpiexec, Slurm's srun): how each is
// found, and the command line that starts the ranks where the plan puts them. One row of table()
// per launcher.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace base::launchers {

/// Which program starts the ranks: Open MPI's mpirun, MPICH or Intel MPI's Hydra mpiexec, or Slurm's
/// srun. `automatic` asks the environment: srun inside a Slurm allocation, else what `mpirun
/// --version` says.
enum class LauncherKind { automatic, openmpi, hydra, srun, local };

/// A host and its slot count as given by -H or a hostfile (nullopt: not given).
struct HostSlots {
    std::string name;
    std::optional<unsigned> slots;
    friend bool operator==(const HostSlots&, const HostSlots&) = default;
};

/// The program that will start the ranks, and why it was chosen.
struct Launcher {
    LauncherKind kind = LauncherKind::openmpi; ///< never automatic
    std::string path; ///< mpirun, mpiexec or srun, as found in PATH
    std::string flavour; ///< "Open MPI", "MPICH", "Intel MPI", "Slurm"
    std::string reason; ///< how it was chosen, for the plan report
};

/// The plugin names in `srun --mpi=list`'s output (Slurm 22.05: "MPI plugin types are...", then
/// one indented name per line: none, pmi2, pmix, cray_shasta).
std::vector<std::string> parse_mpi_plugins(const std::string& output);

/// The libraries an ELF file needs (its dynamic section's DT_NEEDED entries, as `readelf -d`
/// lists them), read from the bytes of its start (the dynamic section and its strings lie in the
/// first loaded segment). Empty for anything else: a script, a static program, a 32-bit or
/// big-endian file, bytes cut before the names.
std::vector<std::string> elf_needed(std::string_view file_start);

/// The srun --mpi plugin an MPI program needs, from the MPI library it needs (elf_needed: a
/// program that only mentions a library's name in its text needs nothing): "pmix" for Open MPI
/// (libmpi.so.40), "pmi2" for MPICH and Intel MPI (libmpi.so.12, libmpich.so); "" for anything
/// else (a script, a program without MPI).
std::string srun_mpi_for(std::string_view program_start);

using Getenv = std::function<const char*(const char*)>;

/// Finds the launcher. An explicit kind is looked up in PATH (openmpi: mpirun, which must be Open
/// MPI; mpich: mpiexec, which must be Hydra, MPICH's or Intel MPI's; srun); `local` is gpurun's
/// own (the rank helper forks the ranks on this node). `automatic` takes srun inside a Slurm
/// allocation (SLURM_JOB_ID set) when srun is in PATH, else asks `mpirun --version` (as horovodrun
/// does): Open MPI, or MPICH/Intel MPI, whose Hydra mpiexec then starts the ranks; with no mpirun in
/// PATH and `this_node_only`, `local`. Throws base::Error saying what was found and what to
/// install or pass.
Launcher find_launcher(LauncherKind requested, const Getenv& getenv, bool this_node_only = false);

/// Whether mpirun must be told --allow-run-as-root: only when the user said so (flag, or both
/// OMPI_ALLOW_RUN_AS_ROOT and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM set to 1). Only Open MPI refuses root.
bool root_allowed(bool flag, const char* allow, const char* confirm);

/// Everything besides the launcher that goes on its command line.
struct LaunchRequest {
    std::vector<HostSlots> hosts; ///< every host, in rank order, with the ranks it runs as its slots
    unsigned ranks = 0; ///< the job's size: the sum of the hosts' slots
    bool hosts_given = false; ///< hosts came from -H, a hostfile or the Slurm allocation (else: this node)
    bool allow_root = false; ///< Open MPI: pass --allow-run-as-root
    /// Variables for every rank, gpurun's own first, then the user's -x: NAME (pass the value the
    /// launcher has) or NAME=VALUE.
    std::vector<std::string> env;
    std::vector<std::string> launcher_args; ///< --launcher-args, before the helper
    std::string env_program = "/usr/bin/env"; ///< srun: sets NAME=VALUE variables (srun exports all)
    std::string helper;
    std::vector<std::string> helper_args;
    double grace_seconds = 10.0; ///< local: between passing a signal on to the ranks and SIGKILL
};

/// The launcher's argv (never run through a shell). Each launcher places the ranks exactly as the
/// plan does, host by host in rank order, with its own binding switched off (the helper binds):
/// - Open MPI: `mpirun -np N --bind-to none --map-by slot -H h1:n1,h2:n2 [--allow-run-as-root]
///   [-x NAME[=VALUE]]... [ARGS] HELPER ...`
/// - Hydra, equal ranks per host: `mpiexec -n N -ppn P -hosts h1,h2 (-bind-to none | -genv I_MPI_PIN 0)
///   [-genv NAME VALUE]... [-genvlist A,B] [ARGS] HELPER ...`; unequal: the same global options, then
///   one `-n n -hosts h HELPER ...` section per host, joined by `:`.
/// - srun: `[env NAME=VALUE...] srun --nodes K --ntasks N --ntasks-per-node P --cpu-bind=none
///   --export=ALL [--nodelist h1,h2] [ARGS] HELPER ...`. srun places the same number of ranks on
///   every node, so unequal hosts are a base::Error with the counts and what to change.
/// - local: `[env NAME=VALUE...] HELPER --launch-local N --grace S -- HELPER ...`: the helper forks
///   the N ranks' helpers on this node (local_launch.hpp); no launcher arguments.
std::vector<std::string> launcher_command(const Launcher& launcher, const LaunchRequest& request);

/// The variables a launcher sets in every process it starts: the process's rank among those on
/// its node and their count, its rank in the job and the job's size.
struct RankVariables {
    const char* launcher; ///< "Open MPI", as messages name it
    const char* local_rank;
    const char* local_size;
    const char* rank;
    const char* size;
};

/// The mark a launcher puts before what a rank wrote (see Backend::tag_option): its length at the
/// start of the text and the rank it names.
struct OutputMark {
    std::size_t length = 0;
    unsigned rank = 0;
};

/// Open MPI's --tag-output mark at the start of `text`: "[JOB,RANK]<stdout>:" (also <stderr> and
/// <stddiag>); nullopt for none.
std::optional<OutputMark> open_mpi_mark(std::string_view text);
/// srun --label's "RANK: " (padded with blanks to the width of the largest rank) at the start of
/// `text`; nullopt for none.
std::optional<OutputMark> label_mark(std::string_view text);
/// Hydra -prepend-rank's "[RANK] " (gpurun --tag-output writes the same) at the start of `text`;
/// nullopt for none.
std::optional<OutputMark> bracket_mark(std::string_view text);

/// One launcher gpurun drives: the row of the table that every launcher-specific choice reads.
/// A new backend is a row here, its command builder and find_launcher's lookup.
struct Backend {
    LauncherKind kind;
    const char* word; ///< --launcher WORD
    const char* program; ///< what is looked for in PATH
    const char* title; ///< for the plan report; "{}" is the MPI's flavour
    const char* default_flavour; ///< the flavour said when it is not known
    const char* nsys_mpi_impl; ///< nsys profile --mpi-impl for its ranks; nullptr: nsys's default (openmpi)
    bool refuses_root; ///< runs as root only with --allow-run-as-root
    /// Stops the other ranks itself when one fails (mpirun; srun, given --kill-on-bad-exit; gpurun's
    /// own). For one that does not (Hydra waits for every rank), gpurun sends it SIGTERM.
    bool stops_on_failure;
    /// What gpurun passes on for SIGINT and SIGHUP; 0: the signal itself. srun answers one SIGINT
    /// with the tasks' status and lets the step run on, but passes SIGTERM to every task.
    int interrupt_as;
    /// Its option that marks each line it relays with the rank that wrote it (Open MPI's marks
    /// every piece it relays, so a long line cut in two is still told apart); nullptr: none.
    const char* tag_option;
    /// Reads the mark tag_option puts on what it relays; nullptr: none.
    std::optional<OutputMark> (*mark)(std::string_view text);
    /// Whether the mark comes before every piece the launcher relays, anywhere in a line (Open
    /// MPI's), rather than at the start of each whole line.
    bool marks_pieces;
    /// What it tells each rank (its rank helper reads them: rank_context.cpp).
    RankVariables variables;
    std::vector<std::string> (*command)(const Launcher& launcher, const LaunchRequest& request);
};

/// The backends, in --launcher's order.
const std::vector<Backend>& table();

/// The variables of every launcher a rank may run under, in the order the rank helper asks for
/// them: the backends' (gpurun's own first: it runs inside allocations whose SLURM_* its ranks
/// inherit), then the launchers gpurun does not drive but runs under (MVAPICH2, Cray PALS and
/// PMI, torchrun's names), Slurm's last but torchrun's.
const std::vector<RankVariables>& rank_variables();

/// The row of `kind`; `automatic` has none (base::Error).
const Backend& row(LauncherKind kind);

/// "Open MPI mpirun", "MPICH mpiexec (Hydra)", "Slurm srun".
std::string launcher_title(const Launcher& launcher);

} // namespace base::launchers
