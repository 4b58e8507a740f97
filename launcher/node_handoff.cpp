#include "launcher/node_handoff.hpp"

#include "probes/binding.hpp"
#include "probes/error.hpp"
#include "probes/sysroot.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/utsname.h>

namespace launcher {

namespace {

using nlohmann::json;
using probes::Error;

/// The most ranks a handed plan may hold: one per CPU of the largest machines, and more.
constexpr std::size_t max_handed_ranks = 65536;

std::optional<std::string> optional_string(const json& j, const char* name)
{
    const json& v = j.at(name);
    return v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
}

json gpu_json(const probes::Gpu& gpu)
{
    return json{{"index", gpu.physical_index}, {"bus_id", gpu.bus_id.to_string()}, {"name", gpu.name},
        {"uuid", gpu.uuid}, {"selector", gpu.selector}, {"hca", gpu.hca}};
}

probes::Gpu gpu_from(const json& j)
{
    probes::Gpu gpu;
    gpu.physical_index = j.at("index").get<unsigned>();
    const auto bus = probes::PciAddress::parse(j.at("bus_id").get<std::string>());
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
    r.local_rank = j.at("local_rank").get<unsigned>();
    if (!j.at("gpu").is_null()) {
        r.gpu = gpu_from(j.at("gpu"));
    }
    r.cuda_index = j.at("cuda_index").get<unsigned>();
    r.cpus = probes::CpuSet::parse(j.at("cpus").get<std::string>());
    r.numa = j.at("numa").get<std::vector<unsigned>>();
    r.cores = j.at("cores").get<unsigned>();
    r.shared = j.at("shared").get<bool>();
    r.hca = j.at("hca").get<std::string>();
    return r;
}

} // namespace

NodeKey this_node_key(const char* visible_devices)
{
    NodeKey key;
    utsname names{};
    if (uname(&names) == 0) {
        key.host = names.nodename;
    }
    key.boot_id = probes::Sysroot("/").read_line("/proc/sys/kernel/random/boot_id").value_or("");
    key.affinity = probes::cpu_binding().to_list();
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
