#pragma once

// The node itself (the "host" collector): its name, kernel and CPUs, for every report's header, the
// verdict files, fleet and the p2p probe's boot options.

#include "doctor/facts/schema.hpp"

#include <optional>
#include <string>

namespace doctor::facts {

struct HostFacts {
    std::string hostname;
    std::optional<std::string> kernel; ///< uname's release
    std::optional<std::string> machine; ///< uname's machine: "x86_64"
    std::optional<unsigned> cpus_online;
    std::optional<std::string> cmdline; ///< /proc/cmdline
    std::optional<std::string> sysroot; ///< where /sys and /proc were read
    std::optional<bool> in_container; ///< /.dockerenv or /run/.containerenv is there

    static constexpr auto fields()
    {
        return std::tuple{field("hostname", &HostFacts::hostname), field("kernel", &HostFacts::kernel),
            field("machine", &HostFacts::machine), field("cpus_online", &HostFacts::cpus_online),
            field("cmdline", &HostFacts::cmdline, 0, Kind::text), field("sysroot", &HostFacts::sysroot),
            field("in_container", &HostFacts::in_container)};
    }
};

} // namespace doctor::facts
