#include "doctor/engine/gpu_table.hpp"

#include "base/error.hpp"
#include "base/spelling.hpp"
#include "base/text.hpp"
#include "doctor/engine/toml_table.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace doctor::engine {

namespace {

// The shipped share/gpukit/gpus.toml, compiled in (see doctor/CMakeLists.txt).
#include "share/gpus_toml.inc"

const std::vector<std::string> model_keys = {
    "aliases", "memory_gib", "speed", "note", "compute_capability", "nvlink", "floor"};
const std::vector<std::string> floor_keys = {
    "h2d_gbps", "d2h_gbps", "d2d_gbps", "p2p_gbps", "allreduce_busbw_gbps", "allreduce_gpus"};

std::string family_of(const std::string& name)
{
    return gpu_key(name.substr(0, name.find('-')));
}

DeepFloor read_floor(const TomlEntry& e, const std::string& model)
{
    DeepFloor floor;
    floor.model = model;
    floor.source = "the GPU table";
    for (const auto& [key, value] : e.numbers("floor", floor_keys)) {
        if (key == "allreduce_gpus") {
            if (value < 2 || value > 1024 || value != std::floor(value)) {
                throw e.wrong("floor", "a table whose allreduce_gpus is a whole number from 2 to 1024");
            }
            floor.allreduce_gpus = static_cast<unsigned>(value);
            continue;
        }
        std::optional<double>* field = key == "h2d_gbps" ? &floor.h2d_gbps
            : key == "d2h_gbps"                          ? &floor.d2h_gbps
            : key == "d2d_gbps"                          ? &floor.d2d_gbps
            : key == "p2p_gbps"                          ? &floor.p2p_gbps
                                                         : &floor.allreduce_busbw_gbps;
        *field = value;
    }
    return floor;
}

} // namespace

std::optional<ComputeCapability> parse_compute_capability(const std::string& text)
{
    const auto dot = text.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 >= text.size()) {
        return std::nullopt;
    }
    ComputeCapability cc;
    const char* end = text.data() + text.size();
    const auto major = std::from_chars(text.data(), text.data() + dot, cc.major);
    const auto minor = std::from_chars(text.data() + dot + 1, end, cc.minor);
    if (major.ec != std::errc{} || major.ptr != text.data() + dot || minor.ec != std::errc{} || minor.ptr != end ||
        cc.major == 0 || cc.major > 99 || cc.minor > 9) {
        return std::nullopt;
    }
    return cc;
}

std::string to_string(const ComputeCapability& cc)
{
    return fmt::format("{}.{}", cc.major, cc.minor);
}

std::string gpu_key(std::string_view name)
{
    std::string l = base::lower_case(name);
    for (const char* prefix : {"nvidia ", "tesla "}) {
        if (l.rfind(prefix, 0) == 0) {
            l.erase(0, std::char_traits<char>::length(prefix));
        }
    }
    std::string out;
    for (char c : l) {
        if (c != ' ' && c != '-' && c != '_') {
            out += c;
        }
    }
    return out;
}

const GpuTable& GpuTable::builtin()
{
    static const GpuTable table = from_toml(gpus_toml, "built-in gpus.toml");
    return table;
}

const char* GpuTable::builtin_toml()
{
    return gpus_toml;
}

GpuTable GpuTable::from_toml(const std::string& text, const std::string& origin)
{
    GpuTable out;
    const toml::table doc = parse_toml(text, origin);
    for (const auto& [key, node] : in_file_order(doc)) {
        const auto* table = node->as_table();
        if (table == nullptr) {
            throw base::Error(
                fmt::format("{}:{}: '{}' must be a [gpu] table", origin, node->source().begin.line, key.str()));
        }
        const TomlEntry e(*table, origin, std::string(key.str()), model_keys);
        GpuModel gpu;
        gpu.name = e.name();
        gpu.aliases = e.strings("aliases");
        const auto gib = e.positive("memory_gib");
        if (!gib) {
            throw e.wrong("memory_gib", "given");
        }
        gpu.memory = static_cast<std::uint64_t>(std::llround(*gib * 1073741824.0));
        gpu.speed = e.positive("speed").value_or(1.0);
        gpu.note = e.text("note").value_or("");
        const auto cc = e.text("compute_capability");
        gpu.traits.compute_capability = cc ? parse_compute_capability(*cc) : std::nullopt;
        if (!gpu.traits.compute_capability) {
            throw e.wrong("compute_capability", "given as major.minor, e.g. \"8.0\"");
        }
        gpu.traits.nvlink = e.flag("nvlink");
        gpu.floor = read_floor(e, gpu.name);
        out.m_models.push_back(std::move(gpu));
    }
    return out;
}

const GpuModel* GpuTable::match(std::string_view name) const
{
    const std::string key = gpu_key(name);
    for (const auto& g : m_models) {
        if (gpu_key(g.name) == key ||
            std::any_of(g.aliases.begin(), g.aliases.end(), [&](const auto& a) { return gpu_key(a) == key; })) {
            return &g;
        }
    }
    const GpuModel* only = nullptr;
    for (const auto& g : m_models) {
        if (family_of(g.name) == key) {
            if (only != nullptr) {
                return nullptr;
            }
            only = &g;
        }
    }
    return only;
}

const GpuModel& GpuTable::find(std::string_view name) const
{
    if (const GpuModel* g = match(name)) {
        return *g;
    }
    const std::string key = gpu_key(name);
    std::vector<std::string> family;
    for (const auto& g : m_models) {
        if (family_of(g.name) == key) {
            family.push_back(g.name);
        }
    }
    if (!family.empty()) {
        throw base::Error(
            fmt::format("GPU {}: more than one in the table ({}); name one", name, fmt::join(family, ", ")));
    }
    std::vector<std::string> keys;
    std::vector<const GpuModel*> owners;
    for (const auto& g : m_models) {
        keys.push_back(gpu_key(g.name));
        owners.push_back(&g);
        for (const auto& a : g.aliases) {
            keys.push_back(gpu_key(a));
            owners.push_back(&g);
        }
    }
    const std::string hint = base::closest_match(key, keys);
    std::string suggestion;
    for (std::size_t i = 0; i < keys.size() && !hint.empty(); ++i) {
        if (keys[i] == hint) {
            suggestion = fmt::format(" (did you mean {}?)", owners[i]->name);
            break;
        }
    }
    throw base::Error(fmt::format("GPU {}: not in the GPU table{}; 'gpudoctor fit --list' shows it; give --gpus N with "
                                  "--gpu-mem SIZE and --speeds for others",
        name, suggestion));
}

} // namespace doctor::engine
