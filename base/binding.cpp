#include "base/binding.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace base {

namespace {

// The kernel's memory policy modes (linux/mempolicy.h; not every libc has the last one).
enum Mode : int { mpol_default = 0, mpol_preferred = 1, mpol_bind = 2, mpol_local = 4, mpol_preferred_many = 5 };

constexpr unsigned long max_nodes = 1024;
constexpr unsigned long bits_per_word = 8 * sizeof(unsigned long);
using NodeMask = unsigned long[max_nodes / bits_per_word];

long set_mempolicy(int mode, const std::vector<unsigned>& nodes)
{
    NodeMask mask = {};
    for (unsigned n : nodes) {
        mask[n / bits_per_word] |= 1UL << (n % bits_per_word);
    }
    // maxnode counts one bit more than the mask holds: the kernel reads maxnode - 1 bits.
    return syscall(SYS_set_mempolicy, mode, mask, max_nodes + 1);
}

} // namespace

void bind_cpus(const CpuSet& cpus)
{
    if (cpus.empty()) {
        throw Error("cannot bind to an empty set of CPUs");
    }
    const unsigned count = cpus.cpus().back() + 1;
    const std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> mask(CPU_ALLOC(count), [](cpu_set_t* m) { CPU_FREE(m); });
    if (!mask) {
        throw Error(fmt::format("cannot bind to CPUs {}: out of memory", cpus.to_list()));
    }
    const std::size_t size = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size, mask.get());
    for (unsigned cpu : cpus.cpus()) {
        CPU_SET_S(cpu, size, mask.get());
    }
    if (sched_setaffinity(0, size, mask.get()) != 0) {
        throw Error(fmt::format("sched_setaffinity({}) failed: {}", cpus.to_list(), std::strerror(errno)));
    }
}

void bind_memory(const std::vector<unsigned>& numa_nodes, MemoryPolicy policy)
{
    if (policy == MemoryPolicy::none || numa_nodes.empty()) {
        return;
    }
    for (unsigned n : numa_nodes) {
        if (n >= max_nodes) {
            throw Error(
                fmt::format("cannot bind memory to NUMA node {}: past the {} nodes the kernel takes", n, max_nodes));
        }
    }
    long rc = 0;
    if (policy == MemoryPolicy::strict) {
        rc = set_mempolicy(mpol_bind, numa_nodes);
    } else {
        rc = set_mempolicy(mpol_preferred_many, numa_nodes);
        if (rc != 0 && errno == EINVAL) { // before Linux 5.15: one preferred node
            rc = set_mempolicy(mpol_preferred, {numa_nodes.front()});
        }
    }
    if (rc != 0) {
        throw Error(
            fmt::format("set_mempolicy(nodes {}) failed: {}", CpuSet(numa_nodes).to_list(), std::strerror(errno)));
    }
}

CpuSet cpu_binding()
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        return CpuSet();
    }
    std::vector<unsigned> cpus;
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &mask)) {
            cpus.push_back(cpu);
        }
    }
    return CpuSet(std::move(cpus));
}

std::string memory_binding()
{
    NodeMask mask = {};
    int mode = 0;
    if (syscall(SYS_get_mempolicy, &mode, mask, max_nodes, nullptr, 0UL) != 0) {
        return "unknown";
    }
    std::vector<unsigned> nodes;
    for (unsigned n = 0; n < max_nodes; ++n) {
        if ((mask[n / bits_per_word] >> (n % bits_per_word)) & 1UL) {
            nodes.push_back(n);
        }
    }
    static const char* const names[] = {"default", "preferred", "bind", "interleave", "local", "preferred-many"};
    const int base = mode & 0xff;
    const char* name = base >= 0 && base <= mpol_preferred_many ? names[base] : "other";
    if (base == mpol_default || base == mpol_local) {
        return name;
    }
    return fmt::format("{} {}", name, CpuSet(nodes).to_list());
}

} // namespace base
