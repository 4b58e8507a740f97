#include "base/error.hpp"
#include "base/nvml.hpp"
#include "base/sysroot.hpp"
#include "doctor/probes/table.hpp"

#include <regex>
#include <tuple>

namespace doctor::probes {

namespace {

using namespace base::nvml_abi;

nlohmann::json gpu_facts(const base::Nvml& nvml, const base::NvmlGpu& g)
{
    const auto& api = nvml.api();
    Device d = nvml.handle(g.index);
    nlohmann::json out = {{"index", g.index}, {"bus_id", g.bus_id.to_string()}, {"name", g.name}, {"uuid", g.uuid},
        {"memory_total", g.memory_total ? nlohmann::json(*g.memory_total) : nlohmann::json(nullptr)}};
    int mode = 0;
    if (api.compute_mode != nullptr && api.compute_mode(d, &mode) == success) {
        out["compute_mode"] = mode;
    }
    if (api.persistence_mode != nullptr && api.persistence_mode(d, &mode) == success) {
        out["persistence"] = mode;
    }
    if (api.running_processes != nullptr) {
        unsigned int count = 0;
        Return rc = api.running_processes(d, &count, nullptr);
        if (rc == success || rc == error_insufficient_size) {
            out["processes"] = count;
        }
    }
    int current = 0, pending = 0;
    if (api.ecc_mode != nullptr && api.ecc_mode(d, &current, &pending) == success) {
        out["ecc_enabled"] = current != 0;
        // Both counters: the lifetime one (aggregate) never goes down, the volatile one starts
        // again at every driver load or GPU reset.
        constexpr std::tuple<int, int, const char*> counters[] = {
            {memory_error_corrected, ecc_counter_aggregate, "ecc_corrected"},
            {memory_error_uncorrected, ecc_counter_aggregate, "ecc_uncorrected"},
            {memory_error_corrected, ecc_counter_volatile, "ecc_corrected_volatile"},
            {memory_error_uncorrected, ecc_counter_volatile, "ecc_uncorrected_volatile"},
        };
        for (const auto& [type, counter, key] : counters) {
            unsigned long long n = 0;
            if (api.total_ecc_errors != nullptr && api.total_ecc_errors(d, type, counter, &n) == success) {
                out[key] = n;
            }
        }
    }
    if (api.retired_pages != nullptr) {
        for (auto [cause, key] : {std::pair{page_retirement_single_bit, "retired_pages_single"},
                 std::pair{page_retirement_double_bit, "retired_pages_double"}}) {
            unsigned int count = 0;
            Return rc = api.retired_pages(d, cause, &count, nullptr);
            if (rc == success || rc == error_insufficient_size) {
                out[key] = count;
            }
        }
    }
    if (api.retired_pages_pending != nullptr && api.retired_pages_pending(d, &pending) == success) {
        out["retired_pages_pending"] = pending != 0;
    }
    unsigned int corr = 0, unc = 0, rpending = 0, failure = 0;
    if (api.remapped_rows != nullptr && api.remapped_rows(d, &corr, &unc, &rpending, &failure) == success) {
        out["remapped_rows"] = {
            {"corrected", corr}, {"uncorrected", unc}, {"pending", rpending != 0}, {"failure", failure != 0}};
    }
    unsigned long long reasons = 0;
    if (api.clock_event_reasons != nullptr && api.clock_event_reasons(d, &reasons) == success) {
        out["clock_event_reasons"] = reasons;
    }
    for (auto [fn, key] : {std::pair{api.pcie_gen, "pcie_gen"}, std::pair{api.pcie_max_gen, "pcie_max_gen"},
             std::pair{api.pcie_width, "pcie_width"}, std::pair{api.pcie_max_width, "pcie_max_width"}}) {
        unsigned int v = 0;
        if (fn != nullptr && fn(d, &v) == success) {
            out[key] = v;
        }
    }
    Utilization u{};
    if (api.utilization != nullptr && api.utilization(d, &u) == success) {
        out["utilization"] = u.gpu;
    }
    if (api.nvlink_state != nullptr && api.nvlink_remote_pci != nullptr) {
        nlohmann::json links = nlohmann::json::array();
        for (const unsigned link : base::active_nvlinks(api, d).value_or(std::vector<unsigned>{})) {
            PciInfo pci{};
            if (api.nvlink_remote_pci(d, link, &pci) == success) {
                auto remote = base::PciAddress::parse(pci.bus_id);
                links.push_back(remote ? remote->to_string() : std::string(pci.bus_id));
            }
        }
        out["nvlinks"] = links;
    }
    return out;
}

} // namespace

// The NVIDIA driver (kernel module files) and everything NVML says about the GPUs: health
// counters, PCIe links, peer-to-peer status and the PCI path between each pair.
Collector nvml_collector()
{
    return {
        "nvml", [](const CollectContext& ctx) {
            nlohmann::json out;
            base::Sysroot root(ctx.sysroot);
            auto version_file = root.read_line("/proc/driver/nvidia/version");
            out["driver_file"] = version_file ? nlohmann::json(*version_file) : nlohmann::json(nullptr);
            if (auto module = root.read_line("/sys/module/nvidia/version")) {
                out["kernel_module_version"] = *module;
            } else if (version_file) {
                std::smatch m;
                if (std::regex_search(*version_file, m, std::regex(R"((\d+\.\d+(\.\d+)?))"))) {
                    out["kernel_module_version"] = m[1].str();
                }
            }
            std::string file = base::Nvml::default_file();
            if (const char* forced = ctx.getenv("GPUKIT_NVML_LIBRARY"); forced != nullptr && *forced != '\0') {
                file = forced;
            }
            out["nvml_library"] = file;
            try {
                base::Nvml nvml = base::Nvml::load(file);
                out["nvml_loaded"] = true;
                out["driver_version"] =
                    nvml.driver_version() ? nlohmann::json(*nvml.driver_version()) : nlohmann::json(nullptr);
                int cuda = 0;
                if (nvml.api().cuda_driver_version != nullptr && nvml.api().cuda_driver_version(&cuda) == success) {
                    out["cuda_driver_version"] = cuda;
                }
                auto gpus = nvml.gpus();
                nlohmann::json list = nlohmann::json::array();
                for (const auto& g : gpus) {
                    list.push_back(gpu_facts(nvml, g));
                }
                out["gpus"] = list;
                nlohmann::json pairs = nlohmann::json::array();
                const auto& api = nvml.api();
                for (unsigned a = 0; a < gpus.size(); ++a) {
                    for (unsigned b = a + 1; b < gpus.size(); ++b) {
                        Device da = nvml.handle(a);
                        Device db = nvml.handle(b);
                        nlohmann::json pair = {{"a", a}, {"b", b}};
                        int status = 0;
                        if (api.p2p_status != nullptr && api.p2p_status(da, db, p2p_caps_read, &status) == success) {
                            pair["p2p_read"] = status;
                        }
                        if (api.p2p_status != nullptr && api.p2p_status(da, db, p2p_caps_write, &status) == success) {
                            pair["p2p_write"] = status;
                        }
                        int level = 0;
                        if (api.common_ancestor != nullptr && api.common_ancestor(da, db, &level) == success) {
                            pair["ancestor"] = level;
                        }
                        pairs.push_back(pair);
                    }
                }
                out["pairs"] = pairs;
            } catch (const base::Error& e) {
                out["nvml_loaded"] = false;
                out["nvml_error"] = e.what();
            }
            return out;
        }};
}

} // namespace doctor::probes
