#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace base {

/// A PCI function address. One parser for every spelling the GPU world uses: NVML's
/// "00000000:1B:00.0", CUDA's "0000:1B:00.0", sysfs and hwloc's "0000:1b:00.0", and the short
/// "1b:00.0". Compare addresses, never strings.
struct PciAddress {
    std::uint32_t domain = 0;
    std::uint8_t bus = 0;
    std::uint8_t device = 0;
    std::uint8_t function = 0;

    /// Parses any of the spellings above; nullopt when the text is not a PCI address.
    static std::optional<PciAddress> parse(std::string_view text);

    /// The sysfs spelling, "0000:1b:00.0" (domain widened past 4 digits only when needed).
    std::string to_string() const;

    friend auto operator<=>(const PciAddress&, const PciAddress&) = default;
};

} // namespace base
