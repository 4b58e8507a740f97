#include "doctor/facts/mpi.hpp"
#include "base/error.hpp"
#include "base/mpi_flavour.hpp"
#include "base/process.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <regex>
#include <set>
#include <sstream>

namespace doctor::probes {

namespace {

using facts::CommandRun;
using facts::MpiFacts;
using facts::MpirunVersion;
using facts::OmpiInfo;
using facts::UcxInfo;

std::string first_version(const std::string& text)
{
    static const std::regex version(R"((\d+\.\d+(\.\d+)?[a-z0-9]*))");
    std::smatch m;
    return std::regex_search(text, m, version) ? m.str(1) : std::string();
}

std::string head(const std::string& text, std::size_t lines)
{
    std::istringstream in(text);
    std::string line;
    std::string out;
    for (std::size_t i = 0; i < lines && std::getline(in, line); ++i) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        out += (i == 0 ? "" : "\n") + line;
    }
    return out;
}

// Runs one command within what is left of the collector's budget, recording how it went.
class CommandBudget {
public:
    explicit CommandBudget(const CollectContext& ctx)
        : m_ctx(ctx), m_deadline(std::chrono::steady_clock::now() + ctx.timeout * 3 / 4)
    {
    }

    /// nullopt when there was no time left to start it; the run's exit code, timeout and output otherwise.
    std::optional<base::CommandResult> run(const std::vector<std::string>& argv, CommandRun& record)
    {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(m_deadline - std::chrono::steady_clock::now());
        if (left < std::chrono::milliseconds(50)) {
            record.not_run = "no time left within the collector's deadline";
            return std::nullopt;
        }
        try {
            base::CommandResult r = base::run_command(argv, left, m_ctx.env);
            record.exit_code = r.exit_code;
            record.timed_out = r.timed_out;
            if (r.timed_out) {
                record.timeout_ms = left.count();
            }
            return r;
        } catch (const base::Error& e) {
            record.not_run = e.what();
            return std::nullopt;
        }
    }

private:
    const CollectContext& m_ctx;
    std::chrono::steady_clock::time_point m_deadline;
};

// The facts of `ompi_info --parsable --all`: version, CUDA support, PML components.
void read_ompi_info(const std::string& output, OmpiInfo& record)
{
    std::istringstream in(output);
    std::string line;
    std::set<std::string> pml;
    bool cuda_component = false;
    // -1 unknown, 0 no, 1 yes (a plain int: GCC 12 misreads an optional<bool> here as maybe unset)
    int cuda = -1;
    std::string cuda_from;
    bool cuda_from_mpi = false;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        // Open MPI 4 prints opal_built_with_cuda_support (opal:base), the FAQ and 5.x
        // mpi_built_with_cuda_support (mpi:base); the mpi one wins when both are there.
        static const std::string mpi_param = "mca:mpi:base:param:mpi_built_with_cuda_support:value:";
        static const std::string opal_param = "mca:opal:base:param:opal_built_with_cuda_support:value:";
        const bool is_mpi = line.rfind(mpi_param, 0) == 0;
        if (is_mpi || (line.rfind(opal_param, 0) == 0 && !cuda_from_mpi)) {
            const std::string v = line.substr(is_mpi ? mpi_param.size() : opal_param.size());
            cuda = v == "true" ? 1 : v == "false" ? 0 : -1;
            cuda_from = is_mpi ? "mpi_built_with_cuda_support" : "opal_built_with_cuda_support";
            cuda_from_mpi = cuda_from_mpi || is_mpi;
        } else if (line.rfind("ompi:version:full:", 0) == 0) {
            record.version = line.substr(std::string("ompi:version:full:").size());
        } else if (line.rfind("mca:pml:", 0) == 0) {
            const std::string rest = line.substr(8);
            const std::string component = rest.substr(0, rest.find(':'));
            if (!component.empty() && component != "base") {
                pml.insert(component);
            }
        } else if (line.rfind("mca:accelerator:cuda:", 0) == 0 || line.rfind("mca:btl:smcuda:", 0) == 0) {
            cuda_component = true; // only built when Open MPI is configured --with-cuda
        }
    }
    record.pml = std::vector<std::string>(pml.begin(), pml.end());
    record.pml_ucx = pml.count("ucx") > 0;
    if (cuda < 0 && cuda_component) {
        cuda = 1;
        record.cuda_support_from = "components (accelerator/cuda or btl/smcuda)";
    } else if (cuda >= 0) {
        record.cuda_support_from = cuda_from;
    }
    if (cuda >= 0) {
        record.cuda_support = cuda == 1;
    }
    record.output_bytes = output.size();
}

// Open MPI's component directory (its pkglibdir) for the installation of `mpirun` (its real
// path): where a build with dynamic components keeps them as files (mca_pml_ucx.so). Tried:
// PREFIX/lib{,64}/openmpi* (source builds, HPC-X, Fedora's /usr/lib64/openmpi) and
// PREFIX/lib/*/openmpi/lib/openmpi* (Debian and Ubuntu). nullopt when none holds a component
// (a build with components linked in): ompi_info tells then.
std::optional<std::filesystem::path> component_dir(const std::filesystem::path& mpirun)
{
    namespace fs = std::filesystem;
    const fs::path prefix = mpirun.parent_path().parent_path();
    std::vector<fs::path> libdirs = {prefix / "lib", prefix / "lib64"};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
        if (fs::is_directory(entry.path() / "openmpi/lib", ec)) {
            libdirs.push_back(entry.path() / "openmpi/lib");
        }
    }
    for (const auto& libdir : libdirs) {
        std::vector<fs::path> found;
        for (const auto& entry : fs::directory_iterator(libdir, ec)) {
            if (entry.path().filename().string().starts_with("openmpi") &&
                fs::exists(entry.path() / "mca_pml_ob1.so", ec)) {
                found.push_back(entry.path());
            }
        }
        if (!found.empty()) {
            std::sort(found.begin(), found.end());
            return found.front();
        }
    }
    return std::nullopt;
}

// The facts ompi_info would give, from the component files themselves: the PML components, and
// CUDA support from the components only a CUDA build has (accelerator/cuda in 5.x, btl/smcuda
// and common_cuda in 4.x). No Open MPI process runs: ompi_info opens every component, some
// 0.2 s even on an idle machine.
void read_components(const std::filesystem::path& dir, OmpiInfo& record)
{
    std::set<std::string> pml;
    std::string cuda_component;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with("mca_pml_") && name.ends_with(".so")) {
            pml.insert(name.substr(8, name.size() - 8 - 3));
        }
        for (const char* cuda : {"mca_accelerator_cuda.so", "mca_btl_smcuda.so"}) {
            cuda_component = name == cuda ? name : cuda_component;
        }
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir.parent_path(), ec)) {
        if (entry.path().filename().string().starts_with("libmca_common_cuda.so")) {
            cuda_component = entry.path().filename().string();
        }
    }
    record.source = "components";
    record.pml = std::vector<std::string>(pml.begin(), pml.end());
    record.pml_ucx = pml.count("ucx") > 0;
    record.cuda_support = !cuda_component.empty();
    record.cuda_support_from = cuda_component.empty() ? fmt::format("no CUDA component in {}", dir.string())
                                                      : fmt::format("{} in {}", cuda_component, dir.string());
}

} // namespace

// mpirun in the environment's PATH: its flavour and version; for Open MPI, ompi_info's CUDA support
// and PML components; ucx_info's version. Commands run with the environment snapshot.
Collector mpi_collector()
{
    return {"mpi", [](const CollectContext& ctx) {
                MpiFacts out;
                CommandBudget budget(ctx);
                const char* path = ctx.getenv("PATH");
                if (path != nullptr) {
                    out.path_env = path;
                }
                if (auto mpirun = base::find_executable("mpirun", path)) {
                    out.mpirun = *mpirun;
                    std::error_code ec;
                    auto real = std::filesystem::canonical(*mpirun, ec);
                    if (!ec) {
                        out.mpirun_real = real.string();
                    }
                    MpirunVersion version;
                    if (auto r = budget.run({*mpirun, "--version"}, version)) {
                        version.output = head(r->output, 4);
                        version.flavour = base::mpi_flavour(r->output);
                        version.version = first_version(head(r->output, 4));
                    }
                    out.mpirun_version = version;
                    const auto components = ec ? std::nullopt : component_dir(real);
                    const bool open_mpi = version.flavour == "Open MPI";
                    if (open_mpi && components) {
                        OmpiInfo info;
                        info.path = components->string();
                        info.version = version.version.value_or("");
                        read_components(*components, info);
                        out.ompi_info = info;
                    } else if (open_mpi) {
                        // ompi_info of the same installation first, then PATH.
                        auto dir_ompi_info = std::filesystem::path(*mpirun).parent_path() / "ompi_info";
                        auto ompi_info = base::find_executable(dir_ompi_info.string(), nullptr);
                        if (!ompi_info) {
                            ompi_info = base::find_executable("ompi_info", path);
                        }
                        OmpiInfo info;
                        info.path = ompi_info;
                        if (ompi_info) {
                            if (auto r = budget.run({*ompi_info, "--parsable", "--all"}, info)) {
                                read_ompi_info(r->output, info);
                            }
                        }
                        out.ompi_info = info;
                    }
                }
                auto ucx_info = base::find_executable("ucx_info", path);
                UcxInfo ucx;
                ucx.path = ucx_info;
                if (ucx_info) {
                    if (auto r = budget.run({*ucx_info, "-v"}, ucx)) {
                        // "# Library version: 1.15.0"
                        auto at = r->output.find("version:");
                        ucx.version =
                            at == std::string::npos ? first_version(r->output) : first_version(r->output.substr(at));
                    }
                }
                out.ucx = ucx;
                return facts::write(out);
            }};
}

Probe mpi_probe()
{
    Probe p;
    p.name = "mpi";
    p.summary = "mpirun found, its flavour, Open MPI built with CUDA support, UCX";
    p.collectors = {"mpi"};
    p.codes = {
        {"mpi.found", Severity::pass, "mpirun found",
            "The mpirun first in PATH, its flavour and version, and UCX if present.", ""},
        {"mpi.not_found", Severity::warn, "no mpirun in PATH",
            "gpurun launches ranks with Open MPI's mpirun. Jobs started with torchrun, srun or a cluster scheduler "
            "do not need it.",
            "install Open MPI (apt-get install openmpi-bin) or add its bin directory to PATH"},
        {"mpi.unresponsive", Severity::warn, "mpirun --version did not work",
            "mpirun was found but `mpirun --version` timed out, could not be started or printed nothing gpudoctor "
            "recognises as an MPI.",
            "run mpirun --version by hand; a broken installation or a wrapper script in PATH is the "
            "usual cause"},
        {"mpi.not_openmpi", Severity::warn, "mpirun is not Open MPI",
            "The mpirun first in PATH is MPICH, Intel MPI or unknown. gpurun drives Open MPI's mpirun; other MPIs "
            "work for jobs that launch themselves.",
            "put Open MPI's bin directory first in PATH for gpurun (jobs that launch themselves are "
            "unaffected)"},
        {"mpi.cuda_aware", Severity::pass, "Open MPI is CUDA-aware",
            "Open MPI was built with CUDA support (its CUDA components are installed, or ompi_info says so): MPI "
            "calls can take GPU buffers.",
            ""},
        {"mpi.no_cuda", Severity::warn, "Open MPI without CUDA support",
            "Open MPI has no CUDA component (accelerator/cuda, btl/smcuda, common_cuda), or ompi_info says "
            "mpi_built_with_cuda_support is false: passing GPU buffers to MPI calls (mpi4py, "
            "Horovod's MPI ops, CUDA-aware halo exchanges) crashes or copies through the host. NCCL-only jobs are "
            "unaffected.",
            "use an Open MPI built --with-cuda (e.g. NVIDIA HPC-X) if jobs pass GPU buffers to MPI"},
        {"mpi.cuda_unknown", Severity::skip, "Open MPI CUDA support not checked",
            "ompi_info was not found next to mpirun or in PATH, did not answer, or did not print "
            "mpi_built_with_cuda_support.",
            ""},
    };
    p.judge = [](const Facts& facts, const Policy&, Findings& out) {
        const MpiFacts& mpi = *facts.mpi().get();
        if (!mpi.mpirun) {
            out.add("mpi.not_found", "mpirun",
                fmt::format("no mpirun in PATH ({}): gpurun needs Open MPI's mpirun; torchrun and srun "
                            "users do not",
                    mpi.path_env.value_or("PATH unset")),
                {{"path_env", facts::write(mpi.path_env)}});
            return;
        }
        const std::string& where = *mpi.mpirun;
        const MpirunVersion version = mpi.mpirun_version.value_or(MpirunVersion{});
        const std::string flavour = version.flavour.value_or("unknown");
        std::string ucx_text;
        if (mpi.ucx && mpi.ucx->version.value_or("") != "") {
            ucx_text = fmt::format("; UCX {}", *mpi.ucx->version);
        }
        if (mpi.ompi_info && mpi.ompi_info->pml_ucx == true) {
            ucx_text += "; pml ucx";
        }
        if (flavour == "unknown") {
            std::string why = version.not_run ? *version.not_run
                : version.timed_out == true   ? fmt::format("timed out after {} ms", version.timeout_ms.value_or(0))
                                            : fmt::format("exit status {}, output '{}'", version.exit_code.value_or(-1),
                                                  version.output.value_or(""));
            out.add("mpi.unresponsive", where, fmt::format("mpirun --version gave no MPI flavour: {}", why),
                facts::write(mpi));
            return;
        }
        const std::string ver = version.version.value_or("");
        const nlohmann::json version_facts = facts::write(version);
        out.add(
            "mpi.found", where, fmt::format("{}{}{}", flavour, ver.empty() ? "" : " " + ver, ucx_text), version_facts);
        if (flavour != "Open MPI") {
            out.add("mpi.not_openmpi", where, fmt::format("{}, not Open MPI: gpurun drives Open MPI's mpirun", flavour),
                version_facts);
            return;
        }
        const OmpiInfo info = mpi.ompi_info.value_or(OmpiInfo{});
        const nlohmann::json info_facts = facts::write(info);
        if (info.cuda_support == true) {
            out.add("mpi.cuda_aware", where,
                fmt::format("Open MPI is built with CUDA support{}", info.pml_ucx == true ? " (pml ucx)" : ""),
                info_facts);
        } else if (info.cuda_support == false) {
            out.add("mpi.no_cuda", where,
                "Open MPI is built without CUDA support: GPU buffers in MPI calls fail or copy through "
                "the host (NCCL-only jobs are unaffected)",
                info_facts);
        } else {
            std::string why;
            if (!info.path) {
                why = "ompi_info not found next to mpirun or in PATH";
            } else if (info.not_run) {
                why = fmt::format("ompi_info did not run: {}", *info.not_run);
            } else if (info.timed_out == true) {
                why = fmt::format("ompi_info timed out after {} ms", info.timeout_ms.value_or(0));
            } else {
                why = fmt::format(
                    "ompi_info (exit status {}) printed no mpi_built_with_cuda_support", info.exit_code.value_or(-1));
            }
            out.add("mpi.cuda_unknown", where, fmt::format("Open MPI CUDA support not checked: {}", why), info_facts);
        }
    };
    return p;
}

} // namespace doctor::probes
