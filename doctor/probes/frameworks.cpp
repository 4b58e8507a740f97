#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/process.hpp"
#include "base/python.hpp"
#include "base/spelling.hpp"
#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <optional>
#include <string_view>

namespace doctor::probes {

namespace {

// The frameworks the probe looks at, in report order.
const std::vector<std::string> framework_names = {"torch", "tensorflow", "jax", "horovod", "mxnet"};

// Marks the progress lines of the script, so that what frameworks print themselves is ignored.
constexpr std::string_view progress_mark = "@gpukit-frameworks ";

// share/gpukit/frameworks.py, compiled in as `frameworks_py`: run as `python3 -c <script>
// [framework...]`; progress lines around each framework, then one JSON object.
#include "share/frameworks_py.inc"

// ---------------------------------------------------------------------------------------------
// Collector

// What one run of the script said.
struct ScriptOutput {
    nlohmann::json final = nullptr; // the last line's object, when it got that far
    nlohmann::json python = nullptr; // the "python" progress line
    std::map<std::string, nlohmann::json> done; // frameworks finished
    std::string running; // started, not finished
};

ScriptOutput parse_script_output(const std::string& output)
{
    ScriptOutput out;
    std::size_t pos = 0;
    while (pos < output.size()) {
        std::size_t end = output.find('\n', pos);
        std::string_view line(output.data() + pos, (end == std::string::npos ? output.size() : end) - pos);
        pos = end == std::string::npos ? output.size() : end + 1;
        if (auto mark = line.find(progress_mark); mark != std::string_view::npos) {
            auto j = nlohmann::json::parse(line.substr(mark + progress_mark.size()), nullptr, false);
            if (!j.is_object()) {
                continue;
            }
            const std::string event = j.value("event", std::string());
            const std::string name = j.value("framework", std::string());
            if (event == "python") {
                out.python = j;
            } else if (event == "start") {
                out.running = name;
            } else if (event == "done" && j.contains("facts")) {
                out.done[name] = j["facts"];
                if (out.running == name) {
                    out.running.clear();
                }
            }
        } else if (!line.empty() && line.front() == '{') {
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_object() && j.contains("frameworks") && j["frameworks"].is_object()) {
                out.final = j;
            }
        }
    }
    return out;
}

std::string seconds_text(std::chrono::milliseconds ms)
{
    return fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000.0);
}

std::string tail_text(const std::string& output)
{
    std::string flat;
    for (char c : output) {
        flat += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    auto first = flat.find_first_not_of(' ');
    flat = first == std::string::npos ? "" : flat.substr(first);
    if (flat.size() > 300) {
        flat = "..." + flat.substr(flat.size() - 300);
    }
    return flat.empty() ? "no output" : flat;
}

std::string exit_text(const base::CommandResult& r)
{
    if (r.exit_code > 128) {
        return fmt::format("was killed by signal {} ({})", r.exit_code - 128, strsignal(r.exit_code - 128));
    }
    return fmt::format("exited with status {}", r.exit_code);
}

// Finds the interpreter (base::find_python) in the snapshot's environment, noting a pyenv shim
// it looked past and why it found none.
nlohmann::json find_python(const CollectContext& ctx, nlohmann::json& out)
{
    const base::Interpreter found = base::find_python(ctx.env);
    if (!found.shim.empty()) {
        out["python_shim"] = found.shim;
    }
    if (found.file.empty()) {
        out["python_error"] = found.error;
        return nullptr;
    }
    return found.file;
}

nlohmann::json collect_frameworks(const CollectContext& ctx)
{
    nlohmann::json out = {{"python", nullptr}, {"frameworks", nlohmann::json::object()}};
    out["python"] = find_python(ctx, out);
    if (out["python"].is_null()) {
        return out;
    }
    const std::string python = out["python"].get<std::string>();
    // Leave the runner's deadline room to report: python gets most of ctx.timeout, not all.
    const auto margin = std::min(std::chrono::milliseconds(1000), ctx.timeout / 5);
    const auto budget = ctx.timeout - margin;
    const auto deadline = std::chrono::steady_clock::now() + budget;
    auto env = ctx.env;
    env.emplace("TF_CPP_MIN_LOG_LEVEL", "2"); // TensorFlow's C++ start-up chatter; keeps the user's value
    std::vector<std::string> remaining = framework_names;
    auto& frameworks = out["frameworks"];
    auto forget = [&](const std::string& name) {
        remaining.erase(std::remove(remaining.begin(), remaining.end(), name), remaining.end());
    };
    // A framework that kills the interpreter (SIGILL on a CPU without AVX, a segfault in a CUDA
    // library) is recorded as broken and the script runs again for the rest.
    for (std::size_t attempt = 0; attempt <= framework_names.size() && !remaining.empty(); ++attempt) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left < std::chrono::milliseconds(100)) {
            out["python_error"] = fmt::format(
                "python3 ran out of time ({}) before checking {}", seconds_text(budget), fmt::join(remaining, ", "));
            out["not_checked"] = remaining;
            break;
        }
        std::vector<std::string> argv = {python, "-c", frameworks_py};
        argv.insert(argv.end(), remaining.begin(), remaining.end());
        base::CommandResult r;
        try {
            r = base::run_command(argv, left, env);
        } catch (const base::Error& e) {
            out["python_error"] = e.what();
            break;
        }
        ScriptOutput got = parse_script_output(r.output);
        for (const auto& source : {got.python, got.final}) {
            if (source.is_object()) {
                for (const char* key : {"python_executable", "python_version", "cuda_visible_devices"}) {
                    if (source.contains(key)) {
                        out[key] = source[key];
                    }
                }
            }
        }
        for (const auto& [name, facts] : got.done) {
            frameworks[name] = facts;
            forget(name);
        }
        if (got.final.is_object()) {
            for (const auto& [name, facts] : got.final["frameworks"].items()) {
                frameworks[name] = facts;
                forget(name);
            }
            break;
        }
        if (r.timed_out) {
            if (!got.running.empty()) {
                frameworks[got.running] = {{"installed", true}, {"timed_out", true},
                    {"import_error",
                        fmt::format(
                            "python3 timed out after {} while checking {}", seconds_text(budget), got.running)}};
                forget(got.running);
            }
            out["python_error"] = fmt::format("python3 timed out after {}{}", seconds_text(budget),
                got.running.empty() ? "" : " while checking " + got.running);
            if (!remaining.empty()) {
                out["not_checked"] = remaining;
            }
            break;
        }
        if (!got.running.empty()) {
            frameworks[got.running] = {{"installed", true},
                {"import_error", fmt::format("python3 {} while checking {}", exit_text(r), got.running)}};
            forget(got.running);
            continue;
        }
        if (remaining.empty()) {
            break; // every framework reported before the interpreter went wrong
        }
        out["python_error"] =
            fmt::format("{} {} without printing its JSON: {}", python, exit_text(r), tail_text(r.output));
        break;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Rule

std::optional<bool> known_bool(const nlohmann::json& facts, const char* key)
{
    auto it = facts.find(key);
    if (it != facts.end() && it->is_boolean()) {
        return it->get<bool>();
    }
    return std::nullopt;
}

std::optional<long long> known_int(const nlohmann::json& facts, const char* key)
{
    auto it = facts.find(key);
    if (it != facts.end() && it->is_number_integer()) {
        return it->get<long long>();
    }
    return std::nullopt;
}

std::string known_text(const nlohmann::json& facts, const char* key)
{
    auto it = facts.find(key);
    if (it != facts.end() && it->is_string() && it->get<std::string>() != "unknown") {
        return it->get<std::string>();
    }
    return "";
}

// What kind of build a framework is, as far as its facts tell.
enum class Build { cuda, cpu, rocm, unknown };

// One framework's facts read once: build kind, the CUDA it was built for, how many GPUs it sees.
struct FrameworkView {
    std::string name;
    std::string version;
    Build build = Build::unknown;
    std::string build_cuda; // "12.1", "12" (jax plugin), "" when not known
    std::optional<long long> gpus; // GPUs the framework sees
    std::string label; // "torch 2.3.0+cu121"
};

FrameworkView view_of(const std::string& name, const nlohmann::json& f)
{
    FrameworkView v;
    v.name = name;
    v.version = known_text(f, "version");
    v.label = v.version.empty() ? name : fmt::format("{} {}", name, v.version);
    if (name == "torch") {
        const auto& cuda = f.contains("cuda_build") ? f["cuda_build"] : nlohmann::json("unknown");
        const auto& hip = f.contains("hip_build") ? f["hip_build"] : nlohmann::json(nullptr);
        if (cuda.is_string() && cuda.get<std::string>() != "unknown" && !cuda.get<std::string>().empty()) {
            v.build = Build::cuda;
            v.build_cuda = cuda.get<std::string>();
        } else if (hip.is_string() && hip.get<std::string>() != "unknown" && !hip.get<std::string>().empty()) {
            v.build = Build::rocm;
        } else if (cuda.is_null()) {
            v.build = Build::cpu;
        }
        auto available = known_bool(f, "cuda_available");
        if (available && !*available) {
            v.gpus = 0; // device_count() may count through NVML even when CUDA cannot start
        } else if (available) {
            v.gpus = known_int(f, "device_count");
        }
    } else if (name == "tensorflow" || name == "mxnet") {
        if (auto built = known_bool(f, "cuda_build")) {
            v.build = *built ? Build::cuda : Build::cpu;
        }
        v.build_cuda = known_text(f, "cuda_version");
        v.gpus = known_int(f, "device_count");
    } else if (name == "jax") {
        long long gpus = 0;
        bool rocm = false;
        bool known = false;
        if (f.contains("platforms") && f["platforms"].is_array()) {
            known = true;
            for (const auto& p : f["platforms"]) {
                std::string platform = p.is_string() ? p.get<std::string>() : "";
                gpus += platform == "gpu" || platform == "cuda" ? 1 : 0;
                rocm = rocm || platform == "rocm";
            }
        }
        if (known) {
            v.gpus = gpus;
        }
        const std::string plugin = known_text(f, "cuda_plugin");
        const std::string jaxlib = known_text(f, "jaxlib_version");
        if (rocm) {
            v.build = Build::rocm;
        } else if (gpus > 0 || !plugin.empty() || jaxlib.find("cuda") != std::string::npos) {
            v.build = Build::cuda;
            if (plugin.find("cuda12") != std::string::npos) {
                v.build_cuda = "12";
            } else if (plugin.find("cuda11") != std::string::npos) {
                v.build_cuda = "11";
            }
        } else if (known) {
            v.build = Build::cpu;
        }
    }
    return v;
}

// GPUs NVML sees, when it answered.
std::optional<std::size_t> nvml_gpu_count(const Facts& facts)
{
    const auto* nvml = collector_facts(facts, "nvml");
    if (nvml == nullptr || !nvml->value("nvml_loaded", false) || !nvml->contains("gpus") ||
        !(*nvml)["gpus"].is_array()) {
        return std::nullopt;
    }
    return (*nvml)["gpus"].size();
}

// CUDA_VISIBLE_DEVICES as the interpreter saw it; else from the "env" facts if they were
// collected (a value of the variable by that name at the top or one level down).
std::optional<std::string> cuda_visible_devices(const Facts& facts, const nlohmann::json& mine)
{
    if (mine.contains("cuda_visible_devices")) {
        const auto& v = mine["cuda_visible_devices"];
        return v.is_string() ? std::optional<std::string>(v.get<std::string>()) : std::nullopt;
    }
    const auto* env = collector_facts(facts, "env");
    if (env == nullptr || !env->is_object()) {
        return std::nullopt;
    }
    if (auto it = env->find("CUDA_VISIBLE_DEVICES"); it != env->end() && it->is_string()) {
        return it->get<std::string>();
    }
    for (const auto& [key, value] : env->items()) {
        if (value.is_object()) {
            if (auto it = value.find("CUDA_VISIBLE_DEVICES"); it != value.end() && it->is_string()) {
                return it->get<std::string>();
            }
        }
    }
    return std::nullopt;
}

// Whether CUDA_VISIBLE_DEVICES leaves no GPU: empty, -1, "none", or a first entry that is not a
// GPU (CUDA stops at the first invalid entry).
bool hides_every_gpu(const std::string& cvd, std::optional<std::size_t> nvml_gpus)
{
    std::string first = cvd.substr(0, cvd.find(','));
    first.erase(0, first.find_first_not_of(' '));
    if (first.empty() || first == "-1" || first == "none" || first == "NoDevFiles") {
        return true;
    }
    if (std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return nvml_gpus && first.size() < 6 && static_cast<std::size_t>(std::stoi(first)) >= *nvml_gpus;
    }
    return false;
}

std::optional<std::pair<int, int>> cuda_major_minor(const std::string& text)
{
    // "12.4", "12.4.1" or "12": leading numbers, with a check that each converted.
    int major = 0;
    int minor = 0;
    const char* end = text.data() + text.size();
    auto [after_major, major_error] = std::from_chars(text.data(), end, major);
    if (major_error != std::errc()) {
        return std::nullopt;
    }
    if (after_major != end && *after_major == '.') {
        auto [after_minor, minor_error] = std::from_chars(after_major + 1, end, minor);
        if (minor_error == std::errc()) {
            return std::pair{major, minor};
        }
    }
    return std::pair{major, 0};
}

// The pip command for the CUDA build of a framework; torch's index follows the driver's CUDA.
std::string cuda_install_command(const std::string& name, const Facts& facts)
{
    if (name == "torch") {
        std::string tag = "cu121";
        const auto* nvml = collector_facts(facts, "nvml");
        if (nvml != nullptr && nvml->contains("cuda_driver_version") && (*nvml)["cuda_driver_version"].is_number()) {
            const int driver = (*nvml)["cuda_driver_version"].get<int>();
            for (auto [version, candidate] : {std::pair{12080, "cu128"}, std::pair{12060, "cu126"},
                     std::pair{12040, "cu124"}, std::pair{12010, "cu121"}, std::pair{11080, "cu118"}}) {
                if (driver >= version) {
                    tag = candidate;
                    break;
                }
            }
        }
        return fmt::format("pip install torch --index-url https://download.pytorch.org/whl/{}", tag);
    }
    if (name == "tensorflow") {
        return "pip install 'tensorflow[and-cuda]'";
    }
    if (name == "jax") {
        return "pip install -U 'jax[cuda12]'";
    }
    return "pip install mxnet-cu112";
}

/// The framework's facts and the command that installs its CUDA build, which the remedy names.
nlohmann::json with_install(nlohmann::json f, const std::string& name, const Facts& facts)
{
    f["install"] = cuda_install_command(name, facts);
    return f;
}

/// The framework's facts and its pip package, which the remedy names.
nlohmann::json with_package(nlohmann::json f, const std::string& name)
{
    f["package"] = name;
    return f;
}

// Why a GPU build sees no GPU, from the other facts.
std::string likely_cause(
    const FrameworkView& v, const nlohmann::json& f, const Facts& facts, const nlohmann::json& mine)
{
    const auto nvml_gpus = nvml_gpu_count(facts);
    if (auto why = gpus_unavailable(facts); why && collector_facts(facts, "nvml") != nullptr) {
        return *why;
    }
    if (auto cvd = cuda_visible_devices(facts, mine); cvd && hides_every_gpu(*cvd, nvml_gpus)) {
        return fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" hides every GPU", *cvd);
    }
    if (nvml_gpus && *nvml_gpus == 0) {
        return "NVML sees no GPU either: the driver finds none (nvidia-smi and dmesg's Xid errors say why)";
    }
    const auto* nvml = collector_facts(facts, "nvml");
    if (nvml != nullptr && nvml->contains("cuda_driver_version") && (*nvml)["cuda_driver_version"].is_number() &&
        !v.build_cuda.empty()) {
        const int driver = (*nvml)["cuda_driver_version"].get<int>();
        auto built = cuda_major_minor(v.build_cuda);
        std::pair<int, int> supports{driver / 1000, (driver % 1000) / 10};
        if (built && *built > supports) {
            return fmt::format("the driver supports CUDA {}.{}, {} was built for CUDA {}", supports.first,
                supports.second, v.name, v.build_cuda);
        }
    }
    if (std::string warning = known_text(f, "cuda_warning"); !warning.empty()) {
        return fmt::format("CUDA did not start: {}", warning);
    }
    if (nvml_gpus) {
        return fmt::format("NVML sees {} GPU{} but {} cannot use them (are /dev/nvidia* readable here, and do the CUDA "
                           "libraries it loads match the driver?)",
            *nvml_gpus, *nvml_gpus == 1 ? "" : "s", v.name);
    }
    return "the cause is unknown (no NVML facts)";
}

std::string pass_details(const FrameworkView& v, const nlohmann::json& f)
{
    std::vector<std::string> parts;
    if (v.name == "torch") {
        parts.push_back("CUDA " + v.build_cuda);
        if (auto cudnn = known_int(f, "cudnn_version")) {
            parts.push_back(fmt::format("cuDNN {}", *cudnn));
        }
        std::string nccl = known_text(f, "nccl_version");
        auto nccl_ok = known_bool(f, "nccl_available");
        parts.push_back(!nccl.empty() ? "NCCL " + nccl : nccl_ok && *nccl_ok ? "NCCL" : "no NCCL");
        auto mpi = known_bool(f, "mpi_available");
        parts.push_back(mpi && *mpi ? "MPI" : "no MPI");
    } else if (!v.build_cuda.empty()) {
        parts.push_back("CUDA " + v.build_cuda);
    }
    return parts.empty() ? "" : fmt::format(" ({})", fmt::join(parts, ", "));
}

void judge_horovod(const nlohmann::json& f, Findings& out)
{
    FrameworkView v = view_of("horovod", f);
    std::vector<std::string> with_nccl;
    std::vector<std::string> without_nccl;
    std::vector<std::string> errors;
    std::vector<std::string> controllers;
    const nlohmann::json bindings =
        f.contains("bindings") && f["bindings"].is_object() ? f["bindings"] : nlohmann::json::object();
    for (const auto& [framework, b] : bindings.items()) {
        if (b.contains("import_error")) {
            errors.push_back(fmt::format("horovod.{}: {}", framework, b["import_error"].get<std::string>()));
            continue;
        }
        const auto& nccl = b.contains("nccl_built") ? b["nccl_built"] : nlohmann::json("unknown");
        if ((nccl.is_boolean() && !nccl.get<bool>()) || (nccl.is_number() && nccl.get<long long>() == 0)) {
            without_nccl.push_back(framework);
        } else if (nccl.is_boolean() || nccl.is_number()) {
            with_nccl.push_back(framework);
        }
        for (const char* c : {"mpi_built", "gloo_built"}) {
            auto built = known_bool(b, c);
            std::string controller = std::string(c) == "mpi_built" ? "MPI" : "Gloo";
            if (built && *built && std::find(controllers.begin(), controllers.end(), controller) == controllers.end()) {
                controllers.push_back(controller);
            }
        }
    }
    const std::size_t loaded = bindings.size() - errors.size();
    if (!bindings.empty() && loaded == 0) {
        out.add("frameworks.broken_install", "horovod",
            fmt::format("{}: none of its framework bindings loads: {}", v.label, fmt::join(errors, "; ")),
            with_package(f, "horovod"));
        return;
    }
    if (!without_nccl.empty()) {
        out.add("frameworks.horovod_no_nccl", "horovod",
            fmt::format("{}: built without NCCL for {}: GPU allreduce goes through MPI or Gloo", v.label,
                fmt::join(without_nccl, ", ")),
            f);
    }
    if (without_nccl.empty() && errors.empty()) {
        std::string what = bindings.empty() ? "no framework to bind to is installed"
                                            : fmt::format("NCCL for {}", fmt::join(with_nccl, ", "));
        if (with_nccl.empty() && !bindings.empty()) {
            what = "NCCL support unknown";
        }
        out.add("frameworks.ok", "horovod",
            fmt::format("{}: {}{}", v.label, what,
                controllers.empty() ? "" : fmt::format(", controllers {}", fmt::join(controllers, ", "))),
            f);
    }
    for (const auto& e : errors) {
        out.add("frameworks.broken_install", "horovod", fmt::format("{}: a binding does not load: {}", v.label, e),
            with_package(f, "horovod"));
    }
}

void judge_framework(const std::string& name, const nlohmann::json& f, const Facts& facts, const nlohmann::json& mine,
    const Policy& policy, Findings& out)
{
    if (f.contains("import_error") && f["import_error"].is_string()) {
        const std::string error = f["import_error"].get<std::string>();
        if (f.value("timed_out", false)) {
            out.add("frameworks.python_failed", name, fmt::format("{}: not checked: {}", name, error), f);
            return;
        }
        out.add("frameworks.broken_install", name, fmt::format("{} is installed but does not import: {}", name, error),
            with_package(f, name));
        return;
    }
    if (name == "horovod") {
        judge_horovod(f, out);
        return;
    }
    const bool none_expected = policy.expect_gpus && *policy.expect_gpus == 0;
    const FrameworkView v = view_of(name, f);
    if (v.build == Build::cpu || v.build == Build::rocm) {
        const char* kind = v.build == Build::cpu ? "a CPU-only build" : "a ROCm (AMD GPU) build";
        if (none_expected) {
            out.add("frameworks.ok", name, fmt::format("{}: {}, and the policy expects no GPUs", v.label, kind), f);
            return;
        }
        out.add(v.build == Build::cpu ? "frameworks.cpu_only_build" : "frameworks.rocm_build", name,
            fmt::format("{}: {}", v.label, kind), with_install(f, name, facts));
        return;
    }
    if (v.gpus && *v.gpus == 0) {
        if (none_expected) {
            out.add("frameworks.ok", name, fmt::format("{}: sees no GPU, and the policy expects none", v.label), f);
            return;
        }
        const std::string cause = likely_cause(v, f, facts, mine);
        const char* build = v.build == Build::cuda ? "a CUDA build" : "a build whose CUDA support is unknown";
        out.add("frameworks.no_gpu_visible", name,
            fmt::format("{}: {} that sees no GPU; likely cause: {}", v.label, build, cause), f);
        return;
    }
    const auto nvml_gpus = nvml_gpu_count(facts);
    bool warned = false;
    if (v.gpus && nvml_gpus && static_cast<std::size_t>(*v.gpus) < *nvml_gpus) {
        auto cvd = cuda_visible_devices(facts, mine);
        out.add("frameworks.fewer_gpus_visible", name,
            fmt::format("{} sees {} of the {} GPUs NVML sees{}", v.label, *v.gpus, *nvml_gpus,
                cvd ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", *cvd) : ""),
            f);
        warned = true;
    }
    if (name == "torch" && v.build == Build::cuda) {
        if (auto nccl = known_bool(f, "nccl_available"); nccl && !*nccl) {
            out.add("frameworks.no_nccl", name,
                fmt::format("{}: torch.distributed has no NCCL backend; multi-GPU training falls back to "
                            "Gloo",
                    v.label),
                with_install(f, name, facts));
            warned = true;
        }
    }
    if (!v.gpus) {
        out.add("frameworks.unknown", name,
            fmt::format("not checked: {} does not say how many GPUs it sees{}", v.label,
                f.contains("errors") ? fmt::format(" ({})", f["errors"].dump()) : ""),
            f);
        return;
    }
    if (!warned) {
        std::string sees =
            v.gpus ? fmt::format("sees {} GPU{}", *v.gpus, *v.gpus == 1 ? "" : "s") : std::string("GPU count unknown");
        out.add("frameworks.ok", name, fmt::format("{}{}: {}", v.label, pass_details(v, f), sees), f);
    }
}

void judge_frameworks(const Facts& facts, const Policy& policy, Findings& out)
{
    const auto& mine = *collector_facts(facts, "frameworks");
    const std::string python_error = mine.value("python_error", std::string());
    if (mine.contains("python") && mine["python"].is_null()) {
        out.add("frameworks.no_python", "host",
            fmt::format("not checked: {}", python_error.empty() ? "no python3" : python_error), mine);
        return;
    }
    const nlohmann::json frameworks =
        mine.contains("frameworks") && mine["frameworks"].is_object() ? mine["frameworks"] : nlohmann::json::object();
    const std::string python = fmt::format("{}{}", mine.value("python", std::string("python3")),
        mine.contains("python_version") ? " " + mine.value("python_version", std::string()) : std::string());
    std::vector<std::string> missing;
    std::vector<std::string> checked;
    for (const auto& name : framework_names) {
        if (!frameworks.contains(name)) {
            continue;
        }
        const auto& f = frameworks[name];
        if (!f.value("installed", false)) {
            missing.push_back(name);
        } else {
            checked.push_back(name);
            judge_framework(name, f, facts, mine, policy, out);
        }
    }
    if (!python_error.empty()) {
        std::vector<std::string> not_checked;
        if (mine.contains("not_checked") && mine["not_checked"].is_array()) {
            for (const auto& n : mine["not_checked"]) {
                not_checked.push_back(n.is_string() ? n.get<std::string>() : n.dump());
            }
        }
        const bool said = std::any_of(out.list().begin(), out.list().end(),
            [&](const Finding& fi) { return fi.code == "frameworks.python_failed"; });
        if (!said || !not_checked.empty()) {
            out.add("frameworks.python_failed", "host",
                fmt::format("{}{}", python_error,
                    not_checked.empty() ? "" : fmt::format("; not checked: {}", fmt::join(not_checked, ", "))),
                {{"python", mine.value("python", std::string())}, {"python_error", python_error}});
        }
    }
    if (!missing.empty() && checked.empty() && python_error.empty()) {
        out.add("frameworks.not_installed", "host",
            fmt::format("not checked: none of {} is installed for {}", fmt::join(missing, ", "), python),
            {{"python", mine.value("python", std::string())}, {"not_installed", missing}});
    } else {
        for (const auto& name : missing) {
            out.add("frameworks.not_installed", name,
                fmt::format("not checked: {} is not installed for {}", name, python),
                {{"python", mine.value("python", std::string())}});
        }
    }
    if (out.empty()) {
        out.add("frameworks.python_failed", "host", "the frameworks facts name no framework", mine);
    }
}

} // namespace

// Which deep-learning frameworks the node's python3 has, whether they are GPU builds, and what
// they see: the interpreter runs the embedded script with the snapshot's environment.
Collector frameworks_collector()
{
    return {"frameworks", collect_frameworks};
}

Probe frameworks_probe()
{
    Probe p;
    p.name = "frameworks";
    p.summary = "PyTorch, TensorFlow, JAX, Horovod, MXNet: GPU builds, GPUs seen, NCCL/MPI compiled in";
    p.collectors = {"frameworks", "nvml"};
    p.codes = {
        {"frameworks.ok", Severity::pass, "the framework is a GPU build and sees the GPUs",
            "It imports, was built with CUDA, and sees as many GPUs as NVML; the message lists its version and, for "
            "PyTorch, the CUDA, cuDNN and NCCL it was built with and whether MPI is compiled in.",
            ""},
        {"frameworks.not_installed", Severity::skip, "the framework is not installed",
            "The interpreter (python3 in PATH, or GPUKIT_PYTHON) has no such module, so it was not checked. If jobs "
            "run in a virtual environment or a conda env, point GPUKIT_PYTHON at its python, or run gpudoctor with it "
            "activated.",
            ""},
        {"frameworks.no_python", Severity::skip, "no Python interpreter to check the frameworks with",
            "python3 is not in PATH (or GPUKIT_PYTHON names no executable), so no framework was checked.",
            "put the jobs' python3 in PATH or set GPUKIT_PYTHON to it"},
        {"frameworks.python_failed", Severity::error, "the interpreter did not answer",
            "python3 timed out, crashed or printed no result while the frameworks were checked; a framework whose "
            "import or CUDA start hangs (a wedged driver) is named. The frameworks it did not reach are not checked.",
            "import the framework by hand (python3 -c 'import NAME') to see where it hangs or fails (a wedged GPU "
            "driver shows in dmesg), or raise --timeout if imports are only slow; when the facts name no framework, "
            "run 'gpudoctor snapshot --only frameworks' again"},
        {"frameworks.broken_install", Severity::fail, "the framework is installed but does not import",
            "Importing it raised an error other than 'module not found' (a missing shared library such as "
            "libcudart.so.12, an undefined symbol after an upgrade, a numpy it was not built for) or killed the "
            "interpreter. For Horovod: its binding for an installed framework does not load (built against another "
            "version).",
            "reinstall it (pip install --force-reinstall {package}) or install the library the error names; for a "
            "Horovod binding that does not load, reinstall horovod against the installed frameworks: "
            "HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir --force-reinstall horovod"},
        {"frameworks.unknown", Severity::skip, "the framework's GPU support could not be told",
            "It imports, but how many GPUs it sees could not be read (a very old or unusual version, or the call "
            "raised; the calls that failed are in the finding's facts). Not a pass.",
            ""},
        {"frameworks.cpu_only_build", Severity::fail, "the framework is a CPU-only build",
            "torch.version.cuda is None, tf.test.is_built_with_cuda() is false, JAX has no CUDA plugin, or MXNet "
            "lacks the CUDA feature: training runs on the CPU. pip's default index gives CPU wheels on some "
            "platforms, and a dependency resolver can replace a CUDA wheel by a CPU one. With --expect-gpus 0 this "
            "passes.",
            "install the CUDA build: {install}"},
        {"frameworks.rocm_build", Severity::fail, "the framework is a ROCm (AMD) build",
            "The build targets AMD GPUs (torch.version.hip is set, or JAX sees ROCm devices); it cannot use NVIDIA "
            "GPUs.",
            "install the CUDA build: {install}"},
        {"frameworks.no_gpu_visible", Severity::fail, "a GPU build that sees no GPU",
            "The framework was built with CUDA but finds no GPU. The message names the likely cause from the other "
            "facts: no NVIDIA driver, CUDA_VISIBLE_DEVICES empty or -1 (or naming a GPU that does not exist), a driver "
            "that supports an older CUDA than the framework was built for (e.g. driver CUDA 12.4, torch built for "
            "12.6), or the error CUDA gave when it started.",
            "fix the likely cause the message names: install and load the NVIDIA driver (a container: start it with "
            "--gpus all or the NVIDIA container toolkit); unset CUDA_VISIBLE_DEVICES or list GPUs that exist in it; "
            "upgrade the driver, or install a build for the CUDA it supports; check that /dev/nvidia* exist and are "
            "readable here"},
        {"frameworks.fewer_gpus_visible", Severity::warn, "the framework sees fewer GPUs than NVML",
            "Usually CUDA_VISIBLE_DEVICES narrows the set (on purpose under gpurun --gpu-visibility=isolate); "
            "otherwise a GPU in an error state or a container given only some devices.",
            "widen or unset CUDA_VISIBLE_DEVICES unless the narrowing is deliberate (gpurun --gpu-visibility=isolate "
            "narrows it on purpose); without it, check nvidia-smi for GPUs in an error state and the container's "
            "device list"},
        {"frameworks.no_nccl", Severity::warn, "PyTorch has no NCCL backend",
            "torch.distributed.is_nccl_available() is false in a CUDA build: DistributedDataParallel on GPUs falls "
            "back to Gloo, which is much slower.",
            "install an official CUDA wheel of PyTorch (they include NCCL): {install}"},
        {"frameworks.horovod_no_nccl", Severity::warn, "Horovod was built without NCCL",
            "nccl_built() is 0 for a Horovod binding: GPU allreduce goes through MPI or Gloo on host memory.",
            "reinstall horovod with NCCL: HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir "
            "--force-reinstall horovod"},
    };
    p.judge = judge_frameworks;
    return p;
}

} // namespace doctor::probes
