#include "launcher/node_handoff.hpp"

#include "base/binding.hpp"
#include "base/error.hpp"
#include "base/sysroot.hpp"
#include "base/topology.hpp"

#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <sys/utsname.h>

namespace launcher {

namespace {

using base::Error;
using nlohmann::json;

/// The most ranks a handed plan may hold: one per CPU of the largest machines, and more.
constexpr std::size_t max_handed_ranks = 65536;
/// The most NUMA nodes of one rank: as many as the kernel's memory policy takes.
constexpr std::size_t max_numa_nodes = 1024;

/// A count or index: a whole number of at most 32 bits (nlohmann's get<unsigned> would cast any
/// number, 1e300 or -1 included).
unsigned whole_value(const json& v, std::string_view what)
{
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > std::numeric_limits<unsigned>::max()) {
        throw Error(fmt::format("{} is not a whole number below 2^32", what));
    }
    return static_cast<unsigned>(v.get<std::uint64_t>());
}

unsigned whole(const json& j, const char* name)
{
    return whole_value(j.at(name), name);
}

std::optional<std::string> optional_string(const json& j, const char* name)
{
    const json& v = j.at(name);
    return v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
}

json gpu_json(const base::Gpu& gpu)
{
    return json{{"index", gpu.physical_index}, {"bus_id", gpu.bus_id.to_string()}, {"name", gpu.name},
        {"uuid", gpu.uuid}, {"selector", gpu.selector}, {"hca", gpu.hca}};
}

base::Gpu gpu_from(const json& j)
{
    base::Gpu gpu;
    gpu.physical_index = whole(j, "index");
    const auto bus = base::PciAddress::parse(j.at("bus_id").get<std::string>());
    if (!bus) {
        throw Error("a GPU without a PCI address");
    }
    gpu.bus_id = *bus;
    gpu.name = j.at("name").get<std::string>();
    gpu.uuid = j.at("uuid").get<std::string>();
    gpu.selector = j.at("selector").get<std::string>();
    gpu.hca = j.at("hca").get<std::string>();
    return gpu;
}

RankBinding rank_from(const json& j)
{
    RankBinding r;
    r.local_rank = whole(j, "local_rank");
    if (!j.at("gpu").is_null()) {
        r.gpu = gpu_from(j.at("gpu"));
    }
    r.cuda_index = whole(j, "cuda_index");
    r.cpus = base::CpuSet::parse(j.at("cpus").get<std::string>());
    const json& numa = j.at("numa");
    if (!numa.is_array() || numa.size() > max_numa_nodes) {
        throw Error("numa is not a list of at most 1024 nodes");
    }
    for (std::size_t i = 0; i < numa.size(); ++i) {
        r.numa.push_back(whole_value(numa[i], "a NUMA node"));
    }
    r.cores = whole(j, "cores");
    r.shared = j.at("shared").get<bool>();
    r.hca = j.at("hca").get<std::string>();
    return r;
}

} // namespace

ThisNode read_this_node(const PlanOptions& options, const char* visible_devices)
{
    const bool from_file = !options.topology_file.empty();
    ThisNode node;
    node.layout =
        (from_file ? base::Topology::load_xml(options.topology_file) : base::Topology::load_live(!options.cpu_only))
            .layout();
    if (!options.cpu_only) {
        base::InventoryOptions inv;
        inv.from_topology_file = from_file;
        inv.sysroot = base::Sysroot(options.sysroot);
        if (visible_devices != nullptr) {
            inv.visible_devices = visible_devices;
        }
        node.inventory = base::discover_gpus(node.layout, inv);
    }
    return node;
}

NodeKey this_node_key(const char* visible_devices)
{
    NodeKey key;
    utsname names{};
    if (uname(&names) == 0) {
        key.host = names.nodename;
    }
    key.boot_id = base::Sysroot("/").read_line("/proc/sys/kernel/random/boot_id").value_or("");
    key.affinity = base::cpu_binding().to_list();
    if (visible_devices != nullptr) {
        key.visible_devices = visible_devices;
    }
    return key;
}

std::string write_node_plan(const NodeKey& key, const NodePlan& plan)
{
    json ranks = json::array();
    for (const RankBinding& r : plan.ranks) {
        ranks.push_back(json{{"local_rank", r.local_rank}, {"gpu", r.gpu ? gpu_json(*r.gpu) : json(nullptr)},
            {"cuda_index", r.cuda_index}, {"cpus", r.cpus.to_list()}, {"numa", r.numa}, {"cores", r.cores},
            {"shared", r.shared}, {"hca", r.hca}});
    }
    const json visible = key.visible_devices ? json(*key.visible_devices) : json(nullptr);
    return json{{"host", key.host}, {"boot_id", key.boot_id}, {"affinity", key.affinity}, {"visible_devices", visible},
        {"ranks", ranks}}
        .dump();
}

std::optional<NodePlan> read_node_plan(std::string_view text, const NodeKey& key, unsigned local_ranks)
{
    try {
        const json j = json::parse(text);
        const NodeKey made{j.at("host").get<std::string>(), j.at("boot_id").get<std::string>(),
            j.at("affinity").get<std::string>(), optional_string(j, "visible_devices")};
        const json& ranks = j.at("ranks");
        if (!ranks.is_array() || ranks.size() > max_handed_ranks) {
            throw Error("ranks is not a list of at most 65536");
        }
        if (made != key || key.host.empty() || key.boot_id.empty() || ranks.size() != local_ranks) {
            return std::nullopt;
        }
        NodePlan plan;
        for (const json& r : ranks) {
            plan.ranks.push_back(rank_from(r));
            if (plan.ranks.back().local_rank != plan.ranks.size() - 1) {
                throw Error("local ranks out of order");
            }
        }
        return plan;
    } catch (const json::exception& e) {
        throw Error(fmt::format("{} is not a plan gpurun wrote ({}); unset it", node_plan_variable, e.what()));
    } catch (const Error& e) {
        throw Error(fmt::format("{} is not a plan gpurun wrote ({}); unset it", node_plan_variable, e.what()));
    }
}

} // namespace launcher
