#pragma once

#include "base/cpu_set.hpp"

#include <string>
#include <vector>

namespace base {

/// How a rank's memory is placed on its NUMA nodes (--mem-bind).
enum class MemoryPolicy { none, preferred, strict };

// Binding of the calling thread, straight through the kernel: the rank helper binds itself (one
// thread) before it starts the program, which inherits both settings across fork and exec. No
// topology is needed, so a helper given its node's plan binds without loading one.

/// Binds the calling thread to `cpus` (sched_setaffinity). Throws base::Error.
void bind_cpus(const CpuSet& cpus);

/// Sets the calling thread's memory policy to `numa_nodes`: MPOL_BIND for `strict`; for
/// `preferred`, MPOL_PREFERRED_MANY (Linux 5.15 and later), else MPOL_PREFERRED on the first node.
/// Nothing for `none` or no nodes. Throws base::Error.
void bind_memory(const std::vector<unsigned>& numa_nodes, MemoryPolicy policy);

/// The CPUs the calling thread may run on, as the kernel reports them.
CpuSet cpu_binding();

/// The calling thread's memory policy and its nodes, as the kernel reports them ("default",
/// "preferred 0", "bind 0-1", "preferred-many 2", ...).
std::string memory_binding();

} // namespace base
