#pragma once

#include "doctor/engine/facts.hpp"

#include <cstddef>
#include <string>

namespace doctor::engine {

/// The "gpudoctor_snapshot" number: the layout of the facts that snapshot writes and check --from reads.
constexpr unsigned snapshot_format = 1;

/// Ceilings on what one snapshot may hold. The largest real nodes have 8 to 16 GPUs (an NVL72 rack
/// shows 4 to 8 per node), so these leave room without letting a hand-made file make judging (which
/// looks at every GPU pair) take gigabytes.
struct SnapshotCeilings {
    static constexpr std::size_t gpus = 1024; ///< GPUs (and GPU indexes, 0 to gpus - 1) per node
    static constexpr std::size_t pairs = gpus * (gpus - 1) / 2; ///< GPU pairs: NVML's "pairs", hwloc's "links"
    static constexpr std::size_t devices = 4096; ///< HCAs, NUMA nodes, PCI bridges
    static constexpr std::size_t array = 1 << 20; ///< entries of any other list
    static constexpr std::size_t depth = 32; ///< nesting of JSON arrays and objects
    static constexpr std::size_t string = 4096; ///< bytes of a name, bus id, version the checks show
};

/// Reads the text of a snapshot (what `gpudoctor snapshot` writes) named `file` in messages: its
/// format number, its facts, and the values the checks read (GPU indexes, bus ids, memory and
/// counts, the length of the names they show) against the ceilings above. Throws base::Error
/// naming the file, the facts and the field for anything else: bad input, not a broken node.
Facts read_snapshot(const std::string& text, const std::string& file);

} // namespace doctor::engine
