#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace test_support {

/// `value` as `size` little-endian bytes.
inline std::string le_bytes(std::uint64_t value, unsigned size)
{
    std::string out;
    for (unsigned i = 0; i < size; ++i) {
        out.push_back(static_cast<char>(i < 8 ? (value >> (8 * i)) & 0xff : 0)); // zeros past 64 bits
    }
    return out;
}

/// A small ELF64 program as a linker lays one out: the header, a loaded segment (file offset 0 at
/// address 0x400000) holding the program headers, the dynamic section (DT_NEEDED per name,
/// DT_STRTAB, DT_NULL) and its strings, then `text` (what .rodata would hold).
inline std::string tiny_elf(const std::vector<std::string>& needed, const std::string& text = "")
{
    const std::uint64_t base = 0x400000;
    const std::uint64_t dynamic_at = 64 + 2 * 56;
    const std::uint64_t dynamic_size = (needed.size() + 2) * 16;
    const std::uint64_t strings_at = dynamic_at + dynamic_size;
    std::string strings(1, '\0');
    std::string dynamic;
    for (const auto& name : needed) {
        dynamic += le_bytes(1, 8) + le_bytes(strings.size(), 8);
        strings += name + '\0';
    }
    dynamic += le_bytes(5, 8) + le_bytes(base + strings_at, 8) + le_bytes(0, 16);
    const std::uint64_t size = strings_at + strings.size() + text.size();
    std::string elf = std::string("\x7f"
                                  "ELF\x02\x01\x01",
                          7) +
        std::string(9, '\0');
    elf += le_bytes(2, 2) + le_bytes(0x3e, 2) + le_bytes(1, 4) + le_bytes(base, 8) + le_bytes(64, 8) + le_bytes(0, 8) +
        le_bytes(0, 4) + le_bytes(64, 2) + le_bytes(56, 2) + le_bytes(2, 2) + le_bytes(0, 6);
    auto header = [](unsigned type, std::uint64_t offset, std::uint64_t vaddr, std::uint64_t bytes) {
        return le_bytes(type, 4) + le_bytes(4, 4) + le_bytes(offset, 8) + le_bytes(vaddr, 8) + le_bytes(vaddr, 8) +
            le_bytes(bytes, 8) + le_bytes(bytes, 8) + le_bytes(8, 8);
    };
    elf += header(1, 0, base, size) + header(2, dynamic_at, base + dynamic_at, dynamic_size);
    return elf + dynamic + strings + text;
}

} // namespace test_support
