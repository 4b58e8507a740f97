#pragma once

// Reads the SQLite export of an Nsight Systems report (nsys profile --export sqlite, or nsys export
// --type sqlite) into base::nsys::Trace. Every schema from 2021 to 2026 is read by looking at
// which tables and columns the file has: TARGET_INFO_GPU or the older TARGET_INFO_CUDA_GPU, the
// ENUM_* tables or, without them, CUPTI's copyKind and memory-kind numbers.

#include "base/nsys/summary.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace base::nsys {

/// The bounds one export is read within. A file of a few KiB can hold a recursive view or a value
/// of gigabytes; Nsight Systems writes neither, so a file past these bounds is refused.
struct ReadLimits {
    /// The longest string or blob SQLite hands back (SQLITE_LIMIT_LENGTH): the longest C++
    /// kernel name Nsight Systems stores is some KiB.
    std::int64_t value_bytes = 4 << 20;
    /// The most wall-clock time reading one file may take; a real export of millions of kernels
    /// reads in a few seconds.
    std::chrono::seconds deadline = std::chrono::seconds(60);
};

/// Opens `path` read-only and reads its kernels, memcpys and memsets, GPU names, versions and trace
/// span. Throws base::Error naming the file and what it lacks: not readable, not SQLite, not an
/// Nsight Systems export, no CUDA activity tables, a CUDA table without the columns every version
/// has; or what is wrong with it: a view or virtual table where a table is read, a value longer
/// than `limits.value_bytes`, reading that took longer than `limits.deadline`. Only real tables
/// are read. An export whose CUDA tables are empty is no error.
Trace read_export(const std::string& path, const ReadLimits& limits = {});

/// The exports to read for the command line's FILE arguments: a file as given, a directory as the
/// *.sqlite files in it (rank2 before rank10). Throws base::Error for a directory without any.
std::vector<std::string> export_files(const std::vector<std::string>& arguments);

} // namespace base::nsys
