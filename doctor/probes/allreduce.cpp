#include "base/error.hpp"
#include "base/gpu_bandwidth.hpp"
#include "base/nccl/log.hpp"
#include "base/nccl_allreduce.hpp"
#include "doctor/probes/deep.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

namespace doctor::probes {

namespace {

/// A private directory (mkdtemp, 0700) for NCCL's log, removed with everything in it.
class LogDir {
public:
    explicit LogDir(const CollectContext& ctx)
    {
        const char* tmp = ctx.getenv("TMPDIR");
        std::string pattern = fmt::format("{}/gpudoctor-nccl.XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
        if (mkdtemp(pattern.data()) == nullptr) {
            throw base::Error(fmt::format("cannot make a directory for NCCL's log under {}: mkdtemp: {}; set "
                                          "TMPDIR to a writable directory",
                tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", std::strerror(errno)));
        }
        m_path = pattern;
    }
    ~LogDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    LogDir(const LogDir&) = delete;
    LogDir& operator=(const LogDir&) = delete;
    const std::string& path() const { return m_path; }

    /// What NCCL logged, read by the nccl-log analyzer.
    base::nccl::Analysis analysis() const
    {
        base::nccl::Analyzer analyzer(base::nccl::Limits{}, base::nccl::Inputs::one_job);
        std::vector<std::string> files;
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(m_path, ec)) {
            files.push_back(entry.path().string());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            analyzer.read_file(f, "NCCL's log");
        }
        return analyzer.analysis();
    }

private:
    std::string m_path;
};

nlohmann::json device_list(const std::vector<base::CudaDevice>& devices)
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : devices) {
        out.push_back({{"index", d.index}, {"name", d.name}, {"bus_id", d.bus_id}});
    }
    return out;
}

/// The NCCL variables the user set: the all-reduce runs with them, as the user's jobs would.
nlohmann::json user_nccl_environment(const CollectContext& ctx)
{
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : ctx.env) {
        if (name.rfind("NCCL_", 0) == 0 && name != "NCCL_DEBUG" && name != "NCCL_DEBUG_SUBSYS" &&
            name != "NCCL_DEBUG_FILE") {
            out[name] = value;
        }
    }
    return out;
}

nlohmann::json collect_allreduce(const CollectContext& ctx)
{
    CudaStart start = start_cuda(ctx);
    if (!start.cuda) {
        return {{"skipped", start.skipped}};
    }
    const base::Cuda& cuda = *start.cuda;
    if (const char* missing = cuda.missing_copy_symbol()) {
        throw base::Error(
            fmt::format("{} lacks {}: not a CUDA driver library this tool can measure with", cuda.file(), missing));
    }
    const auto devices = cuda_devices(cuda);
    if (devices.size() < 2) {
        return {{"skipped", fmt::format("{} GPU: an all-reduce needs two", devices.size())}, {"single_gpu", true},
            {"gpus", device_list(devices)}};
    }
    std::optional<base::Nccl> nccl;
    try {
        nccl.emplace(base::Nccl::load(library_file(ctx, "GPUKIT_NCCL_LIBRARY", "libnccl.so.2")));
    } catch (const base::Error& e) {
        return {{"skipped", fmt::format("no NCCL library: {}", e.what())}, {"gpus", device_list(devices)}};
    }
    // NCCL's own log says which transports it chose; it goes to a private file, read afterwards.
    const LogDir logs(ctx);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    setenv("NCCL_DEBUG_FILE", (logs.path() + "/nccl.%h.%p.log").c_str(), 1);
    base::AllReduceSettings settings;
    settings.bytes = ctx.policy.allreduce_bytes;
    settings.iterations = ctx.policy.allreduce_iterations;
    std::vector<int> ordinals;
    for (const auto& d : devices) {
        ordinals.push_back(d.index);
    }
    progress_line(
        ctx, fmt::format("allreduce: NCCL all-reduce over {} GPUs, {} MiB each", devices.size(), settings.bytes >> 20));
    base::AllReduceResult result;
    try {
        result = base::measure_allreduce(cuda, *nccl, ordinals, settings);
    } catch (const base::Error& e) {
        // NCCL's WARN lines usually say why; name the first ones.
        std::string said;
        try {
            const auto analysis = logs.analysis();
            for (std::size_t i = 0; i < analysis.warnings.size() && i < 2; ++i) {
                said += fmt::format("; NCCL WARN {}", analysis.warnings[i].example);
            }
        } catch (const base::Error&) {
        }
        throw base::Error(fmt::format("{}{}", e.what(), said));
    }
    nlohmann::json out = base::to_json(result);
    out["gpus"] = device_list(devices);
    out["environment"] = user_nccl_environment(ctx);
    const nlohmann::json log = base::nccl::render_json(logs.analysis());
    out["log"] = {{"nccl_versions", log["nccl_versions"]}, {"summary", log["summary"]}, {"findings", log["findings"]}};
    return out;
}

void judge_allreduce(const Facts& facts, const Policy& policy, Findings& out)
{
    const nlohmann::json& ar = *collector_facts(facts, "allreduce");
    if (ar.contains("skipped")) {
        const bool single = ar.value("single_gpu", false);
        out.add(single ? "allreduce.single_gpu" : "allreduce.not_measured", "host",
            fmt::format("not measured: {}", ar["skipped"].get<std::string>()));
        return;
    }
    const int ranks = ar.value("ranks", 0);
    const double busbw = ar.value("busbw_gbps", 0.0);
    const double algbw = ar.value("algbw_gbps", 0.0);
    const auto bytes = ar.value("bytes", std::uint64_t{0});
    const nlohmann::json gpus = ar.value("gpus", nlohmann::json::array());
    const std::string model = gpus.empty() ? std::string() : gpus[0].value("name", std::string());
    const DeepFloor* floor = policy.floor_for(model);
    const std::string measured = fmt::format("NCCL {} all-reduce over {} GPUs, {} MiB each: busbw {} GB/s (algbw {} "
                                             "GB/s, {:.0f} µs)",
        ar.value("nccl_version", std::string("?")), ranks, bytes >> 20, gbps_text(busbw), gbps_text(algbw),
        ar.value("time_us", 0.0));
    nlohmann::json numbers = ar;
    numbers.erase("log");
    if (floor != nullptr && floor->allreduce_busbw_gbps && floor->allreduce_gpus == static_cast<unsigned>(ranks)) {
        numbers["floor_gbps"] = *floor->allreduce_busbw_gbps;
        if (busbw < *floor->allreduce_busbw_gbps) {
            out.add("allreduce.busbw_low", "host",
                fmt::format("{}, below {} GB/s ({}'s floor for {}× {})", measured,
                    gbps_text(*floor->allreduce_busbw_gbps), floor->source, ranks, floor->model),
                numbers);
        } else {
            out.add("allreduce.busbw_ok", "host",
                fmt::format("{} (floor {} GB/s for {}× {})", measured, gbps_text(*floor->allreduce_busbw_gbps), ranks,
                    floor->model),
                numbers);
        }
    } else {
        out.add("allreduce.busbw_ok", "host",
            fmt::format("{} (no floor for {}× {} in the GPU table or the policy)", measured, ranks,
                model.empty() ? "this GPU" : model),
            numbers);
    }
    const nlohmann::json log = ar.value("log", nlohmann::json::object());
    const nlohmann::json transports =
        log.value("summary", nlohmann::json::object()).value("transports", nlohmann::json::object());
    std::vector<std::string> used;
    for (const auto& [name, count] : transports.items()) {
        if (count.is_number() && count.get<double>() > 0) {
            used.push_back(fmt::format("{} ×{}", name, count.get<std::uint64_t>()));
        }
    }
    if (!used.empty()) {
        out.add("allreduce.transports", "host", fmt::format("NCCL connected the GPUs over {}", fmt::join(used, ", ")),
            transports);
    }
    // What NCCL's own log of the run shows, by nccl-log's rows.
    for (const auto& f : log.value("findings", nlohmann::json::array())) {
        out.add(base::code_in(base::nccl::finding_codes(), f.value("code", std::string())), "host",
            f.value("message", std::string()), f);
    }
}

} // namespace

Collector allreduce_collector()
{
    Collector c;
    c.name = "allreduce";
    c.deep = true;
    c.collect = collect_allreduce;
    return c;
}

Probe allreduce_probe()
{
    Probe p;
    p.name = "allreduce";
    p.summary = "deep: NCCL all-reduce bus bandwidth over the node's GPUs, and the transports NCCL chose";
    p.collectors = {"allreduce"};
    p.deep = true;
    p.judge = judge_allreduce;
    p.codes = {
        {"allreduce.busbw_ok", Severity::pass, "NCCL all-reduce bus bandwidth is at or above its floor",
            "One process drove every GPU (ncclCommInitAll) through warm-up and timed float32 all-reduces of "
            "[deep] allreduce_mib MiB per GPU, like nccl-tests' all_reduce_perf at one large size. busbw = "
            "algbw × 2(n−1)/n, the rate each GPU's links carry, comparable across GPU counts. The floor is the "
            "policy's for the GPU model and this GPU count; without one the number is reported, not judged. With "
            "NVLink SHARP (NVLS) busbw can exceed the link rate.",
            ""},
        {"allreduce.busbw_low", Severity::fail, "NCCL all-reduce bus bandwidth is below the floor",
            "The all-reduce ran slower than the policy's allreduce_busbw_gbps for this GPU model and count. "
            "Multi-GPU training steps slow with it. Causes: a degraded NVLink or NVSwitch, NCCL falling back to "
            "SHM or PCIe (the transports and nccl.* findings beside it say), NCCL variables that restrict it, or "
            "another job on the GPUs.",
            "look at the transports below and the bandwidth probe's peer copies; check 'nvidia-smi nvlink -s', "
            "the NVSwitch fabric manager, and NCCL variables that restrict it (NCCL_P2P_DISABLE, "
            "NCCL_P2P_LEVEL, NCCL_ALGO, NCCL_PROTO); compare with nccl-tests all_reduce_perf -b 1G -e 1G -g N"},
        {"allreduce.transports", Severity::pass, "the transports NCCL chose between the GPUs",
            "Read from NCCL's own INFO log of the all-reduce (the same reader as gpudoctor nccl-log). nccl.* "
            "findings beside it flag transports worse than the hardware allows.",
            ""},
        {"allreduce.single_gpu", Severity::skip, "all-reduce not measured: one GPU",
            "An all-reduce needs at least two GPUs.", ""},
        {"allreduce.not_measured", Severity::skip, "all-reduce not measured",
            "No CUDA driver, no GPU visible to CUDA, or no NCCL library (libnccl.so.2, or GPUKIT_NCCL_LIBRARY) "
            "to run it with.",
            "install NCCL (libnccl2) or point GPUKIT_NCCL_LIBRARY at the libnccl.so.2 your framework uses"},
    };
    return p;
}

} // namespace doctor::probes
