#pragma once

#include "doctor/engine/facts.hpp"

#include <cstddef>
#include <string>

namespace doctor::engine {

/// The "gpudoctor_snapshot" number: the layout of the facts that snapshot writes and check --from reads.
constexpr unsigned snapshot_format = 1;

/// Ceilings on what one snapshot may hold (doctor/facts/schema.hpp).
using SnapshotCeilings = facts::Ceilings;

/// Reads the text of a snapshot (what `gpudoctor snapshot` writes) named `file` in messages: its
/// format number, its facts, and the values the checks read (GPU indexes, bus ids, memory and
/// counts, the length of the names they show) against the ceilings above. Throws base::Error
/// naming the file, the facts and the field for anything else: bad input, not a broken node.
Facts read_snapshot(const std::string& text, const std::string& file);

} // namespace doctor::engine
