#include "doctor/probes/gpu_facts.hpp"
#include "doctor/probes/table.hpp"

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

/// Whether an optional count is known and above zero.
template <typename T> bool above_zero(const std::optional<T>& n)
{
    return n && *n > 0;
}

void judge_gpu(const facts::NvmlGpu& g, const Policy& policy, Findings& out)
{
    const std::string who = gpu_subject(g);
    const nlohmann::json facts = facts::write(g);
    const std::size_t before = out.size();
    auto add = [&](const char* code, std::string message) { out.add(code, who, std::move(message), facts); };
    // NVML keeps two counts: since the last driver load or reset (volatile) and over the GPU's
    // life (aggregate), which nothing clears. Errors now fail; a history alone warns.
    const std::uint64_t lifetime = g.ecc_uncorrected.value_or(0);
    if (above_zero(g.ecc_uncorrected_volatile)) {
        add("gpus.ecc_uncorrected",
            fmt::format("{} uncorrected ECC errors since the last reset ({} since manufacture)",
                *g.ecc_uncorrected_volatile, lifetime));
    } else if (lifetime > 0) {
        add("gpus.ecc_uncorrected_history",
            g.ecc_uncorrected_volatile
                ? fmt::format("{} uncorrected ECC errors since manufacture; 0 since the last reset", lifetime)
                : fmt::format("{} uncorrected ECC errors since manufacture; NVML gives no count since the last reset",
                      lifetime));
    }
    if (g.ecc_enabled == false) {
        add("gpus.ecc_disabled", "ECC is disabled");
    }
    if (g.retired_pages_pending == true) {
        add("gpus.retired_pages_pending", "pages are waiting to be retired");
    }
    const unsigned retired = g.retired_pages_single.value_or(0) + g.retired_pages_double.value_or(0);
    if (retired >= max_retired_pages) {
        add("gpus.retired_pages_limit",
            fmt::format("{} retired pages, at or past the limit of {}", retired, max_retired_pages));
    }
    if (g.remapped_rows && g.remapped_rows->failure) {
        add("gpus.row_remap_failure", "a row remapping failed");
    } else if (g.remapped_rows && g.remapped_rows->pending) {
        add("gpus.row_remap_pending", "a row remapping is pending");
    }
    const std::uint64_t reasons = g.clock_event_reasons.value_or(0);
    std::string slow;
    for (auto [bit, name] : fault_reasons) {
        if ((reasons & bit) != 0) {
            slow += (slow.empty() ? "" : ", ") + std::string(name);
        }
    }
    if (!slow.empty()) {
        add("gpus.throttled", fmt::format("clocks held down: {} (reasons 0x{:x})", slow, reasons));
    }
    if (g.pcie_width && g.pcie_max_width && *g.pcie_width < *g.pcie_max_width) {
        add("gpus.pcie_width_degraded",
            fmt::format("PCIe link trained at x{} of x{}", *g.pcie_width, *g.pcie_max_width));
    }
    if (g.pcie_gen && g.pcie_max_gen && *g.pcie_gen < *g.pcie_max_gen && above_zero(g.utilization)) {
        add("gpus.pcie_gen_low",
            fmt::format("PCIe link at Gen{} of Gen{} while the GPU is busy", *g.pcie_gen, *g.pcie_max_gen));
    }
    // NVML's numbering (nvmlComputeMode_t, and nvidia-smi -c): 0 default, 1 exclusive thread
    // (retired), 2 prohibited, 3 exclusive process.
    const int mode = g.compute_mode.value_or(0);
    if (mode == 1 || mode == 3) {
        add("gpus.compute_exclusive", "compute mode is exclusive: one process at a time");
    } else if (mode == 2) {
        add("gpus.compute_prohibited", "compute mode is prohibited: no CUDA context can be created");
    }
    if (g.persistence == 0) {
        add("gpus.persistence_off", "persistence mode is off: every job pays GPU initialisation");
    }
    if (g.processes && *g.processes > policy.max_other_processes) {
        add("gpus.busy",
            fmt::format("{} compute process{} already on this GPU", *g.processes, *g.processes == 1 ? "" : "es"));
    }
    if (out.size() == before) {
        std::string text = g.name.value_or("GPU");
        if (g.memory_total) {
            text += ", " + gib(*g.memory_total);
        }
        if (g.ecc_enabled) {
            text += *g.ecc_enabled ? ", ECC on" : ", ECC off";
        }
        if (g.pcie_max_gen && g.pcie_width) {
            text += fmt::format(", PCIe Gen{} x{}", *g.pcie_max_gen, *g.pcie_width);
        }
        add("gpus.ok", text);
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
        {"gpus.ok", Severity::pass, "the GPU is healthy", "NVML reports no fault on this GPU.", ""},
        {"gpus.count", Severity::fail, "the number of GPUs NVML sees, against the expected count",
            "NVML sees fewer (or more) GPUs than expected. A GPU on the PCI bus that NVML does not list has usually "
            "fallen off the bus (Xid 79).",
            "with no GPU visible, install the NVIDIA driver (on a CPU node pass --expect-gpus 0); with GPUs missing, "
            "check dmesg for Xid 79 and reseat or replace the GPU, or set --expect-gpus (gpus.expected in the "
            "policy)",
            Severity::pass},
        {"gpus.none_expected", Severity::pass, "no GPUs, as expected", "The policy expects a CPU node.", ""},
        {"gpus.ecc_uncorrected", Severity::fail, "uncorrected ECC errors since the last reset",
            "The GPU memory had errors ECC could not correct since the driver was loaded or the GPU reset (NVML's "
            "volatile count); the data of a job running then may be wrong.",
            "drain the node; a GPU reset (nvidia-smi -r) or reboot clears this count and retires or remaps the failing "
            "memory; if errors come back after it, have the GPU replaced"},
        {"gpus.ecc_uncorrected_history", Severity::warn, "uncorrected ECC errors in the GPU's past",
            "NVML's lifetime (aggregate) count of uncorrected errors is not zero, while none happened since the last "
            "reset. No reset clears the lifetime count, so failing on it would drain the node for ever; the memory "
            "that failed has been retired or remapped.",
            "nothing clears the lifetime count (a reset does not); the failing memory was retired or remapped: watch "
            "retired pages and remapped rows, and have the GPU replaced if errors appear again since a reset"},
        {"gpus.ecc_disabled", Severity::warn, "ECC is off", "Memory errors go undetected.",
            "enable it with nvidia-smi -e 1 and reset the GPU, unless disabling it was deliberate"},
        {"gpus.retired_pages_pending", Severity::fail, "page retirement pending",
            "Retired pages take effect only after a reset.",
            "reset the GPU (nvidia-smi -r) or reboot: the retirement takes effect and the pending flag clears"},
        {"gpus.retired_pages_limit", Severity::fail, "too many retired pages",
            "At 63 retired pages (DCGM's limit) the GPU is due for replacement.", "have the GPU replaced (RMA)"},
        {"gpus.row_remap_failure", Severity::fail, "row remapping failed", "The GPU has no spare rows left.",
            "have the GPU replaced (RMA): it has run out of spare rows, and no reset clears this"},
        {"gpus.row_remap_pending", Severity::fail, "row remapping pending", "A remap takes effect only after a reset.",
            "reset the GPU (nvidia-smi -r) or reboot: the remapping takes effect and the pending flag clears"},
        {"gpus.throttled", Severity::fail, "clocks held down by the hardware",
            "Hardware slowdown, thermal slowdown or the power brake is active (clock event reasons 0x8, 0x20, 0x40, "
            "0x80). Idle and the software power cap are not faults.",
            "check cooling, power supply and the BMC's event log; nvidia-smi -q -d PERFORMANCE shows the reasons"},
        {"gpus.pcie_width_degraded", Severity::fail, "PCIe link narrower than it can be",
            "The link trained at fewer lanes than the GPU supports; host-device copies slow down in proportion.",
            "reseat the GPU or its riser, or check the slot; host-device bandwidth is cut in proportion"},
        {"gpus.pcie_gen_low", Severity::warn, "PCIe link slower than it can be while busy",
            "GPUs lower the link speed when idle; a busy GPU on a slower link is a fault.",
            "check BIOS PCIe settings and risers; an idle GPU lowering its link speed is normal, a busy one is not"},
        {"gpus.compute_exclusive", Severity::warn, "exclusive compute mode", "Only one process can use the GPU.",
            "fine for one rank per GPU; for --ranks-per-gpu or MPS clients, set it to default (nvidia-smi -c 0)"},
        {"gpus.compute_prohibited", Severity::fail, "compute prohibited", "No CUDA context can be created on the GPU.",
            "set it to default with nvidia-smi -c 0"},
        {"gpus.persistence_off", Severity::warn, "persistence mode off",
            "The driver tears the GPU down between jobs and every job "
            "pays its initialisation; NVML queries are slow too.",
            "turn it on with nvidia-smi -pm 1 (or run nvidia-persistenced)"},
        {"gpus.busy", Severity::warn, "other processes on the GPU",
            "Something already runs on the GPU before the job starts.",
            "find them with nvidia-smi and stop them, or expect to share the GPU's memory and time "
            "(gpus.max_other_processes in the policy allows some)"},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const bool none_expected = policy.expect_gpus && *policy.expect_gpus == 0;
        if (auto why = gpus_unavailable(facts)) {
            if (none_expected) {
                out.add("gpus.none_expected", "host", "no GPUs, as the policy expects");
            } else {
                out.add("gpus.count", "host", fmt::format("no GPUs visible: {}", *why));
            }
            return;
        }
        const std::vector<facts::NvmlGpu> none;
        const auto& gpus = facts.nvml().get()->gpus ? *facts.nvml().get()->gpus : none;
        std::set<std::string> seen;
        for (const auto& g : gpus) {
            seen.insert(g.bus_id);
        }
        std::string missing;
        // Only this machine's own PCI tree can show a GPU NVML lost; a --topology file describes
        // another machine.
        if (const facts::TopologyFacts& topology = *facts.topology().get(); topology.live()) {
            for (const auto& g : topology.gpus) {
                if (seen.count(g.bus_id) == 0) {
                    missing += (missing.empty() ? "" : ", ") + g.bus_id;
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
            out.add("gpus.count", "host", fmt::format("{} GPU{} visible, {}{}", n, n == 1 ? "" : "s", expected, extra),
                {{"visible", n}, {"missing", missing}});
        } else if (none_expected) {
            out.add("gpus.none_expected", "host", "NVML sees no GPU, as the policy expects", {{"visible", n}});
        } else {
            out.add(Severity::pass, "gpus.count", "host",
                fmt::format("{} GPU{}{}", n, n == 1 ? "" : "s", policy.expect_gpus ? fmt::format(", as expected") : ""),
                {{"visible", n}});
        }
        for (const auto& g : gpus) {
            judge_gpu(g, policy, out);
        }
    };
    return p;
}

} // namespace doctor::probes
