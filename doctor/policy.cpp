#include "doctor/policy.hpp"

#include "probes/error.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <sstream>
#include <toml++/toml.h>
#include <vector>

namespace doctor {

namespace {

// The shipped share/gpukit/policy.toml, compiled in (see doctor/CMakeLists.txt).
#include "doctor/policy_toml.inc"

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
        throw probes::Error(fmt::format("{}:{}:{}: {}", origin, where.line, where.column, e.description()));
    }
    static const std::vector<std::string> known = {"driver.min_version", "gpus.expected", "gpus.max_other_processes",
        "libraries.min_nccl", "libraries.min_cudnn", "limits.min_shm_gib", "limits.memlock_unlimited",
        "limits.min_nofile", "network.ib_min_rate_gbps"};
    for (const auto& [section, node] : t) {
        const auto* table = node.as_table();
        if (table == nullptr) {
            throw probes::Error(fmt::format("{}: '{}' must be a [section]", origin, section.str()));
        }
        for (const auto& [key, value] : *table) {
            const std::string name = fmt::format("{}.{}", section.str(), key.str());
            if (std::find(known.begin(), known.end(), name) == known.end()) {
                throw probes::Error(
                    fmt::format("{}:{}: unknown setting '{}'", origin, value.source().begin.line, name));
            }
        }
    }
    auto wrong = [&](const char* key, const char* type) {
        const auto* node = t.at_path(key).node();
        return probes::Error(
            fmt::format("{}:{}: {} must be {}", origin, node != nullptr ? node->source().begin.line : 0, key, type));
    };
    auto get_string = [&](const char* key, std::string& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<std::string>();
            if (!v) {
                throw wrong(key, "a string such as \"535.0\"");
            }
            out = *v;
        }
    };
    auto get_double = [&](const char* key, double& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<double>();
            if (!v || *v < 0) {
                throw wrong(key, "a number, 0 or more");
            }
            out = *v;
        }
    };
    auto get_unsigned = [&](const char* key, auto& out) {
        if (auto node = t.at_path(key)) {
            auto v = node.value<int64_t>();
            if (!v || *v < 0 || *v > 1000000000) {
                throw wrong(key, "a whole number, 0 or more");
            }
            out = static_cast<unsigned>(*v);
        }
    };
    get_string("driver.min_version", min_driver);
    if (t.at_path("gpus.expected")) {
        unsigned n = 0;
        get_unsigned("gpus.expected", n);
        expect_gpus = n;
    }
    get_unsigned("gpus.max_other_processes", max_other_processes);
    get_string("libraries.min_nccl", min_nccl);
    get_string("libraries.min_cudnn", min_cudnn);
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
}

} // namespace doctor
