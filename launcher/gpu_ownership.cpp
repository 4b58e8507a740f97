#include "launcher/gpu_ownership.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>
#include <sstream>

namespace launcher {

namespace {

using base::format_ranges;

constexpr const char* ignores_local_rank = "the program ignores LOCAL_RANK: try --gpu-visibility=isolate";
constexpr int max_ancestors = 64;

std::string gpu_name(const base::usage::MonitoredGpu& gpu)
{
    return fmt::format("GPU {} ({})", gpu.index, gpu.bus_id.to_string());
}

std::string plural(std::size_t n, const char* one, const char* many)
{
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

// The rank a process belongs to: the rank itself, or the rank it descends from.
std::optional<std::size_t> owner(
    unsigned pid, const std::vector<RankRecord>& ranks, const ProcessLookup& lookup, bool* unknown)
{
    *unknown = false;
    for (int depth = 0; depth < max_ancestors && pid > 1; ++depth) {
        for (std::size_t r = 0; r < ranks.size(); ++r) {
            if (ranks[r].pid == pid) {
                return r;
            }
        }
        const auto info = lookup(pid);
        if (!info) {
            *unknown = depth == 0;
            return std::nullopt;
        }
        pid = info->ppid;
    }
    return std::nullopt;
}

std::string wrong_gpu_message(const GpuProcessList& list, const std::vector<unsigned>& on,
    const std::vector<RankRecord>& ranks, const std::vector<GpuProcessList>& lists)
{
    std::vector<unsigned> owners;
    for (const auto& r : ranks) {
        if (r.gpu == list.gpu.bus_id) {
            owners.push_back(r.rank);
        }
    }
    if (on.size() >= 2 && on.size() == ranks.size()) {
        return fmt::format("ranks {} all opened {}; {}", format_ranges(on), gpu_name(list.gpu), ignores_local_rank);
    }
    if (on.size() == 1) {
        const auto& rank =
            *std::find_if(ranks.begin(), ranks.end(), [&](const RankRecord& r) { return r.rank == on[0]; });
        auto own =
            std::find_if(lists.begin(), lists.end(), [&](const GpuProcessList& l) { return l.gpu.bus_id == rank.gpu; });
        return fmt::format("rank {} opened {}, not its own {}; {}", rank.rank, gpu_name(list.gpu),
            own != lists.end() ? gpu_name(own->gpu) : "GPU at " + rank.gpu.to_string(), ignores_local_rank);
    }
    return fmt::format("ranks {} opened {}, which the plan gave {}; {}", format_ranges(on), gpu_name(list.gpu),
        owners.empty() ? std::string("no rank on this node")
                       : fmt::format("rank{} {} alone", owners.size() == 1 ? "" : "s", format_ranges(owners)),
        ignores_local_rank);
}

} // namespace

ProcessLookup proc_lookup(const base::Sysroot& sysroot)
{
    return [sysroot](unsigned pid) -> std::optional<ProcessInfo> {
        const auto stat = sysroot.read(fmt::format("/proc/{}/stat", pid));
        if (!stat) {
            return std::nullopt;
        }
        // "pid (comm) state ppid ... starttime(22) ...": comm may hold spaces and parentheses.
        const auto open = stat->find('(');
        const auto close = stat->rfind(')');
        if (open == std::string::npos || close == std::string::npos || close < open) {
            return std::nullopt;
        }
        ProcessInfo info;
        info.name = stat->substr(open + 1, close - open - 1);
        std::istringstream fields(stat->substr(close + 1));
        std::string skip;
        fields >> info.state >> info.ppid;
        for (int field = 5; field < 22 && fields >> skip; ++field) { }
        fields >> info.start_time;
        if (auto comm = sysroot.read_line(fmt::format("/proc/{}/comm", pid)); comm && !comm->empty()) {
            info.name = *comm;
        }
        // Another user names their process as they like, terminal escapes included.
        info.name = base::escape_controls(info.name, false);
        return info;
    };
}

bool rank_alive(const RankRecord& rank, const ProcessLookup& lookup)
{
    const auto info = lookup(rank.pid);
    return info && info->state != 'Z' && info->state != 'X' &&
        (rank.start_time == 0 || info->start_time == rank.start_time);
}

OwnershipCheck check_ownership(const std::vector<RankRecord>& ranks, const std::vector<GpuProcessList>& lists,
    const ProcessLookup& lookup, bool counts_only)
{
    OwnershipCheck check;
    check.counts_only = counts_only;
    bool unknown_on_job_gpus = false;
    // Per list: the ranks with a process on it, and the processes of no rank.
    std::vector<std::set<unsigned>> ranks_on(lists.size());
    std::vector<std::vector<unsigned>> foreign(lists.size());
    for (std::size_t l = 0; l < lists.size(); ++l) {
        std::set<unsigned> pids(lists[l].pids.begin(), lists[l].pids.end());
        if (lists[l].job_gpu) {
            check.processes_on_job_gpus += static_cast<unsigned>(pids.size());
        }
        for (unsigned pid : pids) {
            bool unknown = false;
            if (auto r = owner(pid, ranks, lookup, &unknown)) {
                ++check.job_processes;
                ranks_on[l].insert(ranks[*r].rank);
            } else if (lists[l].job_gpu && unknown) {
                unknown_on_job_gpus = true;
            } else if (lists[l].job_gpu) {
                foreign[l].push_back(pid);
            }
        }
    }
    check.looks_like_container = check.job_processes == 0 && check.processes_on_job_gpus > 0 && unknown_on_job_gpus;

    if (counts_only) {
        for (const auto& list : lists) {
            if (!list.job_gpu) {
                continue;
            }
            const std::set<unsigned> pids(list.pids.begin(), list.pids.end());
            const auto given = static_cast<std::size_t>(std::count_if(
                ranks.begin(), ranks.end(), [&](const RankRecord& r) { return r.gpu == list.gpu.bus_id; }));
            if (pids.size() > std::max<std::size_t>(given, 1)) {
                OwnershipIssue issue;
                issue.kind = OwnershipIssueKind::crowded;
                issue.gpu = list.gpu;
                issue.pids.assign(pids.begin(), pids.end());
                issue.job_fault = true;
                issue.message = fmt::format("{} has {} for {} of this job: ranks share it ({}), a rank's workers "
                                            "opened it, or another job uses it",
                    gpu_name(list.gpu), plural(pids.size(), "process", "processes"), plural(given, "rank", "ranks"),
                    ignores_local_rank);
                check.issues.push_back(issue);
            }
        }
        return check;
    }

    for (std::size_t l = 0; l < lists.size(); ++l) {
        const std::vector<unsigned> on(ranks_on[l].begin(), ranks_on[l].end());
        const bool stranger = std::any_of(on.begin(), on.end(), [&](unsigned rank) {
            return std::any_of(ranks.begin(), ranks.end(),
                [&](const RankRecord& r) { return r.rank == rank && r.gpu != lists[l].gpu.bus_id; });
        });
        if (stranger) {
            OwnershipIssue issue;
            issue.kind = OwnershipIssueKind::wrong_gpu;
            issue.gpu = lists[l].gpu;
            issue.ranks = on;
            issue.job_fault = true;
            issue.message = wrong_gpu_message(lists[l], on, ranks, lists);
            check.issues.push_back(issue);
        }
    }
    for (std::size_t l = 0; l < lists.size(); ++l) {
        if (foreign[l].empty()) {
            continue;
        }
        std::vector<std::string> named;
        for (unsigned pid : foreign[l]) {
            const auto info = lookup(pid);
            named.push_back(
                info && !info->name.empty() ? fmt::format("pid {} ({})", pid, info->name) : fmt::format("pid {}", pid));
        }
        OwnershipIssue issue;
        issue.kind = OwnershipIssueKind::foreign;
        issue.gpu = lists[l].gpu;
        issue.pids = foreign[l];
        issue.message = fmt::format("{} is also used by {}, not part of this job: {} with the job for kernel time and "
                                    "memory",
            gpu_name(lists[l].gpu), fmt::join(named, ", "), named.size() == 1 ? "it competes" : "they compete");
        check.issues.push_back(issue);
    }
    return check;
}

std::string counts_only_notice(unsigned processes_on_job_gpus)
{
    return fmt::format("NVML shows none of the job's PIDs but {} on the job's GPUs: probably a container (NVML "
                       "reports host PIDs); checking per-GPU counts only",
        plural(processes_on_job_gpus, "process", "processes"));
}

} // namespace launcher
