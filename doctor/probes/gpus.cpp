#include "doctor/probes/checks.hpp"
#include "doctor/probes/gpu_facts.hpp"

#include <fmt/format.h>
#include <set>

namespace doctor::probes {

namespace {

// Clock event reasons that mean the hardware is slowing the GPU down (nvml.h); idle (0x1),
// application clocks (0x2) and the software power cap (0x4) are normal.
constexpr std::pair<unsigned long long, const char*> fault_reasons[] = {
    {0x8, "hardware slowdown"},
    {0x20, "software thermal slowdown"},
    {0x40, "hardware thermal slowdown"},
    {0x80, "hardware power brake"},
};

constexpr unsigned max_retired_pages = 63; // DCGM_LIMIT_MAX_RETIRED_PAGES

std::string gib(unsigned long long bytes)
{
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ULL << 30));
}

void judge_gpu(const nlohmann::json& g, const Policy& policy, std::vector<Finding>& out)
{
    const std::string who = gpu_subject(g);
    const std::size_t before = out.size();
    auto add = [&](const char* code, Severity s, std::string message, std::string remedy) {
        out.push_back({code, s, who, std::move(message), std::move(remedy), g});
    };
    // NVML keeps two counts: since the last driver load or reset (volatile) and over the GPU's
    // life (aggregate), which nothing clears. Errors now fail; a history alone warns.
    const unsigned long long lifetime = g.value("ecc_uncorrected", 0ULL);
    const bool since_reset_known = g.contains("ecc_uncorrected_volatile") && !g["ecc_uncorrected_volatile"].is_null();
    const unsigned long long since_reset =
        since_reset_known ? g["ecc_uncorrected_volatile"].get<unsigned long long>() : 0;
    if (since_reset > 0) {
        add("gpus.ecc_uncorrected", Severity::fail,
            fmt::format("{} uncorrected ECC errors since the last reset ({} since manufacture)", since_reset, lifetime),
            "drain the node; a GPU reset (nvidia-smi -r) or reboot clears this count and retires or remaps the failing "
            "memory; if errors come back after it, have the GPU replaced");
    } else if (lifetime > 0) {
        add("gpus.ecc_uncorrected_history", Severity::warn,
            since_reset_known
                ? fmt::format("{} uncorrected ECC errors since manufacture; 0 since the last reset", lifetime)
                : fmt::format("{} uncorrected ECC errors since manufacture; NVML gives no count since the last reset",
                      lifetime),
            "nothing clears the lifetime count (a reset does not); the failing memory was retired or remapped: watch "
            "retired pages and remapped rows, and have the GPU replaced if errors appear again since a reset");
    }
    if (g.contains("ecc_enabled") && !g["ecc_enabled"].get<bool>()) {
        add("gpus.ecc_disabled", Severity::warn, "ECC is disabled",
            "enable it with nvidia-smi -e 1 and reset the GPU, unless disabling it was deliberate");
    }
    if (g.value("retired_pages_pending", false)) {
        add("gpus.retired_pages_pending", Severity::fail, "pages are waiting to be retired",
            "reset the GPU (nvidia-smi -r) or reboot: the retirement takes effect and the pending flag clears");
    }
    const unsigned retired = g.value("retired_pages_single", 0U) + g.value("retired_pages_double", 0U);
    if (retired >= max_retired_pages) {
        add("gpus.retired_pages_limit", Severity::fail,
            fmt::format("{} retired pages, at or past the limit of {}", retired, max_retired_pages),
            "have the GPU replaced (RMA)");
    }
    if (g.contains("remapped_rows")) {
        const auto& r = g["remapped_rows"];
        if (r.value("failure", false)) {
            add("gpus.row_remap_failure", Severity::fail, "a row remapping failed",
                "have the GPU replaced (RMA): it has run out of spare rows, and no reset clears this");
        } else if (r.value("pending", false)) {
            add("gpus.row_remap_pending", Severity::fail, "a row remapping is pending",
                "reset the GPU (nvidia-smi -r) or reboot: the remapping takes effect and the pending flag clears");
        }
    }
    const unsigned long long reasons = g.value("clock_event_reasons", 0ULL);
    std::string slow;
    for (auto [bit, name] : fault_reasons) {
        if ((reasons & bit) != 0) {
            slow += (slow.empty() ? "" : ", ") + std::string(name);
        }
    }
    if (!slow.empty()) {
        add("gpus.throttled", Severity::fail, fmt::format("clocks held down: {} (reasons 0x{:x})", slow, reasons),
            "check cooling, power supply and the BMC's event log; nvidia-smi -q -d PERFORMANCE shows the reasons");
    }
    if (g.contains("pcie_width") && g.contains("pcie_max_width") &&
        g["pcie_width"].get<unsigned>() < g["pcie_max_width"].get<unsigned>()) {
        add("gpus.pcie_width_degraded", Severity::fail,
            fmt::format("PCIe link trained at x{} of x{}", g["pcie_width"].get<unsigned>(),
                g["pcie_max_width"].get<unsigned>()),
            "reseat the GPU or its riser, or check the slot; host-device bandwidth is cut in proportion");
    }
    if (g.contains("pcie_gen") && g.contains("pcie_max_gen") &&
        g["pcie_gen"].get<unsigned>() < g["pcie_max_gen"].get<unsigned>() && g.value("utilization", 0U) > 0) {
        add("gpus.pcie_gen_low", Severity::warn,
            fmt::format("PCIe link at Gen{} of Gen{} while the GPU is busy", g["pcie_gen"].get<unsigned>(),
                g["pcie_max_gen"].get<unsigned>()),
            "check BIOS PCIe settings and risers; an idle GPU lowering its link speed is normal, a busy one is not");
    }
    const int mode = g.value("compute_mode", 0);
    if (mode == 2 || mode == 1) {
        add("gpus.compute_exclusive", Severity::warn, "compute mode is exclusive: one process at a time",
            "fine for one rank per GPU; for --ranks-per-gpu or MPS clients, set it to default (nvidia-smi -c 0)");
    } else if (mode == 3) {
        add("gpus.compute_prohibited", Severity::fail, "compute mode is prohibited: no CUDA context can be created",
            "set it to default with nvidia-smi -c 0");
    }
    if (g.contains("persistence") && g["persistence"].get<int>() == 0) {
        add("gpus.persistence_off", Severity::warn, "persistence mode is off: every job pays GPU initialisation",
            "turn it on with nvidia-smi -pm 1 (or run nvidia-persistenced)");
    }
    const unsigned processes = g.value("processes", 0U);
    if (processes > policy.max_other_processes) {
        add("gpus.busy", Severity::warn,
            fmt::format("{} compute process{} already on this GPU", processes, processes == 1 ? "" : "es"),
            "find them with nvidia-smi and stop them, or expect to share the GPU's memory and time");
    }
    if (out.size() == before) {
        std::string text = g.value("name", std::string("GPU"));
        if (g.contains("memory_total") && !g["memory_total"].is_null()) {
            text += ", " + gib(g["memory_total"].get<unsigned long long>());
        }
        if (g.contains("ecc_enabled")) {
            text += g["ecc_enabled"].get<bool>() ? ", ECC on" : ", ECC off";
        }
        if (g.contains("pcie_max_gen") && g.contains("pcie_width")) {
            text += fmt::format(", PCIe Gen{} x{}", g["pcie_max_gen"].get<unsigned>(), g["pcie_width"].get<unsigned>());
        }
        add("gpus.ok", Severity::pass, text, "");
    }
}

} // namespace

Probe gpus_probe()
{
    Probe p;
    p.name = "gpus";
    p.summary = "GPU count, memory, ECC and retired pages, row remapping, throttling, PCIe link, modes, busy GPUs";
    p.collectors = {"nvml", "topology"};
    p.codes = {
        {"gpus.ok", "the GPU is healthy", "NVML reports no fault on this GPU.", ""},
        {"gpus.count", "the number of GPUs NVML sees, against the expected count",
            "NVML sees fewer (or more) GPUs than expected. A GPU on the PCI bus that NVML does not list has usually "
            "fallen off the bus (Xid 79).",
            "check dmesg for Xid 79, reseat or replace the GPU, or set gpus.expected / --expect-gpus"},
        {"gpus.none_expected", "no GPUs, as expected", "The policy expects a CPU node.", ""},
        {"gpus.ecc_uncorrected", "uncorrected ECC errors since the last reset",
            "The GPU memory had errors ECC could not correct since the driver was loaded or the GPU reset (NVML's "
            "volatile count); the data of a job running then may be wrong.",
            "reset the GPU, which clears the count and retires or remaps the memory; replace it if errors return"},
        {"gpus.ecc_uncorrected_history", "uncorrected ECC errors in the GPU's past",
            "NVML's lifetime (aggregate) count of uncorrected errors is not zero, while none happened since the last "
            "reset. No reset clears the lifetime count, so failing on it would drain the node for ever; the memory "
            "that failed has been retired or remapped.",
            "watch retired pages and remapped rows; replace the GPU if errors appear again since a reset"},
        {"gpus.ecc_disabled", "ECC is off", "Memory errors go undetected.", "nvidia-smi -e 1, then reset the GPU"},
        {"gpus.retired_pages_pending", "page retirement pending", "Retired pages take effect only after a reset.",
            "reset the GPU or reboot"},
        {"gpus.retired_pages_limit", "too many retired pages",
            "At 63 retired pages (DCGM's limit) the GPU is due for replacement.", "RMA the GPU"},
        {"gpus.row_remap_failure", "row remapping failed", "The GPU has no spare rows left.", "RMA the GPU"},
        {"gpus.row_remap_pending", "row remapping pending", "A remap takes effect only after a reset.",
            "reset the GPU or reboot"},
        {"gpus.throttled", "clocks held down by the hardware",
            "Hardware slowdown, thermal slowdown or the power brake is active (clock event reasons 0x8, 0x20, 0x40, "
            "0x80). Idle and the software power cap are not faults.",
            "check cooling, power and the BMC log"},
        {"gpus.pcie_width_degraded", "PCIe link narrower than it can be",
            "The link trained at fewer lanes than the GPU supports; host-device copies slow down in proportion.",
            "reseat the GPU or riser"},
        {"gpus.pcie_gen_low", "PCIe link slower than it can be while busy",
            "GPUs lower the link speed when idle; a busy GPU on a slower link is a fault.", "check BIOS and risers"},
        {"gpus.compute_exclusive", "exclusive compute mode", "Only one process can use the GPU.",
            "nvidia-smi -c 0 when GPUs are to be shared"},
        {"gpus.compute_prohibited", "compute prohibited", "No CUDA context can be created on the GPU.",
            "nvidia-smi -c 0"},
        {"gpus.persistence_off", "persistence mode off",
            "The driver tears the GPU down between jobs and every job "
            "pays its initialisation; NVML queries are slow too.",
            "nvidia-smi -pm 1 or nvidia-persistenced"},
        {"gpus.busy", "other processes on the GPU", "Something already runs on the GPU before the job starts.",
            "stop it, or raise gpus.max_other_processes"},
    };
    p.judge = [](const Facts& facts, const Policy& policy) {
        std::vector<Finding> out;
        const bool none_expected = policy.expect_gpus && *policy.expect_gpus == 0;
        if (auto why = gpus_unavailable(facts)) {
            if (none_expected) {
                out.push_back(
                    {"gpus.none_expected", Severity::pass, "host", "no GPUs, as the policy expects", "", nullptr});
            } else {
                out.push_back({"gpus.count", Severity::fail, "host", fmt::format("no GPUs visible: {}", *why),
                    "install the NVIDIA driver; on a CPU node pass --expect-gpus 0", nullptr});
            }
            return out;
        }
        const auto& gpus = (*collector_facts(facts, "nvml"))["gpus"];
        std::set<std::string> seen;
        for (const auto& g : gpus) {
            seen.insert(g.value("bus_id", std::string()));
        }
        std::string missing;
        // Only this machine's own PCI tree can show a GPU NVML lost; a --topology file describes
        // another machine.
        const auto* topology = collector_facts(facts, "topology");
        if (topology != nullptr && topology->contains("gpus") && topology->value("source", std::string()) == "live") {
            for (const auto& g : (*topology)["gpus"]) {
                if (seen.count(g.value("bus_id", std::string())) == 0) {
                    missing += (missing.empty() ? "" : ", ") + g.value("bus_id", std::string());
                }
            }
        }
        const std::size_t n = gpus.size();
        const bool count_wrong = policy.expect_gpus ? n != *policy.expect_gpus : n == 0;
        if (count_wrong || !missing.empty()) {
            std::string expected = policy.expect_gpus ? fmt::format("expected {}", *policy.expect_gpus)
                                                      : std::string("expected at least one");
            std::string extra = missing.empty()
                ? ""
                : fmt::format("; on the PCI bus but not seen by NVML: {} (fallen off the bus?)", missing);
            out.push_back({"gpus.count", Severity::fail, "host",
                fmt::format("{} GPU{} visible, {}{}", n, n == 1 ? "" : "s", expected, extra),
                "check dmesg for Xid 79 and reseat or replace the GPU, or set --expect-gpus",
                {{"visible", n}, {"missing", missing}}});
        } else if (none_expected) {
            out.push_back({"gpus.none_expected", Severity::pass, "host", "NVML sees no GPU, as the policy expects", "",
                {{"visible", n}}});
        } else {
            out.push_back({"gpus.count", Severity::pass, "host",
                fmt::format("{} GPU{}{}", n, n == 1 ? "" : "s", policy.expect_gpus ? fmt::format(", as expected") : ""),
                "", {{"visible", n}}});
        }
        for (const auto& g : gpus) {
            judge_gpu(g, policy, out);
        }
        return out;
    };
    return p;
}

} // namespace doctor::probes
