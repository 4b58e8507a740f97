#include "base/gpu_inventory.hpp"

#include "base/error.hpp"
#include "base/nvml.hpp"
#include "base/process.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace base {

namespace {

void number_and_select(std::vector<Gpu>& gpus)
{
    std::sort(gpus.begin(), gpus.end(), [](const Gpu& a, const Gpu& b) { return a.bus_id < b.bus_id; });
    for (unsigned i = 0; i < gpus.size(); ++i) {
        gpus[i].physical_index = i;
        gpus[i].selector = gpus[i].uuid.empty() ? std::to_string(i) : gpus[i].uuid;
    }
}

bool starts_with(std::string_view text, std::string_view prefix)
{
    return text.substr(0, prefix.size()) == prefix;
}

std::string describe_gpus(const std::vector<Gpu>& all)
{
    std::string out;
    for (const auto& gpu : all) {
        out += fmt::format("{}{} {}", out.empty() ? "" : ", ", gpu.physical_index, gpu.bus_id.to_string());
    }
    return out.empty() ? "none" : out;
}

} // namespace

std::vector<Gpu> gpus_from_topology(const NodeLayout& layout)
{
    std::vector<Gpu> out;
    for (const auto& fn : layout.pci) {
        if (!fn.is_nvidia_gpu()) {
            continue;
        }
        Gpu gpu;
        gpu.bus_id = fn.address;
        gpu.name = fn.name.empty() ? fmt::format("NVIDIA [10de:{:04x}]", fn.device_id) : fn.name;
        gpu.uuid = fn.uuid;
        gpu.locality = fn.locality;
        gpu.hca = fn.nearest_hca;
        out.push_back(std::move(gpu));
    }
    number_and_select(out);
    return out;
}

Locality sysfs_locality(const PciAddress& address, const NodeLayout& layout, const Sysroot& sysroot)
{
    std::string dir = "/sys/bus/pci/devices/" + address.to_string();
    Locality out;
    out.source = "unknown";
    if (auto list = sysroot.read_line(dir + "/local_cpulist")) {
        try {
            out.cpus = CpuSet::parse(*list).intersect(layout.allowed);
        } catch (const Error&) {
            out.cpus = CpuSet();
        }
    }
    std::optional<unsigned> node;
    if (auto text = sysroot.read_line(dir + "/numa_node")) {
        int value = -1;
        auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
        if (ec == std::errc() && value >= 0) {
            node = static_cast<unsigned>(value);
        }
    }
    if (out.cpus.empty() && node) {
        for (const auto& n : layout.numa_nodes) {
            if (n.os_index == *node && n.has_cpus()) {
                out.cpus = n.cpus;
            }
        }
    }
    if (out.cpus.empty()) {
        return out;
    }
    out.numa = layout.numa_of(out.cpus);
    out.source = "sysfs";
    return out;
}

std::vector<Gpu> gpus_from_nvml(const std::vector<NvmlGpu>& nvml_gpus, const NodeLayout& layout, const Sysroot& sysroot)
{
    std::vector<Gpu> out;
    for (const auto& n : nvml_gpus) {
        Gpu gpu;
        gpu.bus_id = n.bus_id;
        gpu.name = n.name.empty() ? "NVIDIA GPU" : n.name;
        gpu.uuid = n.uuid;
        gpu.memory_total = n.memory_total;
        gpu.mig_uuids = n.mig_uuids;
        if (const PciFunction* fn = layout.find_pci(n.bus_id); fn != nullptr && fn->locality.known()) {
            gpu.locality = fn->locality;
            gpu.hca = fn->nearest_hca;
        } else {
            gpu.locality = sysfs_locality(n.bus_id, layout, sysroot);
            gpu.hca = gpu.locality.known() ? layout.nearest_hca(gpu.locality.cpus) : "";
        }
        out.push_back(std::move(gpu));
    }
    number_and_select(out);
    return out;
}

std::vector<Gpu> select_visible(const std::vector<Gpu>& all, std::string_view visible_devices)
{
    std::vector<Gpu> out;
    std::string_view rest = visible_devices;
    if (trim_blanks(rest).empty()) {
        return out;
    }
    while (true) {
        std::size_t comma = rest.find(',');
        std::string token(trim_blanks(rest.substr(0, comma)));
        const Gpu* match = nullptr;
        auto fail = [&](const std::string& why) {
            throw Error(fmt::format("CUDA_VISIBLE_DEVICES={}: entry {} {}; this node's GPUs are: {}",
                quote_input(visible_devices), quote_input(token), why, describe_gpus(all)));
        };
        if (token.empty()) {
            fail("is empty");
        }
        if (std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            unsigned index = 0;
            auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
            if (ec != std::errc() || index >= all.size()) {
                fail(fmt::format("is not a GPU index below {}", all.size()));
            }
            match = &all[index];
        } else if (starts_with(token, "GPU-")) {
            for (const auto& gpu : all) {
                if (!gpu.uuid.empty() && starts_with(gpu.uuid, token)) {
                    if (match != nullptr) {
                        fail("is a prefix of more than one GPU UUID");
                    }
                    match = &gpu;
                }
            }
            if (match == nullptr) {
                fail(std::any_of(all.begin(), all.end(), [](const Gpu& g) { return !g.uuid.empty(); })
                        ? "matches no GPU UUID"
                        : "is a UUID, and GPU UUIDs are only known through NVML, which is not available");
            }
        } else if (starts_with(token, "MIG-")) {
            std::string parent = token.substr(4);
            if (starts_with(parent, "GPU-")) {
                parent = parent.substr(0, parent.find('/'));
            }
            for (const auto& gpu : all) {
                bool is_parent = starts_with(token, "MIG-GPU-") && !gpu.uuid.empty() && gpu.uuid == parent;
                bool has_instance = std::find(gpu.mig_uuids.begin(), gpu.mig_uuids.end(), token) != gpu.mig_uuids.end();
                if (is_parent || has_instance) {
                    match = &gpu;
                }
            }
            if (match == nullptr) {
                fail("matches no MIG instance NVML reports");
            }
        } else {
            fail("is neither an index, GPU-<uuid> nor MIG-<uuid>");
        }
        for (const auto& chosen : out) {
            if (chosen.bus_id == match->bus_id && !starts_with(token, "MIG-")) {
                fail(fmt::format("names GPU {} a second time", match->bus_id.to_string()));
            }
        }
        Gpu gpu = *match;
        gpu.selector = token;
        out.push_back(std::move(gpu));
        if (comma == std::string_view::npos) {
            break;
        }
        rest = rest.substr(comma + 1);
    }
    return out;
}

std::vector<NvmlGpu> nvml_gpus_guarded(const std::string& library, std::chrono::milliseconds timeout)
{
    std::vector<Child> children;
    children.push_back(spawn_function(
        [&] {
            const Nvml nvml = library.empty() ? Nvml::load() : Nvml::load(library);
            nlohmann::json list = nlohmann::json::array();
            for (const auto& g : nvml.gpus()) {
                list.push_back({{"index", g.index}, {"bus_id", g.bus_id.to_string()}, {"name", g.name},
                    {"uuid", g.uuid}, {"memory_total", g.memory_total ? nlohmann::json(*g.memory_total) : nullptr},
                    {"mig_uuids", g.mig_uuids}});
            }
            return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        },
        SpawnOptions{}));
    const ChildOutcome outcome = wait_for_children(children, timeout).front();
    if (outcome.timed_out) {
        throw Error(fmt::format("NVML did not answer in {} s (a driver call hung)", timeout.count() / 1000.0));
    }
    if (outcome.signaled()) {
        throw Error(fmt::format("NVML crashed ({})", strsignal(outcome.exit_code() - 128)));
    }
    if (!outcome.exited(0)) {
        std::string why = outcome.output;
        while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) {
            why.pop_back();
        }
        throw Error(why.empty() ? fmt::format("NVML failed (exit status {})", outcome.exit_code()) : why);
    }
    std::vector<NvmlGpu> out;
    try {
        for (const auto& g : nlohmann::json::parse(outcome.output)) {
            NvmlGpu gpu;
            gpu.index = g.at("index").get<unsigned>();
            gpu.bus_id = PciAddress::parse(g.at("bus_id").get<std::string>()).value_or(PciAddress{});
            gpu.name = g.at("name").get<std::string>();
            gpu.uuid = g.at("uuid").get<std::string>();
            if (g.at("memory_total").is_number()) {
                gpu.memory_total = g.at("memory_total").get<std::uint64_t>();
            }
            gpu.mig_uuids = g.at("mig_uuids").get<std::vector<std::string>>();
            out.push_back(std::move(gpu));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("NVML's answer could not be read ({})", e.what()));
    }
    return out;
}

GpuInventory discover_gpus(const NodeLayout& layout, const InventoryOptions& options)
{
    GpuInventory inventory;
    std::vector<Gpu> all;
    if (options.from_topology_file) {
        all = gpus_from_topology(layout);
        inventory.source = "topology";
    } else {
        try {
            all =
                gpus_from_nvml(nvml_gpus_guarded(options.nvml_library, options.nvml_timeout), layout, options.sysroot);
            inventory.source = "nvml";
        } catch (const Error& e) {
            all = gpus_from_topology(layout);
            inventory.source = "topology";
            inventory.notes.push_back(
                fmt::format("NVML not used ({}); GPUs taken from the PCI devices hwloc sees", e.what()));
        }
    }
    for (const auto& gpu : all) {
        if (!gpu.locality.known()) {
            inventory.notes.push_back(fmt::format("locality of GPU {} ({}) is unknown to hwloc and sysfs; its "
                                                  "ranks may use all allowed CPUs",
                gpu.physical_index, gpu.bus_id.to_string()));
        }
    }
    if (options.visible_devices) {
        inventory.pool = select_visible(all, *options.visible_devices);
        inventory.visible_devices_set = true;
    } else {
        inventory.pool = std::move(all);
    }
    return inventory;
}

} // namespace base
