#include "base/error.hpp"
#include "base/gpu_bandwidth.hpp"
#include "base/pci_address.hpp"
#include "base/sysroot.hpp"
#include "base/topology.hpp"
#include "doctor/probes/deep.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <map>

namespace doctor::probes {

std::string library_file(const CollectContext& ctx, const char* variable, const char* soname)
{
    const char* file = ctx.getenv(variable);
    return file != nullptr && *file != '\0' ? file : soname;
}

CudaStart start_cuda(const CollectContext& ctx)
{
    CudaStart start;
    try {
        start.cuda.emplace(base::Cuda::load(library_file(ctx, "GPUKIT_CUDA_LIBRARY", "libcuda.so.1")));
    } catch (const base::Error& e) {
        start.skipped = fmt::format("no CUDA driver library: {}", e.what());
        return start;
    }
    constexpr base::cuda_abi::Result no_device = 100; // CUDA_ERROR_NO_DEVICE
    const base::cuda_abi::Result rc = start.cuda->api().init(0);
    if (rc == no_device) {
        start.skipped = fmt::format("CUDA sees no GPU ({})", start.cuda->describe(rc));
        start.cuda.reset();
        return start;
    }
    start.cuda->check(rc, fmt::format("cuInit in {}", start.cuda->file()));
    return start;
}

std::string gbps_text(double gbps)
{
    return gbps >= 100 ? fmt::format("{:.0f}", gbps)
        : gbps >= 10   ? fmt::format("{:.1f}", gbps)
                       : fmt::format("{:.2f}", gbps);
}

namespace {

// A number at the start of a sysfs value ("32.0 GT/s PCIe", "16"), or nullopt ("Unknown").
std::optional<double> leading_number(const std::optional<std::string>& text)
{
    if (!text) {
        return std::nullopt;
    }
    double value = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end == text->data() || !(value > 0)) {
        return std::nullopt;
    }
    return value;
}

// The GPU's PCIe link from sysfs: maximum and current speed (GT/s) and width, and the maximum
// link's rate after line encoding.
nlohmann::json pcie_facts(const base::Sysroot& root, const std::string& bus_id)
{
    auto address = base::PciAddress::parse(bus_id);
    if (!address) {
        return nullptr;
    }
    const std::string dir = "/sys/bus/pci/devices/" + address->to_string() + "/";
    nlohmann::json out = nlohmann::json::object();
    auto put = [&](const char* key, const char* file) {
        if (auto v = leading_number(root.read_line(dir + file))) {
            out[key] = *v;
        }
    };
    put("max_gt", "max_link_speed");
    put("max_width", "max_link_width");
    put("gt", "current_link_speed");
    put("width", "current_link_width");
    if (out.contains("max_gt") && out.contains("max_width")) {
        if (auto gbps = base::pcie_link_gbps(out["max_gt"].get<double>(), out["max_width"].get<unsigned>())) {
            out["max_gbps"] = *gbps;
        }
    }
    return out;
}

// "Gen5 x16" for a link in GT/s and lanes.
std::string link_text(const nlohmann::json& pcie, const char* gt_key, const char* width_key)
{
    static const std::map<int, int> generation = {{25, 1}, {50, 2}, {80, 3}, {160, 4}, {320, 5}, {640, 6}};
    if (!pcie.is_object() || !pcie.contains(gt_key) || !pcie.contains(width_key)) {
        return "?";
    }
    const int key = static_cast<int>(pcie[gt_key].get<double>() * 10 + 0.5);
    auto it = generation.find(key);
    return fmt::format("{} x{}",
        it != generation.end() ? fmt::format("Gen{}", it->second) : fmt::format("{} GT/s", pcie[gt_key].get<double>()),
        pcie[width_key].get<unsigned>());
}

std::optional<double> median_gbps(const nlohmann::json& rate)
{
    if (!rate.is_object() || !rate.contains("median_gbps")) {
        return std::nullopt;
    }
    return rate["median_gbps"].get<double>();
}

// The median of the values other than the one at `skip`; nullopt when there are none.
std::optional<double> median_of_others(const std::vector<std::optional<double>>& values, std::size_t skip)
{
    std::vector<double> others;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i != skip && values[i]) {
            others.push_back(*values[i]);
        }
    }
    if (others.empty()) {
        return std::nullopt;
    }
    return base::median(others);
}

std::string range_text(const std::vector<double>& values)
{
    auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    return *lo == *hi || gbps_text(*lo) == gbps_text(*hi) ? gbps_text(*lo)
                                                          : fmt::format("{}–{}", gbps_text(*lo), gbps_text(*hi));
}

struct Floor {
    double gbps = 0;
    std::string source; ///< "the H100 floor", "70% of its PCIe Gen5 x16 link (63.0 GB/s)"
};

/// One kind of copy of every GPU: its rate key in the facts, the floor field, and its codes.
struct Kind {
    const char* key;
    const char* label;
    const char* low_code;
    std::optional<double> DeepFloor::*floor;
    bool pcie; ///< host copies: without a model floor, judged against the PCIe link
};

constexpr Kind kinds[] = {
    {"h2d", "host→device", "bandwidth.h2d_low", &DeepFloor::h2d_gbps, true},
    {"d2h", "device→host", "bandwidth.d2h_low", &DeepFloor::d2h_gbps, true},
    {"d2d", "device-local copy", "bandwidth.d2d_low", &DeepFloor::d2d_gbps, false},
};

std::optional<Floor> floor_of(const Kind& kind, const nlohmann::json& gpu, const Policy& policy)
{
    const DeepFloor* model = policy.floor_for(gpu.value("name", std::string()));
    if (model != nullptr && (model->*kind.floor)) {
        return Floor{*(model->*kind.floor), fmt::format("{}'s floor for {}", model->source, model->model)};
    }
    const nlohmann::json pcie = gpu.value("pcie", nlohmann::json());
    if (kind.pcie && pcie.is_object() && pcie.contains("max_gbps") && policy.pcie_fraction > 0) {
        const double link = pcie["max_gbps"].get<double>();
        return Floor{policy.pcie_fraction * link,
            fmt::format("{:.0f}% of its PCIe {} link ({} GB/s)", policy.pcie_fraction * 100,
                link_text(pcie, "max_gt", "max_width"), gbps_text(link))};
    }
    return std::nullopt;
}

void judge_gpus(const nlohmann::json& gpus, const Policy& policy, Findings& out)
{
    std::vector<bool> flagged(gpus.size(), false);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        const std::string error = gpus[i].value("error", std::string());
        if (!error.empty()) {
            flagged[i] = true;
            out.add("bandwidth.measure_failed", gpu_subject(gpus[i]),
                fmt::format("a copy could not be measured: {}", error), {{"error", error}});
        }
    }
    std::vector<std::string> notes;
    for (const Kind& kind : kinds) {
        std::vector<std::optional<double>> values;
        for (const auto& g : gpus) {
            values.push_back(median_gbps(g.value(kind.key, nlohmann::json())));
        }
        std::vector<double> passing;
        std::vector<std::string> floors;
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            if (!values[i]) {
                continue;
            }
            const double v = *values[i];
            const auto floor = floor_of(kind, gpus[i], policy);
            nlohmann::json facts = {{"gbps", v}, {"direction", kind.key}, {"rate", gpus[i][kind.key]},
                {"pcie", gpus[i].value("pcie", nlohmann::json())}};
            if (floor && v < floor->gbps) {
                flagged[i] = true;
                facts["floor_gbps"] = floor->gbps;
                const nlohmann::json pcie = gpus[i].value("pcie", nlohmann::json());
                const std::string now = link_text(pcie, "gt", "width");
                const std::string max = link_text(pcie, "max_gt", "max_width");
                const bool slower_link = kind.pcie && now != "?" && max != "?" && now != max;
                out.add(kind.low_code, gpu_subject(gpus[i]),
                    fmt::format("{} copies run at {} GB/s, below {} GB/s ({}){}", kind.label, gbps_text(v),
                        gbps_text(floor->gbps), floor->source,
                        slower_link ? fmt::format("; sysfs shows the link at {} now, {} at most (an idle link may "
                                                  "slow down; a loaded one should not)",
                                          now, max)
                                    : ""),
                    facts);
                continue;
            }
            const auto others = median_of_others(values, i);
            if (others && v < policy.outlier_fraction * *others) {
                flagged[i] = true;
                facts["others_median_gbps"] = *others;
                out.add("bandwidth.outlier", gpu_subject(gpus[i]),
                    fmt::format("{} copies run at {} GB/s, {:.0f}% of the other GPUs' median ({} GB/s)", kind.label,
                        gbps_text(v), 100 * v / *others, gbps_text(*others)),
                    facts);
                continue;
            }
            passing.push_back(v);
            if (floor) {
                std::string text = fmt::format("{} GB/s, {}", gbps_text(floor->gbps), floor->source);
                if (std::find(floors.begin(), floors.end(), text) == floors.end()) {
                    floors.push_back(std::move(text));
                }
            }
        }
        if (!passing.empty()) {
            notes.push_back(fmt::format("{} {} GB/s{}", kind.label, range_text(passing),
                floors.empty() ? std::string(kind.pcie ? " (no floor: no model floor and no PCIe link in sysfs)" : "")
                               : fmt::format(" (floor {})", fmt::join(floors, "; "))));
        }
    }
    const auto clean = static_cast<std::size_t>(std::count(flagged.begin(), flagged.end(), false));
    if (clean > 0 && !notes.empty()) {
        nlohmann::json facts = nlohmann::json::array();
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            if (!flagged[i]) {
                facts.push_back(gpus[i]);
            }
        }
        out.add("bandwidth.gpu_ok", "host",
            fmt::format("{} {}: {}", clean, clean == 1 ? "GPU" : "GPUs", fmt::join(notes, ", ")), {{"gpus", facts}});
    }
}

void judge_peers(const nlohmann::json& bw, const Policy& policy, Findings& out)
{
    const auto& gpus = bw["gpus"];
    const nlohmann::json peers = bw.value("peers", nlohmann::json::array());
    if (gpus.size() < 2) {
        out.add("bandwidth.p2p_single_gpu", "host", "peer copies not measured: one GPU, so no GPU pairs");
        return;
    }
    std::map<int, const nlohmann::json*> by_index;
    for (const auto& g : gpus) {
        by_index[g.value("index", 0)] = &g;
    }
    auto pair_subject = [&](const nlohmann::json& p) {
        auto bus = [&](int i) {
            auto it = by_index.find(i);
            return it == by_index.end() ? std::string("?") : it->second->value("bus_id", std::string("?"));
        };
        const int a = p.value("src", 0);
        const int b = p.value("dst", 0);
        return fmt::format("gpu {} ({}) → gpu {} ({})", a, bus(a), b, bus(b));
    };
    std::vector<std::string> no_access;
    std::vector<std::optional<double>> values;
    for (const auto& p : peers) {
        values.push_back(p.value("access", false) ? median_gbps(p.value("bandwidth", nlohmann::json())) : std::nullopt);
        if (!p.value("access", false)) {
            no_access.push_back(fmt::format("{}→{}", p.value("src", 0), p.value("dst", 0)));
        }
    }
    if (!no_access.empty()) {
        out.add("bandwidth.p2p_unavailable", "host",
            fmt::format("CUDA gives no peer access for {} of {} GPU pairs ({}): their copies are staged through host "
                        "memory, and NCCL uses slower paths",
                no_access.size(), peers.size(), fmt::join(no_access, ", ")),
            {{"pairs", no_access}});
    }
    std::vector<double> passing;
    std::vector<double> latencies;
    std::string floor_note;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const auto& p = peers[i];
        const std::string error = p.value("error", std::string());
        if (!error.empty()) {
            out.add("bandwidth.measure_failed", pair_subject(p),
                fmt::format("peer copies could not be measured: {}", error), {{"error", error}});
            continue;
        }
        if (!values[i]) {
            continue;
        }
        const double v = *values[i];
        auto src = by_index.find(p.value("src", 0));
        const DeepFloor* model =
            src == by_index.end() ? nullptr : policy.floor_for(src->second->value("name", std::string()));
        if (model != nullptr && model->p2p_gbps && v < *model->p2p_gbps) {
            out.add("bandwidth.p2p_low", pair_subject(p),
                fmt::format("peer copies run at {} GB/s, below {} GB/s ({}'s floor for {})", gbps_text(v),
                    gbps_text(*model->p2p_gbps), model->source, model->model),
                p);
            continue;
        }
        const auto others = median_of_others(values, i);
        if (others && v < policy.outlier_fraction * *others) {
            out.add("bandwidth.outlier", pair_subject(p),
                fmt::format("peer copies run at {} GB/s, {:.0f}% of the other pairs' median ({} GB/s)", gbps_text(v),
                    100 * v / *others, gbps_text(*others)),
                p);
            continue;
        }
        if (model != nullptr && model->p2p_gbps) {
            floor_note = fmt::format(" (floor {} GB/s for {})", gbps_text(*model->p2p_gbps), model->model);
        }
        passing.push_back(v);
        if (p.contains("latency_us") && p["latency_us"].is_number()) {
            latencies.push_back(p["latency_us"].get<double>());
        }
    }
    if (!passing.empty()) {
        std::string latency;
        if (!latencies.empty()) {
            auto [lo, hi] = std::minmax_element(latencies.begin(), latencies.end());
            latency = *hi - *lo < 0.05 ? fmt::format(", latency {:.1f} µs", *lo)
                                       : fmt::format(", latency {:.1f}–{:.1f} µs", *lo, *hi);
        }
        out.add("bandwidth.p2p_ok", "host",
            fmt::format("{} GPU {}: peer copies {} GB/s{}{}", passing.size(), passing.size() == 1 ? "pair" : "pairs",
                range_text(passing), floor_note, latency),
            {{"pairs", passing.size()}});
    }
}

void judge_bandwidth(const Facts& facts, const Policy& policy, Findings& out)
{
    const nlohmann::json& bw = *collector_facts(facts, "bandwidth");
    if (bw.contains("skipped")) {
        out.add("bandwidth.not_measured", "host", fmt::format("not measured: {}", bw["skipped"].get<std::string>()));
        return;
    }
    judge_gpus(bw.value("gpus", nlohmann::json::array()), policy, out);
    judge_peers(bw, policy, out);
}

} // namespace

Collector bandwidth_collector()
{
    Collector c;
    c.name = "bandwidth";
    c.deep = true;
    c.collect = [](const CollectContext& ctx) -> nlohmann::json {
        CudaStart start = start_cuda(ctx);
        if (!start.cuda) {
            return {{"skipped", start.skipped}};
        }
        base::CopySettings settings;
        settings.bytes = ctx.policy.copy_bytes;
        settings.copies = ctx.policy.copies;
        settings.samples = ctx.policy.copy_samples;
        // Pinned host memory lands where the allocating thread's memory policy says, so the thread
        // moves next to each GPU before its copies, as nvbandwidth does.
        std::optional<base::Topology> topology;
        std::string unplaced = "not placed: --topology describes another machine";
        if (ctx.topology_file.empty()) {
            try {
                topology.emplace(base::Topology::load_live(true));
            } catch (const base::Error& e) {
                unplaced = fmt::format("not placed: {}", e.what());
            }
        }
        const base::NodeLayout layout = topology ? topology->layout() : base::NodeLayout{};
        auto place = [&](const base::GpuCopies& gpu) -> std::string {
            if (!topology) {
                return unplaced;
            }
            auto address = base::PciAddress::parse(gpu.bus_id);
            const base::PciFunction* f = address ? layout.find_pci(*address) : nullptr;
            if (f == nullptr || f->locality.cpus.empty()) {
                return "not placed: the topology does not show this GPU's CPUs";
            }
            try {
                base::bind_cpus(f->locality.cpus);
                base::bind_memory(f->locality.numa, base::MemoryPolicy::preferred);
            } catch (const base::Error& e) {
                return fmt::format("not placed: {}", e.what());
            }
            return fmt::format("CPUs {}, NUMA {}", f->locality.cpus.to_list(), fmt::join(f->locality.numa, ","));
        };
        const auto report = base::measure_bandwidth(
            *start.cuda, settings, [&](const std::string& step) { progress_line(ctx, "bandwidth: " + step); }, place);
        nlohmann::json out = base::to_json(report);
        const base::Sysroot root(ctx.sysroot);
        for (auto& g : out["gpus"]) {
            g["pcie"] = pcie_facts(root, g["bus_id"].get<std::string>());
        }
        return out;
    };
    return c;
}

Probe bandwidth_probe()
{
    Probe p;
    p.name = "bandwidth";
    p.summary = "deep: host↔device, device-local and GPU↔GPU copy bandwidth, measured";
    p.collectors = {"bandwidth"};
    p.deep = true;
    p.judge = judge_bandwidth;
    p.codes = {
        {"bandwidth.gpu_ok", Severity::pass, "copy bandwidth of the GPUs is at or above its floors",
            "Host→device and device→host copies through pinned host memory, and copies within each GPU's memory, "
            "were timed with CUDA events (after a warm-up; median of the samples) and reached the policy's floor for "
            "the GPU model, or else the policy's share of the GPU's PCIe link, and no GPU lagged far behind the "
            "others.",
            ""},
        {"bandwidth.h2d_low", Severity::fail, "host→device copies are slower than the floor",
            "Copies from pinned host memory to the GPU ran below the floor: the policy's per-model floor "
            "([[deep.floor]] h2d_gbps), or else [deep] pcie_fraction of the PCIe link sysfs reports for the GPU. "
            "Causes: a link trained at a lower generation or width (a bad riser, slot or BIOS setting), host "
            "memory on the far socket, or another job copying at the same time. Input pipelines and "
            "checkpoint loads slow down with it.",
            "check the GPU's PCIe link ('nvidia-smi -q -d PCIE' under load: it should run at its maximum generation "
            "and width), the slot and riser, BIOS PCIe settings, and that no other job copies at the same time"},
        {"bandwidth.d2h_low", Severity::fail, "device→host copies are slower than the floor",
            "As bandwidth.h2d_low, for copies from the GPU to pinned host memory (checkpoint saves, offloading).",
            "check the GPU's PCIe link ('nvidia-smi -q -d PCIE' under load: it should run at its maximum generation "
            "and width), the slot and riser, BIOS PCIe settings, and that no other job copies at the same time"},
        {"bandwidth.d2d_low", Severity::fail, "copies within the GPU's memory are slower than the floor",
            "A copy inside one GPU's memory ran below the policy's floor for the model ([[deep.floor]] d2d_gbps). "
            "Memory-bound kernels run at this speed: look for clock throttling, ECC errors or another process.",
            "check for clock throttling and ECC or row-remap errors (gpudoctor check: gpus), and that the GPU is idle"},
        {"bandwidth.outlier", Severity::warn, "one GPU or GPU pair is much slower than the others",
            "Its median rate is below [deep] outlier_fraction of the median of the other GPUs (or pairs). A "
            "synchronous job runs at the pace of its slowest GPU, so one slow link slows every rank.",
            "compare it with the others: its PCIe link and NUMA placement (gpudoctor topo; 'nvidia-smi -q -d PCIE'), "
            "throttling or errors on it; for a slow pair, a degraded NVLink or a slower path ('nvidia-smi nvlink -s')"},
        {"bandwidth.measure_failed", Severity::error, "a copy could not be measured",
            "An allocation or a copy failed, so this GPU or pair was not measured. Out of memory means other "
            "processes hold the GPU's memory; other errors point at the driver or the GPU.",
            "an out-of-memory error means other processes hold the GPU's memory (nvidia-smi shows them): run on an "
            "idle GPU or lower [deep] copy_mib in the policy; other CUDA errors: check dmesg for Xid errors, "
            "'nvidia-smi nvlink -s' and 'nvidia-smi topo -p2p rw'"},
        {"bandwidth.p2p_ok", Severity::pass, "peer copies between GPUs are at or above their floor",
            "Copies from each GPU's memory to every other GPU's (cuMemcpyPeerAsync with peer access enabled) "
            "reached the policy's floor for the model, where it has one, and no pair lagged far behind the others. "
            "The latency is the time of one 4-byte copy.",
            ""},
        {"bandwidth.p2p_low", Severity::fail, "peer copies between two GPUs are slower than the floor",
            "A pair's copies ran below the policy's p2p_gbps floor for the GPU model: on NVLink systems this is an "
            "inactive or degraded NVLink, or an NVSwitch fabric problem; NCCL's all-reduce slows with it.",
            "check the NVLinks of both GPUs ('nvidia-smi nvlink -s' for inactive links, 'nvidia-smi nvlink -e' "
            "for errors), the NVSwitch fabric manager (systemctl status nvidia-fabricmanager), and that no "
            "other job runs"},
        {"bandwidth.p2p_unavailable", Severity::warn, "CUDA gives no peer access between some GPUs",
            "cuDeviceCanAccessPeer said no for these pairs, so their copies (and NCCL's traffic) go through host "
            "memory.",
            "see the p2p probe's findings (ACS, IOMMU, GPUs on different sockets without NVLink) and "
            "'nvidia-smi topo -p2p rw'"},
        {"bandwidth.p2p_single_gpu", Severity::skip, "peer copies not measured: one GPU",
            "A node with one GPU has no pairs.", ""},
        {"bandwidth.not_measured", Severity::skip, "copy bandwidth not measured",
            "There was nothing to measure: no CUDA driver library (a CPU node) or no GPU visible to CUDA "
            "(CUDA_VISIBLE_DEVICES).",
            ""},
    };
    return p;
}

} // namespace doctor::probes
