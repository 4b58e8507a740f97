#include "base/pci_address.hpp"

#include <charconv>
#include <fmt/format.h>

namespace base {

namespace {

bool parse_hex(std::string_view text, std::size_t max_digits, std::uint32_t& value)
{
    if (text.empty() || text.size() > max_digits) {
        return false;
    }
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value, 16);
    return ec == std::errc() && ptr == end;
}

} // namespace

std::optional<PciAddress> PciAddress::parse(std::string_view text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
        text.remove_suffix(1);
    }
    std::size_t dot = text.rfind('.');
    if (dot == std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view head = text.substr(0, dot);
    std::string_view func = text.substr(dot + 1);
    std::size_t last_colon = head.rfind(':');
    if (last_colon == std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view dev = head.substr(last_colon + 1);
    std::string_view rest = head.substr(0, last_colon);
    std::string_view domain_text;
    std::string_view bus = rest;
    std::size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
        domain_text = rest.substr(0, colon);
        bus = rest.substr(colon + 1);
    }
    std::uint32_t d = 0, b = 0, s = 0, f = 0;
    if (!domain_text.empty() && !parse_hex(domain_text, 8, d)) {
        return std::nullopt;
    }
    if (colon != std::string_view::npos && domain_text.empty()) {
        return std::nullopt;
    }
    if (!parse_hex(bus, 2, b) || !parse_hex(dev, 2, s) || !parse_hex(func, 1, f) || s > 0x1f || f > 7) {
        return std::nullopt;
    }
    return PciAddress{d, static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(s), static_cast<std::uint8_t>(f)};
}

std::string PciAddress::to_string() const
{
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

} // namespace base
