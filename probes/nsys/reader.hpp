#pragma once

// Reads the SQLite export of an Nsight Systems report (nsys profile --export sqlite, or nsys export
// --type sqlite) into probes::nsys::Trace. Every schema from 2021 to 2026 is read by looking at
// which tables and columns the file has: TARGET_INFO_GPU or the older TARGET_INFO_CUDA_GPU, the
// ENUM_* tables or, without them, CUPTI's copyKind and memory-kind numbers.

#include "probes/nsys/summary.hpp"

#include <string>
#include <vector>

namespace probes::nsys {

/// Opens `path` read-only and reads its kernels, memcpys and memsets, GPU names, versions and trace
/// span. Throws probes::Error naming the file and what it lacks: not readable, not SQLite, not an
/// Nsight Systems export, no CUDA activity tables, a CUDA table without the columns every version
/// has. An export whose CUDA tables are empty is no error.
Trace read_export(const std::string& path);

/// The exports to read for the command line's FILE arguments: a file as given, a directory as the
/// *.sqlite files in it (rank2 before rank10). Throws probes::Error for a directory without any.
std::vector<std::string> export_files(const std::vector<std::string>& arguments);

} // namespace probes::nsys
