#pragma once

// Sizes as people write them: "16GiB", "80GB", "40000MiB", "1.5 TiB", "512" (bytes).

#include <cstdint>
#include <string>
#include <string_view>

namespace base {

/// Parses a size with an optional unit: B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB (powers of
/// 1024), K/M/G/T (taken as binary, as nvidia-smi and most tools mean them); case-insensitive; a
/// decimal fraction is allowed ("1.5GiB"). `what` names the value in errors ("--gpu-mem").
/// Throws base::Error for anything else, for zero, and for sizes beyond 2^60 bytes.
std::uint64_t parse_byte_size(std::string_view text, const std::string& what);

/// "15.77 GiB", "512 MiB", "900 B": binary units, two decimals above KiB.
std::string format_bytes(std::uint64_t bytes);

} // namespace base
