#include "doctor/engine/policy.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <sstream>
#include <toml++/toml.h>
#include <unordered_map>
#include <vector>

namespace doctor::engine {

namespace {

// The shipped share/gpukit/policy.toml, compiled in (see doctor/CMakeLists.txt).
#include "share/policy_toml.inc"

// A whole number from a TOML value: an integer, or a float with no fraction (`copy_mib = 64.0`).
// toml++'s own float-to-integer conversion casts before it checks the range, which is undefined
// for a float such as 4.6e113, so floats are checked here first.
std::optional<std::int64_t> whole_number(const toml::node& node)
{
    if (node.is_integer()) {
        return node.value<std::int64_t>();
    }
    if (const auto* f = node.as_floating_point()) {
        const double d = f->get();
        constexpr double two_to_63 = 9223372036854775808.0;
        if (std::isfinite(d) && d >= -two_to_63 && d < two_to_63 && d == std::trunc(d)) {
            return static_cast<std::int64_t>(d);
        }
    }
    return std::nullopt;
}

std::vector<long> version_parts(const std::string& v)
{
    std::vector<long> parts;
    std::size_t pos = 0;
    while (pos <= v.size()) {
        std::size_t dot = v.find_first_of(".-+", pos);
        std::string part = v.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        long n = 0;
        std::from_chars(part.data(), part.data() + part.size(), n);
        parts.push_back(n);
        if (dot == std::string::npos) {
            break;
        }
        pos = dot + 1;
    }
    return parts;
}

/// "535", "2.18.3": numbers separated by single dots.
bool is_version(const std::string& v)
{
    bool digit_before = false;
    for (char c : v) {
        if (c >= '0' && c <= '9') {
            digit_before = true;
        } else if (c == '.' && digit_before) {
            digit_before = false;
        } else {
            return false;
        }
    }
    return digit_before && v.size() <= 64;
}

} // namespace

int compare_versions(const std::string& a, const std::string& b)
{
    auto x = version_parts(a);
    auto y = version_parts(b);
    for (std::size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
        long p = i < x.size() ? x[i] : 0;
        long q = i < y.size() ? y[i] : 0;
        if (p != q) {
            return p < q ? -1 : 1;
        }
    }
    return 0;
}

const char* Policy::default_toml()
{
    return policy_toml;
}

Policy Policy::defaults()
{
    Policy p;
    p.merge_toml(policy_toml, "built-in policy");
    return p;
}

void Policy::merge_toml(const std::string& text, const std::string& origin)
{
    toml::table t;
    try {
        t = toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        throw base::Error(fmt::format("{}:{}:{}: {}", origin, where.line, where.column, e.description()));
    }
    static const std::vector<std::string> known = {"driver.min_version", "gpus.expected", "gpus.max_other_processes",
        "libraries.min_nccl", "libraries.min_cudnn", "limits.min_shm_gib", "limits.memlock_unlimited",
        "limits.min_nofile", "network.ib_min_rate_gbps", "deep.copy_mib", "deep.copies", "deep.samples",
        "deep.allreduce_mib", "deep.allreduce_iterations", "deep.pcie_fraction", "deep.outlier_fraction", "deep.floor"};
    for (const auto& [section, node] : t) {
        const auto* table = node.as_table();
        if (table == nullptr) {
            throw base::Error(fmt::format("{}: '{}' must be a [section]", origin, section.str()));
        }
        for (const auto& [key, value] : *table) {
            const std::string name = fmt::format("{}.{}", section.str(), key.str());
            if (std::find(known.begin(), known.end(), name) == known.end()) {
                throw base::Error(fmt::format("{}:{}: unknown setting '{}'", origin, value.source().begin.line, name));
            }
        }
    }
    auto wrong = [&](const char* key, const char* type) {
        const auto* node = t.at_path(key).node();
        return base::Error(
            fmt::format("{}:{}: {} must be {}", origin, node != nullptr ? node->source().begin.line : 0, key, type));
    };
    auto get_version = [&](const char* key, std::string& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<std::string>();
            // Numbers and dots only: a word would compare as 0 and pass every version.
            if (!v || !is_version(*v)) {
                throw wrong(key, "a version string such as \"535.0\"");
            }
            out = *v;
        }
    };
    auto get_double = [&](const char* key, double& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<double>();
            if (!v || !(std::isfinite(*v) && *v >= 0)) {
                throw wrong(key, "a number, 0 or more");
            }
            out = *v;
        }
    };
    auto get_unsigned = [&](const char* key, auto& out) {
        if (auto node = t.at_path(key)) {
            auto v = whole_number(*node.node());
            if (!v || *v < 0 || *v > 1000000000) {
                throw wrong(key, "a whole number, 0 or more");
            }
            out = static_cast<unsigned>(*v);
        }
    };
    get_version("driver.min_version", min_driver);
    if (t.at_path("gpus.expected")) {
        unsigned n = 0;
        get_unsigned("gpus.expected", n);
        expect_gpus = n;
    }
    get_unsigned("gpus.max_other_processes", max_other_processes);
    get_version("libraries.min_nccl", min_nccl);
    get_version("libraries.min_cudnn", min_cudnn);
    get_double("limits.min_shm_gib", min_shm_gib);
    if (auto node = t.at_path("limits.memlock_unlimited")) {
        auto v = node.value<bool>();
        if (!v) {
            throw wrong("limits.memlock_unlimited", "true or false");
        }
        memlock_unlimited = *v;
    }
    get_unsigned("limits.min_nofile", min_nofile);
    get_double("network.ib_min_rate_gbps", ib_min_rate_gbps);

    auto get_count = [&](const char* key, unsigned& out, unsigned low, unsigned high) {
        if (auto node = t.at_path(key)) {
            auto v = whole_number(*node.node());
            if (!v || *v < low || *v > high) {
                throw wrong(key, fmt::format("a whole number from {} to {}", low, high).c_str());
            }
            out = static_cast<unsigned>(*v);
        }
    };
    unsigned copy_mib = static_cast<unsigned>(copy_bytes >> 20);
    get_count("deep.copy_mib", copy_mib, 1, 16384);
    copy_bytes = std::size_t{copy_mib} << 20;
    get_count("deep.copies", copies, 1, 1000);
    get_count("deep.samples", copy_samples, 1, 1000);
    unsigned allreduce_mib = static_cast<unsigned>(allreduce_bytes >> 20);
    get_count("deep.allreduce_mib", allreduce_mib, 1, 65536);
    allreduce_bytes = std::size_t{allreduce_mib} << 20;
    get_count("deep.allreduce_iterations", allreduce_iterations, 1, 10000);
    auto get_fraction = [&](const char* key, double& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<double>();
            if (!v || !(*v >= 0 && *v <= 1)) {
                throw wrong(key, "a fraction from 0 to 1");
            }
            out = *v;
        }
    };
    get_fraction("deep.pcie_fraction", pcie_fraction);
    get_fraction("deep.outlier_fraction", outlier_fraction);
    if (const auto* node = t.at_path("deep.floor").node()) {
        const auto* list = node->as_array();
        if (list == nullptr) {
            throw wrong("deep.floor", "a list of [[deep.floor]] tables");
        }
        if (list->size() > max_floors) {
            throw base::Error(fmt::format("{}:{}: {} [[deep.floor]] tables, more than the {} a policy may hold; "
                                          "keep one per GPU model",
                origin, node->source().begin.line, list->size(), max_floors));
        }
        // Each floor's position by the GPU it names, so that a repeated one is found at once.
        std::unordered_map<std::string, std::size_t> by_model;
        for (std::size_t i = 0; i < floors.size(); ++i) {
            by_model.emplace(gpu_key(floors[i].model), i);
        }
        for (const auto& item : *list) {
            const auto* entry = item.as_table();
            const int line = item.source().begin.line;
            if (entry == nullptr) {
                throw base::Error(fmt::format("{}:{}: each deep.floor must be a [[deep.floor]] table", origin, line));
            }
            DeepFloor floor;
            floor.source = "the policy";
            for (const auto& [key, value] : *entry) {
                const std::string k(key.str());
                const int at = value.source().begin.line;
                if (k == "model") {
                    auto v = value.value<std::string>();
                    if (!v || v->empty()) {
                        throw base::Error(
                            fmt::format("{}:{}: deep.floor model must be a GPU name such as \"H100\"", origin, at));
                    }
                    floor.model = *v;
                } else if (k == "allreduce_gpus") {
                    auto v = whole_number(value);
                    if (!v || *v < 2 || *v > 1024) {
                        throw base::Error(fmt::format(
                            "{}:{}: deep.floor allreduce_gpus must be a whole number from 2 to 1024", origin, at));
                    }
                    floor.allreduce_gpus = static_cast<unsigned>(*v);
                } else {
                    std::optional<double>* field = k == "h2d_gbps" ? &floor.h2d_gbps
                        : k == "d2h_gbps"                          ? &floor.d2h_gbps
                        : k == "d2d_gbps"                          ? &floor.d2d_gbps
                        : k == "p2p_gbps"                          ? &floor.p2p_gbps
                        : k == "allreduce_busbw_gbps"              ? &floor.allreduce_busbw_gbps
                                                                   : nullptr;
                    if (field == nullptr) {
                        throw base::Error(fmt::format("{}:{}: unknown setting 'deep.floor.{}' (known: model, "
                                                      "h2d_gbps, d2h_gbps, d2d_gbps, p2p_gbps, "
                                                      "allreduce_busbw_gbps, allreduce_gpus)",
                            origin, at, k));
                    }
                    auto v = value.value<double>();
                    if (!v || !(std::isfinite(*v) && *v >= 0)) {
                        throw base::Error(
                            fmt::format("{}:{}: deep.floor {} must be a number of GB/s, 0 or more", origin, at, k));
                    }
                    *field = *v;
                }
            }
            if (floor.model.empty()) {
                throw base::Error(fmt::format("{}:{}: a [[deep.floor]] needs model = \"<GPU name>\"", origin, line));
            }
            // A later floor for the same GPU replaces the earlier one; by the GPU table's row it names.
            if (const GpuModel* model = GpuTable::builtin().match(floor.model)) {
                floor.model = model->name;
            }
            auto [same, added] = by_model.emplace(gpu_key(floor.model), floors.size());
            if (added) {
                floors.push_back(floor);
            } else {
                floors[same->second] = floor;
            }
        }
    }
}

const DeepFloor* Policy::floor_for(const std::string& gpu_name) const
{
    // The GPU table's row that the GPU's name names, by the one rule (gpu_table.hpp); a GPU the
    // table lacks is named by its own name.
    const GpuModel* model = GpuTable::builtin().match(gpu_name);
    const std::string key = gpu_key(model != nullptr ? model->name : gpu_name);
    for (const auto& f : floors) {
        if (gpu_key(f.model) == key) {
            return &f;
        }
    }
    return model != nullptr && model->floor.any() ? &model->floor : nullptr;
}

} // namespace doctor::engine
