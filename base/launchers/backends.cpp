#include "base/launchers/backends.hpp"

#include "base/error.hpp"
#include "base/mpi_flavour.hpp"
#include "base/process.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>
#include <optional>

namespace base::launchers {

namespace {

using base::Error;

constexpr auto version_timeout = std::chrono::seconds(10);

bool is_set(const char* value)
{
    return value != nullptr && *value != '\0';
}

// What `PROGRAM --version` says it is; a program whose real file name says it is Open MPI is not
// asked (orterun/prterun answer slowly on some systems).
std::string flavour_of(const std::string& path, bool& timed_out)
{
    std::error_code ec;
    const std::string real = std::filesystem::canonical(path, ec).filename().string();
    if (!ec && (real == "orterun" || real == "prterun" || real == "mpirun.openmpi" || real == "mpiexec.openmpi")) {
        return "Open MPI";
    }
    if (!ec && (real == "mpiexec.hydra" || real == "mpirun.mpich" || real == "mpiexec.mpich")) {
        return "MPICH";
    }
    auto result = base::run_command({path, "--version"}, version_timeout);
    timed_out = result.timed_out;
    return base::mpi_flavour(result.output);
}

std::string unknown_or(const std::string& flavour)
{
    return flavour == "unknown" ? "an unknown MPI" : flavour;
}

// An MPI launcher program, what it must say it is, and what to tell a user who lacks it.
struct MpiProgram {
    LauncherKind kind;
    const char* program;
    std::vector<std::string> flavours; ///< accepted answers of flavour_of
    const char* missing; ///< the advice when it is not in PATH
    const char* wanted; ///< "Open MPI", for "X is MPICH, not Open MPI"
    const char* instead; ///< the advice when it is another MPI
};

const MpiProgram open_mpi{LauncherKind::openmpi, "mpirun", {"Open MPI"},
    "install Open MPI (apt-get install openmpi-bin) or add its bin directory to PATH", "Open MPI",
    "put Open MPI's bin directory first in PATH, or pass --launcher mpich for MPICH or Intel MPI"};
const MpiProgram hydra{LauncherKind::hydra, "mpiexec", {"MPICH", "Intel MPI"},
    "install MPICH (apt-get install mpich) or load Intel MPI's environment (source setvars.sh)",
    "MPICH's or Intel MPI's Hydra", "put their bin directory first in PATH, or pass --launcher openmpi"};

Launcher find_mpi(const MpiProgram& mpi, const Getenv& getenv, const std::string& reason)
{
    auto path = base::find_executable(mpi.program, getenv("PATH"));
    if (!path) {
        throw Error(fmt::format("{} not found in PATH; {}", mpi.program, mpi.missing));
    }
    bool timed_out = false;
    const std::string flavour = flavour_of(*path, timed_out);
    if (std::find(mpi.flavours.begin(), mpi.flavours.end(), flavour) == mpi.flavours.end()) {
        throw Error(fmt::format("{} is {}, not {}{}; {}", *path, unknown_or(flavour), mpi.wanted,
            timed_out ? fmt::format(" ({} --version did not answer in 10 s)", mpi.program) : "", mpi.instead));
    }
    return Launcher{mpi.kind, *path, flavour, reason};
}

Launcher find_srun(const Getenv& getenv, const std::string& reason)
{
    auto path = base::find_executable("srun", getenv("PATH"));
    if (!path) {
        throw Error("srun not found in PATH; run gpurun on a Slurm node, or pass --launcher openmpi or mpich");
    }
    return Launcher{LauncherKind::srun, *path, "Slurm", reason};
}

std::vector<std::string> split_env(const std::string& entry)
{
    auto eq = entry.find('=');
    if (eq == std::string::npos) {
        return {entry};
    }
    return {entry.substr(0, eq), entry.substr(eq + 1)};
}

bool equal_hosts(const LaunchRequest& job)
{
    for (const auto& h : job.hosts) {
        if (h.slots != job.hosts.front().slots) {
            return false;
        }
    }
    return true;
}

std::string host_names(const LaunchRequest& job)
{
    std::string out;
    for (const auto& h : job.hosts) {
        out += (out.empty() ? "" : ",") + h.name;
    }
    return out;
}

// The launcher's argv[0]: the bare name PATH found it by, run through the same PATH (execvp), as the
// user's shell runs `mpirun`. Open MPI takes an absolute argv[0] for --prefix: /bin/mpirun (on a
// merged /usr, /bin before /usr/bin in PATH) gives the prefix "/", and mpirun aborts ("A prefix was
// supplied to mpirun that only contained slashes").
std::string program_word(const Launcher& launcher)
{
    return std::filesystem::path(launcher.path).filename().string();
}

std::vector<std::string> openmpi_command(const Launcher& launcher, const LaunchRequest& r)
{
    const LaunchRequest& job = r;
    std::vector<std::string> argv{
        program_word(launcher), "-np", std::to_string(job.ranks), "--bind-to", "none", "--map-by", "slot"};
    std::string hosts;
    for (const auto& h : job.hosts) {
        hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", h.name, h.slots.value_or(1));
    }
    argv.insert(argv.end(), {"-H", hosts});
    if (r.allow_root) {
        argv.emplace_back("--allow-run-as-root");
    }
    for (const auto& e : r.env) {
        argv.insert(argv.end(), {"-x", e});
    }
    argv.insert(argv.end(), r.launcher_args.begin(), r.launcher_args.end());
    argv.push_back(r.helper);
    argv.insert(argv.end(), r.helper_args.begin(), r.helper_args.end());
    return argv;
}

std::vector<std::string> hydra_command(const Launcher& launcher, const LaunchRequest& r)
{
    const LaunchRequest& job = r;
    std::vector<std::string> globals;
    if (launcher.flavour == "Intel MPI") {
        // Intel MPI pins each process inside MPI_Init, after the helper bound it: switch that off.
        globals.insert(globals.end(), {"-genv", "I_MPI_PIN", "0"});
    } else {
        globals.insert(globals.end(), {"-bind-to", "none"});
    }
    std::string names;
    for (const auto& e : r.env) {
        auto parts = split_env(e);
        if (parts.size() == 2) {
            globals.insert(globals.end(), {"-genv", parts[0], parts[1]});
        } else {
            names += (names.empty() ? "" : ",") + parts[0];
        }
    }
    if (!names.empty()) {
        globals.insert(globals.end(), {"-genvlist", names});
    }
    globals.insert(globals.end(), r.launcher_args.begin(), r.launcher_args.end());

    std::vector<std::string> argv{program_word(launcher)};
    if (equal_hosts(job)) {
        argv.insert(argv.end(),
            {"-n", std::to_string(job.ranks), "-ppn", std::to_string(job.hosts.front().slots.value_or(1)), "-hosts",
                host_names(job)});
        argv.insert(argv.end(), globals.begin(), globals.end());
        argv.push_back(r.helper);
        argv.insert(argv.end(), r.helper_args.begin(), r.helper_args.end());
        return argv;
    }
    // One MPMD section per host: ranks are numbered section by section, so in the plan's order.
    argv.insert(argv.end(), globals.begin(), globals.end());
    for (std::size_t i = 0; i < job.hosts.size(); ++i) {
        if (i > 0) {
            argv.emplace_back(":");
        }
        argv.insert(argv.end(), {"-n", std::to_string(job.hosts[i].slots.value_or(1)), "-hosts", job.hosts[i].name});
        argv.push_back(r.helper);
        argv.insert(argv.end(), r.helper_args.begin(), r.helper_args.end());
    }
    return argv;
}

/// `env NAME=VALUE...` for the variables with a value, for a launcher that passes its whole
/// environment on (srun --export=ALL, the local one): a name alone is already there. Empty when
/// there are none.
std::vector<std::string> values_set_by_env(const LaunchRequest& r)
{
    std::vector<std::string> argv;
    for (const auto& e : r.env) {
        if (e.find('=') != std::string::npos) {
            if (argv.empty()) {
                argv.push_back(r.env_program);
            }
            argv.push_back(e);
        }
    }
    return argv;
}

std::vector<std::string> local_command(const Launcher& /*launcher*/, const LaunchRequest& r)
{
    if (!r.launcher_args.empty()) {
        throw Error("--launcher-args: the local launcher takes none (it is gpurun's own)");
    }
    std::vector<std::string> argv = values_set_by_env(r);
    argv.insert(argv.end(),
        {r.helper, "--launch-local", std::to_string(r.ranks), "--grace", fmt::format("{}", r.grace_seconds), "--",
            r.helper});
    argv.insert(argv.end(), r.helper_args.begin(), r.helper_args.end());
    return argv;
}

std::vector<std::string> srun_command(const Launcher& launcher, const LaunchRequest& r)
{
    const LaunchRequest& job = r;
    if (!equal_hosts(job)) {
        std::string counts;
        for (const auto& h : job.hosts) {
            counts += fmt::format("{}{}:{}", counts.empty() ? "" : ",", h.name, h.slots.value_or(1));
        }
        throw Error(fmt::format("srun places the same number of ranks on every node, and this plan has {}; give "
                                "-np a multiple of the ranks per node, equal slots (-H h1:N,h2:N), or pass "
                                "--launcher openmpi",
            counts));
    }
    std::vector<std::string> argv = values_set_by_env(r);
    argv.insert(argv.end(),
        {program_word(launcher), "--nodes", std::to_string(job.hosts.size()), "--ntasks", std::to_string(job.ranks),
            "--ntasks-per-node", std::to_string(job.hosts.front().slots.value_or(1)), "--cpu-bind=none", "--export=ALL",
            "--kill-on-bad-exit=1"});
    if (r.hosts_given) {
        argv.insert(argv.end(), {"--nodelist", host_names(job)});
    }
    argv.insert(argv.end(), r.launcher_args.begin(), r.launcher_args.end());
    argv.push_back(r.helper);
    argv.insert(argv.end(), r.helper_args.begin(), r.helper_args.end());
    return argv;
}

} // namespace

std::vector<std::string> parse_mpi_plugins(const std::string& output)
{
    std::vector<std::string> plugins;
    std::size_t at = 0;
    while (at < output.size()) {
        const std::size_t end = std::min(output.find('\n', at), output.size());
        const std::string_view line = std::string_view(output).substr(at, end - at);
        at = end + 1;
        if (line.empty() || (line.front() != '\t' && line.front() != ' ')) {
            continue;
        }
        const std::size_t first = line.find_first_not_of(" \t");
        const std::string_view name = line.substr(first == std::string_view::npos ? line.size() : first);
        if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
            })) {
            plugins.emplace_back(name);
        }
    }
    return plugins;
}

namespace {

/// A little-endian unsigned integer of `size` bytes at `at`, or nullopt past the end.
std::optional<std::uint64_t> le(std::string_view bytes, std::uint64_t at, unsigned size)
{
    if (at > bytes.size() || bytes.size() - at < size) {
        return std::nullopt;
    }
    std::uint64_t value = 0;
    for (unsigned i = size; i-- > 0;) {
        value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
    }
    return value;
}

} // namespace

std::vector<std::string> elf_needed(std::string_view file)
{
    constexpr unsigned pt_load = 1;
    constexpr unsigned pt_dynamic = 2;
    constexpr std::uint64_t dt_needed = 1;
    constexpr std::uint64_t dt_strtab = 5;
    // ELF64 (class 2), little-endian (data 1).
    if (file.size() < 64 ||
        file.substr(0, 4) !=
            "\x7f"
            "ELF" ||
        file[4] != 2 || file[5] != 1) {
        return {};
    }
    const std::uint64_t phoff = *le(file, 0x20, 8);
    const std::uint64_t phentsize = *le(file, 0x36, 2);
    const std::uint64_t phnum = *le(file, 0x38, 2);
    struct Segment {
        std::uint64_t offset, vaddr, filesz;
    };
    std::vector<Segment> loads;
    std::optional<Segment> dynamic;
    for (std::uint64_t i = 0; i < phnum && phentsize >= 56; ++i) {
        const std::uint64_t at = phoff + i * phentsize;
        const auto type = le(file, at, 4);
        const auto offset = le(file, at + 8, 8);
        const auto vaddr = le(file, at + 16, 8);
        const auto filesz = le(file, at + 32, 8);
        if (!type || !offset || !vaddr || !filesz) {
            return {};
        }
        if (*type == pt_load) {
            loads.push_back({*offset, *vaddr, *filesz});
        } else if (*type == pt_dynamic) {
            dynamic = Segment{*offset, *vaddr, *filesz};
        }
    }
    if (!dynamic) {
        return {};
    }
    std::vector<std::uint64_t> names;
    std::optional<std::uint64_t> strtab;
    for (std::uint64_t at = dynamic->offset; at + 16 <= dynamic->offset + dynamic->filesz; at += 16) {
        const auto tag = le(file, at, 8);
        const auto value = le(file, at + 8, 8);
        if (!tag || !value || *tag == 0) { // DT_NULL ends the table
            break;
        }
        if (*tag == dt_needed) {
            names.push_back(*value);
        } else if (*tag == dt_strtab) {
            strtab = *value;
        }
    }
    // DT_STRTAB is an address: the loaded segment that holds it tells where it is in the file.
    std::optional<std::uint64_t> strings;
    for (const auto& s : loads) {
        if (strtab && *strtab >= s.vaddr && *strtab - s.vaddr < s.filesz) {
            strings = s.offset + (*strtab - s.vaddr);
        }
    }
    std::vector<std::string> out;
    for (std::uint64_t name : names) {
        if (!strings || *strings + name >= file.size()) {
            return {};
        }
        const std::string_view rest = file.substr(*strings + name);
        const std::size_t end = rest.find('\0');
        if (end == std::string_view::npos) {
            return {};
        }
        out.emplace_back(rest.substr(0, end));
    }
    return out;
}

std::string srun_mpi_for(std::string_view program_start)
{
    for (const auto& library : elf_needed(program_start)) {
        if (library == "libmpi.so.40") {
            return "pmix";
        }
        if (library == "libmpi.so.12" || library.rfind("libmpich.so", 0) == 0) {
            return "pmi2";
        }
    }
    return "";
}

Launcher find_launcher(LauncherKind requested, const Getenv& getenv, bool this_node_only)
{
    switch (requested) {
    case LauncherKind::local:
        return Launcher{LauncherKind::local, "", "", "--launcher local"};
    case LauncherKind::openmpi:
        return find_mpi(open_mpi, getenv, "--launcher openmpi");
    case LauncherKind::hydra:
        return find_mpi(hydra, getenv, "--launcher mpich");
    case LauncherKind::srun:
        return find_srun(getenv, "--launcher srun");
    case LauncherKind::automatic:
        break;
    }
    if (is_set(getenv("SLURM_JOB_ID")) && base::find_executable("srun", getenv("PATH"))) {
        return find_srun(getenv, fmt::format("inside Slurm job {}", getenv("SLURM_JOB_ID")));
    }
    auto mpirun = base::find_executable("mpirun", getenv("PATH"));
    if (!mpirun && this_node_only) {
        return Launcher{LauncherKind::local, "", "", "no mpirun in PATH, and every rank is on this node"};
    }
    if (!mpirun) {
        throw Error("mpirun not found in PATH; install Open MPI (apt-get install openmpi-bin), or pass --launcher "
                    "mpich or srun");
    }
    bool timed_out = false;
    const std::string flavour = flavour_of(*mpirun, timed_out);
    if (flavour == "Open MPI") {
        return Launcher{LauncherKind::openmpi, *mpirun, flavour, "mpirun is Open MPI"};
    }
    if (flavour == "MPICH" || flavour == "Intel MPI") {
        return find_mpi(hydra, getenv, fmt::format("mpirun is {}", flavour));
    }
    throw Error(fmt::format("{} is {}{}; gpurun drives Open MPI, MPICH, Intel MPI and srun: put one of them first in "
                            "PATH, or pass --launcher",
        *mpirun, unknown_or(flavour), timed_out ? " (mpirun --version did not answer in 10 s)" : ""));
}

bool root_allowed(bool flag, const char* allow, const char* confirm)
{
    auto one = [](const char* v) { return v != nullptr && std::string(v) == "1"; };
    return flag || (one(allow) && one(confirm));
}

const std::vector<Backend>& table()
{
    static const std::vector<Backend> table = {
        {.kind = LauncherKind::openmpi,
            .word = "openmpi",
            .program = "mpirun",
            .title = "Open MPI mpirun",
            .default_flavour = "Open MPI",
            .nsys_mpi_impl = nullptr,
            .refuses_root = true,
            .stops_on_failure = true,
            .interrupt_as = 0,
            .tag_option = "--tag-output",
            .mark = open_mpi_mark,
            .marks_pieces = true,
            .variables = {"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
            .command = openmpi_command},
        {.kind = LauncherKind::hydra,
            .word = "mpich",
            .program = "mpiexec",
            .title = "{} mpiexec (Hydra)",
            .default_flavour = "MPICH or Intel MPI",
            .nsys_mpi_impl = "mpich",
            .refuses_root = false,
            .stops_on_failure = false,
            .interrupt_as = 0,
            .tag_option = "-prepend-rank",
            .mark = bracket_mark,
            .marks_pieces = false,
            .variables = {"MPICH/Intel MPI (Hydra)", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_SIZE"},
            .command = hydra_command},
        {.kind = LauncherKind::srun,
            .word = "srun",
            .program = "srun",
            .title = "Slurm srun",
            .default_flavour = "Slurm",
            .nsys_mpi_impl = nullptr,
            .refuses_root = false,
            .stops_on_failure = true,
            .interrupt_as = SIGTERM,
            .tag_option = "--label",
            .mark = label_mark,
            .marks_pieces = false,
            .variables = {"Slurm", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_PROCID", "SLURM_NTASKS"},
            .command = srun_command},
        {.kind = LauncherKind::local,
            .word = "local",
            .program = "gpurun-rank",
            .title = "gpurun's own (no MPI)",
            .default_flavour = "",
            .nsys_mpi_impl = nullptr,
            .refuses_root = false,
            .stops_on_failure = true,
            .interrupt_as = 0,
            .tag_option = nullptr,
            .mark = nullptr,
            .marks_pieces = false,
            .variables = {"gpurun local", "GPURUN_LAUNCH_LOCAL_RANK", "GPURUN_LAUNCH_LOCAL_SIZE", "GPURUN_LAUNCH_RANK",
                "GPURUN_LAUNCH_SIZE"},
            .command = local_command},
    };
    return table;
}

const std::vector<RankVariables>& rank_variables()
{
    static const std::vector<RankVariables> table = {
        row(LauncherKind::local).variables,
        row(LauncherKind::openmpi).variables,
        row(LauncherKind::hydra).variables,
        {"MVAPICH2", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_RANK",
            "MV2_COMM_WORLD_SIZE"},
        {"Cray PALS", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "PALS_RANKID", "PMI_SIZE"},
        {"Cray PMI", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE"},
        row(LauncherKind::srun).variables,
        {"torchrun-style", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE"},
    };
    return table;
}

std::optional<OutputMark> open_mpi_mark(std::string_view text)
{
    if (text.empty() || text.front() != '[') {
        return std::nullopt;
    }
    std::size_t i = 1;
    unsigned rank = 0;
    for (int part = 0; part < 2; ++part) {
        const std::size_t digits = i;
        while (i < text.size() && i - digits < 10 && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        if (i == digits || i >= text.size() || text[i] != (part == 0 ? ',' : ']')) {
            return std::nullopt;
        }
        if (part == 1 && std::from_chars(text.data() + digits, text.data() + i, rank).ptr != text.data() + i) {
            return std::nullopt;
        }
        ++i;
    }
    for (std::string_view stream : {"<stdout>:", "<stderr>:", "<stddiag>:"}) {
        if (text.substr(i, stream.size()) == stream) {
            return OutputMark{i + stream.size(), rank};
        }
    }
    return std::nullopt;
}

namespace {

/// A rank and the two characters after it ("] " or ": ") from `at` in `text`.
std::optional<OutputMark> rank_then(std::string_view text, std::size_t at, std::string_view closing)
{
    unsigned rank = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), rank);
    const std::size_t after = static_cast<std::size_t>(end - text.data());
    if (ec != std::errc() || after == at || text.substr(after, closing.size()) != closing) {
        return std::nullopt;
    }
    return OutputMark{after + closing.size(), rank};
}

} // namespace

std::optional<OutputMark> label_mark(std::string_view text)
{
    const std::size_t at = std::min(text.find_first_not_of(' '), text.size());
    return rank_then(text, at, ": ");
}

std::optional<OutputMark> bracket_mark(std::string_view text)
{
    if (text.empty() || text.front() != '[') {
        return std::nullopt;
    }
    return rank_then(text, 1, "] ");
}

const Backend& row(LauncherKind kind)
{
    for (const auto& b : table()) {
        if (b.kind == kind) {
            return b;
        }
    }
    throw Error("the launcher is chosen only once it is found (--launcher auto)");
}

std::string launcher_title(const Launcher& launcher)
{
    const Backend& b = row(launcher.kind);
    return fmt::format(fmt::runtime(b.title), launcher.flavour.empty() ? b.default_flavour : launcher.flavour);
}

std::vector<std::string> launcher_command(const Launcher& launcher, const LaunchRequest& request)
{
    return row(launcher.kind).command(launcher, request);
}

} // namespace base::launchers
