#pragma once

// The size of /dev/shm and this process's locked-memory and open-files limits (the "limits"
// collector). They are gpudoctor's own, so it should run the way the job runs. For the limits
// probe and fleet.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace doctor::facts {

/// /dev/shm: its size from the mount options when they give it, else from statfs.
struct ShmFacts {
    bool exists = false;
    std::optional<bool> mounted; ///< /proc/mounts lists a mount on /dev/shm
    std::optional<std::uint64_t> bytes; ///< missing when neither the options nor statfs gave it
    std::optional<bool> unlimited; ///< tmpfs size=0: no limit
    std::optional<std::string> source; ///< "mount options" or "statfs"
    std::optional<std::string> fstype;
    std::optional<std::string> options; ///< the mount's options, as /proc/mounts shows them
    std::optional<std::string> error; ///< why statfs failed
    std::optional<bool> mounts_unreadable; ///< /proc/mounts could not be read

    static constexpr auto fields()
    {
        return std::tuple{field("exists", &ShmFacts::exists), field("mounted", &ShmFacts::mounted),
            field("bytes", &ShmFacts::bytes), field("unlimited", &ShmFacts::unlimited),
            field("source", &ShmFacts::source), field("fstype", &ShmFacts::fstype),
            field("options", &ShmFacts::options, 0, Kind::text), field("error", &ShmFacts::error),
            field("mounts_unreadable", &ShmFacts::mounts_unreadable)};
    }
};

/// One resource limit, as getrlimit gave it.
struct RLimitFacts {
    /// The soft and hard limits: a number, or "unlimited"; missing when getrlimit failed. Read by
    /// limit_value().
    std::optional<nlohmann::json> soft;
    std::optional<nlohmann::json> hard;
    std::optional<std::string> error; ///< "getrlimit: ..."

    static constexpr auto fields()
    {
        return std::tuple{
            field("soft", &RLimitFacts::soft), field("hard", &RLimitFacts::hard), field("error", &RLimitFacts::error)};
    }
};

/// A limit's value: unlimited, or a number.
struct LimitValue {
    bool unlimited = false;
    std::uint64_t value = 0;
};

/// The value of a soft or hard limit; nullopt when it is missing or neither a count nor "unlimited".
inline std::optional<LimitValue> limit_value(const std::optional<nlohmann::json>& v)
{
    if (!v) {
        return std::nullopt;
    }
    if (v->is_string() && v->get_ref<const std::string&>() == "unlimited") {
        return LimitValue{true, 0};
    }
    if (v->is_number_unsigned()) {
        return LimitValue{false, v->get<std::uint64_t>()};
    }
    if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
        return LimitValue{false, static_cast<std::uint64_t>(v->get<std::int64_t>())};
    }
    return std::nullopt;
}

struct LimitsFacts {
    ShmFacts shm;
    RLimitFacts memlock; ///< RLIMIT_MEMLOCK, bytes
    RLimitFacts nofile; ///< RLIMIT_NOFILE

    static constexpr auto fields()
    {
        return std::tuple{field("shm", &LimitsFacts::shm), field("memlock", &LimitsFacts::memlock),
            field("nofile", &LimitsFacts::nofile)};
    }
};

} // namespace doctor::facts
