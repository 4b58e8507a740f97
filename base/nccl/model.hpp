#pragma once

// What the analyzer keeps while it reads: one LinkTally per communicator (and one per thread for
// connection lines whose communicator is not known yet). Private to the base library.

#include "base/nccl/log.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace base::nccl {

/// A position in the inputs, cheap to copy: input index and 1-based line.
struct Mark {
    std::uint32_t input = 0;
    std::uint64_t line = 0;
    bool known() const { return line != 0; }
    bool before(const Mark& other) const
    {
        return !other.known() || (known() && (input < other.input || (input == other.input && line < other.line)));
    }
};

struct EdgeCount {
    std::uint64_t count = 0;
    Mark first;
};

/// Connection lines by (source rank, destination rank, path), the host each local rank logged
/// from, and ring orders.
struct LinkTally {
    std::unordered_map<std::uint64_t, EdgeCount> edges; ///< key: edge_key()
    std::unordered_map<int, int> local_host; ///< rank -> host id of the process that logged it
    std::vector<std::vector<int>> rings;
    Mark first_ring;
    std::unordered_map<int, std::uint64_t> nvls_lines; ///< host id -> NVLS lines logged there
    Mark first_nvls;

    static std::uint64_t edge_key(int src, int dst, std::uint32_t path)
    {
        return (static_cast<std::uint64_t>(src & 0x3fffff) << 42) |
            (static_cast<std::uint64_t>((dst + 1) & 0x3fffff) << 20) | (path & 0xfffff);
    }
    static int edge_src(std::uint64_t key) { return static_cast<int>(key >> 42); }
    static int edge_dst(std::uint64_t key) { return static_cast<int>((key >> 20) & 0x3fffff) - 1; }
    static std::uint32_t edge_path(std::uint64_t key) { return static_cast<std::uint32_t>(key & 0xfffff); }

    /// Keeps a ring order not kept yet, up to max_rings; whether it was kept.
    bool add_ring(const std::vector<int>& ranks, Mark where);
    void merge(const LinkTally& other);
    bool empty() const { return edges.empty() && rings.empty() && nvls_lines.empty(); }
};

} // namespace base::nccl
