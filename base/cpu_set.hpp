#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace base {

/// A set of logical CPU numbers (Linux OS indexes), kept sorted and unique. Pure value type so the
/// launch plan can be computed and compared without hwloc.
class CpuSet {
public:
    CpuSet() = default;
    CpuSet(std::initializer_list<unsigned> cpus);
    explicit CpuSet(std::vector<unsigned> cpus);

    /// Parses a Linux cpulist such as "0-3,8,10-11" (as in /sys and /proc/self/status).
    /// Throws base::Error naming the bad text.
    static CpuSet parse(std::string_view cpulist);

    /// Formats as a Linux cpulist ("48-63,176-191"); an empty set is "".
    std::string to_list() const;

    bool empty() const { return m_cpus.empty(); }
    std::size_t size() const { return m_cpus.size(); }
    bool contains(unsigned cpu) const;
    const std::vector<unsigned>& cpus() const { return m_cpus; }
    unsigned first() const { return m_cpus.front(); }

    CpuSet intersect(const CpuSet& other) const;
    CpuSet unite(const CpuSet& other) const;
    CpuSet minus(const CpuSet& other) const;
    bool intersects(const CpuSet& other) const;
    bool includes(const CpuSet& other) const;

    friend bool operator==(const CpuSet&, const CpuSet&) = default;

private:
    std::vector<unsigned> m_cpus;
};

/// "0-3,5,7": sorted numbers with runs as ranges (GPU indexes, ranks), a cpulist's notation.
std::string format_ranges(std::vector<unsigned> numbers);

} // namespace base
