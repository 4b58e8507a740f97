#include "base/cpu_set.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace base {

namespace {

// A cpulist larger than this is certainly garbage; it keeps a malformed "0-4000000000" from
// allocating gigabytes.
constexpr unsigned max_cpu = 1U << 20;

unsigned parse_number(std::string_view text, std::string_view whole)
{
    unsigned value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value > max_cpu) {
        throw Error(fmt::format("invalid cpulist '{}': '{}' is not a CPU number", whole, text));
    }
    return value;
}

void normalise(std::vector<unsigned>& cpus)
{
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
}

} // namespace

CpuSet::CpuSet(std::initializer_list<unsigned> cpus) : m_cpus(cpus)
{
    normalise(m_cpus);
}

CpuSet::CpuSet(std::vector<unsigned> cpus) : m_cpus(std::move(cpus))
{
    normalise(m_cpus);
}

CpuSet CpuSet::parse(std::string_view cpulist)
{
    std::string_view text = cpulist;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    std::vector<unsigned> cpus;
    if (text.empty()) {
        return CpuSet();
    }
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t comma = text.find(',', pos);
        std::string_view item =
            text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        std::size_t dash = item.find('-');
        if (dash == std::string_view::npos) {
            cpus.push_back(parse_number(item, cpulist));
        } else {
            unsigned lo = parse_number(item.substr(0, dash), cpulist);
            unsigned hi = parse_number(item.substr(dash + 1), cpulist);
            if (hi < lo) {
                throw Error(fmt::format("invalid cpulist '{}': range '{}' runs backwards", cpulist, item));
            }
            for (unsigned cpu = lo; cpu <= hi; ++cpu) {
                cpus.push_back(cpu);
            }
        }
        if (comma == std::string_view::npos) {
            break;
        }
        pos = comma + 1;
    }
    return CpuSet(std::move(cpus));
}

std::string CpuSet::to_list() const
{
    std::string out;
    for (std::size_t i = 0; i < m_cpus.size();) {
        std::size_t j = i;
        while (j + 1 < m_cpus.size() && m_cpus[j + 1] == m_cpus[j] + 1) {
            ++j;
        }
        if (!out.empty()) {
            out += ',';
        }
        out += std::to_string(m_cpus[i]);
        if (j > i) {
            out += '-';
            out += std::to_string(m_cpus[j]);
        }
        i = j + 1;
    }
    return out;
}

bool CpuSet::contains(unsigned cpu) const
{
    return std::binary_search(m_cpus.begin(), m_cpus.end(), cpu);
}

CpuSet CpuSet::intersect(const CpuSet& other) const
{
    std::vector<unsigned> out;
    std::set_intersection(
        m_cpus.begin(), m_cpus.end(), other.m_cpus.begin(), other.m_cpus.end(), std::back_inserter(out));
    return CpuSet(std::move(out));
}

CpuSet CpuSet::unite(const CpuSet& other) const
{
    std::vector<unsigned> out;
    std::set_union(m_cpus.begin(), m_cpus.end(), other.m_cpus.begin(), other.m_cpus.end(), std::back_inserter(out));
    return CpuSet(std::move(out));
}

CpuSet CpuSet::minus(const CpuSet& other) const
{
    std::vector<unsigned> out;
    std::set_difference(
        m_cpus.begin(), m_cpus.end(), other.m_cpus.begin(), other.m_cpus.end(), std::back_inserter(out));
    return CpuSet(std::move(out));
}

bool CpuSet::intersects(const CpuSet& other) const
{
    return !intersect(other).empty();
}

bool CpuSet::includes(const CpuSet& other) const
{
    return std::includes(m_cpus.begin(), m_cpus.end(), other.m_cpus.begin(), other.m_cpus.end());
}

std::string format_ranges(std::vector<unsigned> numbers)
{
    return CpuSet(std::move(numbers)).to_list();
}

} // namespace base
