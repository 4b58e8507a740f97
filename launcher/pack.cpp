#include "launcher/pack.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

namespace launcher {

namespace {

// Indices of `hosts`, most free GPUs first, ties in the given order.
std::vector<std::size_t> by_free_gpus(const std::vector<HostCapacity>& hosts)
{
    std::vector<std::size_t> order(hosts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(
        order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return hosts[a].free > hosts[b].free; });
    return order;
}

std::string gpus(unsigned n)
{
    return fmt::format("{} free GPU{}", n, n == 1 ? "" : "s");
}

} // namespace

unsigned fewest_hosts(const std::vector<HostCapacity>& hosts, unsigned ranks)
{
    unsigned held = 0;
    unsigned used = 0;
    for (std::size_t i : by_free_gpus(hosts)) {
        if (held >= ranks) {
            break;
        }
        if (hosts[i].free == 0) {
            return 0;
        }
        held += hosts[i].free;
        ++used;
    }
    return held >= ranks ? used : 0;
}

PackChoice pack_hosts(const std::vector<HostCapacity>& hosts, unsigned ranks)
{
    const unsigned needed = fewest_hosts(hosts, ranks);
    if (needed == 0) {
        unsigned total = 0;
        for (const auto& h : hosts) {
            total += h.free;
        }
        throw base::Error(fmt::format("--pack: {} ranks, but the {} host{} have only {} together; add hosts, free "
                                      "GPUs, or lower -np",
            ranks, hosts.size(), hosts.size() == 1 ? "" : "s", gpus(total)));
    }
    const auto order = by_free_gpus(hosts);
    std::vector<bool> taken(hosts.size(), false);
    for (unsigned k = 0; k < needed; ++k) {
        taken[order[k]] = true;
    }
    PackChoice choice;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        if (taken[i]) {
            choice.chosen.push_back(HostSlots{hosts[i].name, hosts[i].free});
        } else if (hosts[i].free == 0) {
            choice.left_out.push_back(LeftOutHost{hosts[i].name, "no free GPUs"});
        } else {
            choice.left_out.push_back(LeftOutHost{hosts[i].name,
                fmt::format(
                    "{}; not needed: the job fits on {} host{}", gpus(hosts[i].free), needed, needed == 1 ? "" : "s")});
        }
    }
    return choice;
}

} // namespace launcher
