#include "launcher/gpu_ownership.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <unistd.h>

using launcher::GpuProcessList;
using launcher::OwnershipIssueKind;
using launcher::ProcessInfo;
using launcher::RankRecord;

namespace {

base::PciAddress bus(const char* text)
{
    return *base::PciAddress::parse(text);
}

// A node with four GPUs: 0-3 at buses 07, 0f, 47, 4e.
const std::vector<base::PciAddress> buses = {
    bus("0000:07:00.0"), bus("0000:0f:00.0"), bus("0000:47:00.0"), bus("0000:4e:00.0")};

// Ranks 0..n-1 of a job with pids 1000 + rank, local rank i on GPU i / per_gpu.
std::vector<RankRecord> ranks(unsigned n, unsigned per_gpu = 1)
{
    std::vector<RankRecord> out;
    for (unsigned r = 0; r < n; ++r) {
        out.push_back(RankRecord{r, r, 1000 + r, 7, buses[r / per_gpu]});
    }
    return out;
}

// NVML's lists: GPU index -> pids; the first `job_gpus` GPUs are the job's.
std::vector<GpuProcessList> lists(const std::map<unsigned, std::vector<unsigned>>& pids, unsigned job_gpus)
{
    std::vector<GpuProcessList> out;
    for (unsigned g = 0; g < buses.size(); ++g) {
        GpuProcessList l;
        l.gpu = base::usage::MonitoredGpu{g, buses[g], "A100", ""};
        l.job_gpu = g < job_gpus;
        if (auto it = pids.find(g); it != pids.end()) {
            l.pids = it->second;
        }
        out.push_back(l);
    }
    return out;
}

// This node's processes: the ranks (children of mpirun, pid 900), a rank's DataLoader worker
// (2000, child of rank 1), another user's python (4242). Any other pid does not exist here.
launcher::ProcessLookup table()
{
    return [](unsigned pid) -> std::optional<ProcessInfo> {
        static const std::map<unsigned, ProcessInfo> known = {{900, {1, 'S', 1, "mpirun"}},
            {1000, {900, 'S', 7, "python"}}, {1001, {900, 'S', 7, "python"}}, {1002, {900, 'S', 7, "python"}},
            {1003, {900, 'S', 7, "python"}}, {2000, {1001, 'S', 9, "pt_data_worker"}}, {4242, {1, 'R', 3, "python3"}}};
        auto it = known.find(pid);
        return it == known.end() ? std::nullopt : std::optional(it->second);
    };
}

} // namespace

TEST(GpuOwnership, EachRankOnItsOwnGpuIsClean)
{
    auto check = launcher::check_ownership(
        ranks(4), lists({{0, {1000}}, {1, {1001, 2000}}, {2, {1002}}, {3, {1003}}}, 4), table(), false);
    EXPECT_TRUE(check.issues.empty()) << check.issues.front().message;
    EXPECT_EQ(check.job_processes, 5U) << "the rank's DataLoader worker counts as the rank";
    EXPECT_EQ(check.processes_on_job_gpus, 5U);
    EXPECT_FALSE(check.looks_like_container);
}

TEST(GpuOwnership, AllRanksOnGpuZeroIgnoreLocalRank)
{
    auto check = launcher::check_ownership(ranks(4), lists({{0, {1000, 1001, 1002, 1003}}}, 4), table(), false);
    ASSERT_EQ(check.issues.size(), 1U);
    const auto& issue = check.issues[0];
    EXPECT_EQ(issue.kind, OwnershipIssueKind::wrong_gpu);
    EXPECT_EQ(issue.gpu.index, 0U);
    EXPECT_EQ(issue.ranks, (std::vector<unsigned>{0, 1, 2, 3}));
    EXPECT_TRUE(issue.job_fault);
    EXPECT_EQ(issue.message,
        "ranks 0-3 all opened GPU 0 (0000:07:00.0); the program ignores LOCAL_RANK: try --gpu-visibility=isolate");
}

TEST(GpuOwnership, RankOnAnotherRanksGpu)
{
    // Rank 2 opened GPU 1 (rank 1's) instead of its own GPU 2; rank 1's DataLoader worker (pid
    // 2000) opened GPU 3, which is no GPU of this job.
    auto check =
        launcher::check_ownership(ranks(3), lists({{0, {1000}}, {1, {1001, 1002}}, {3, {2000}}}, 3), table(), false);
    ASSERT_EQ(check.issues.size(), 2U);
    EXPECT_EQ(check.issues[0].message,
        "ranks 1-2 opened GPU 1 (0000:0f:00.0), which the plan gave rank 1 alone; the program ignores LOCAL_RANK: try "
        "--gpu-visibility=isolate");
    EXPECT_EQ(check.issues[1].message,
        "rank 1 opened GPU 3 (0000:4e:00.0), not its own GPU 1 (0000:0f:00.0); the program ignores LOCAL_RANK: try "
        "--gpu-visibility=isolate");
}

TEST(GpuOwnership, RanksThatShareAGpuByPlanAreFine)
{
    // --ranks-per-gpu 2: ranks 0 and 1 are both given GPU 0.
    auto check =
        launcher::check_ownership(ranks(4, 2), lists({{0, {1000, 1001}}, {1, {1002, 1003}}}, 2), table(), false);
    EXPECT_TRUE(check.issues.empty()) << check.issues.front().message;
}

TEST(GpuOwnership, ForeignProcessesAreNamedButNotTheJobsFault)
{
    auto check =
        launcher::check_ownership(ranks(2), lists({{0, {1000, 4242}}, {1, {1001}}, {3, {4242}}}, 2), table(), false);
    ASSERT_EQ(check.issues.size(), 1U) << "GPU 3 is not the job's: its processes are not this job's business";
    EXPECT_EQ(check.issues[0].kind, OwnershipIssueKind::foreign);
    EXPECT_FALSE(check.issues[0].job_fault);
    EXPECT_EQ(check.issues[0].pids, std::vector<unsigned>{4242});
    EXPECT_EQ(check.issues[0].message,
        "GPU 0 (0000:07:00.0) is also used by pid 4242 (python3), not part of this job: it competes with the job for "
        "kernel time and memory");
}

TEST(GpuOwnership, HostPidsInAContainerFallBackToCounts)
{
    // NVML reports host pids (5xxxxx) that this pid namespace does not have: none is a rank.
    const auto host_pids = lists({{0, {500001}}, {1, {500002, 500003, 500004}}}, 2);
    auto check = launcher::check_ownership(ranks(2), host_pids, table(), false);
    EXPECT_TRUE(check.looks_like_container);
    EXPECT_EQ(check.job_processes, 0U);
    EXPECT_EQ(check.processes_on_job_gpus, 4U);
    EXPECT_TRUE(check.issues.empty()) << "unknown pids are not called foreign";
    EXPECT_EQ(launcher::counts_only_notice(check.processes_on_job_gpus),
        "NVML shows none of the job's PIDs but 4 processes on the job's GPUs: probably a container (NVML reports host "
        "PIDs); checking per-GPU counts only");

    auto counted = launcher::check_ownership(ranks(2), host_pids, table(), true);
    EXPECT_TRUE(counted.counts_only);
    ASSERT_EQ(counted.issues.size(), 1U);
    EXPECT_EQ(counted.issues[0].kind, OwnershipIssueKind::crowded);
    EXPECT_EQ(counted.issues[0].gpu.index, 1U);
    EXPECT_TRUE(counted.issues[0].job_fault);
    EXPECT_EQ(counted.issues[0].message,
        "GPU 1 (0000:0f:00.0) has 3 processes for 1 rank of this job: ranks share it (the program ignores LOCAL_RANK: "
        "try --gpu-visibility=isolate), a rank's workers opened it, or another job uses it");
}

TEST(GpuOwnership, AnUnknownPidBesideTheRanksIsNoContainer)
{
    // A process that exited between NVML's list and /proc, next to the ranks themselves.
    auto check = launcher::check_ownership(ranks(2), lists({{0, {1000, 777777}}, {1, {1001}}}, 2), table(), false);
    EXPECT_FALSE(check.looks_like_container);
    EXPECT_TRUE(check.issues.empty());
}

TEST(GpuOwnership, ProcLookupReadsStatAndComm)
{
    test_support::TempDir dir;
    const auto proc = dir / "proc/4242";
    std::filesystem::create_directories(proc);
    // comm may hold spaces and parentheses: the stat line is split at its last ')'.
    std::ofstream(proc / "stat") << "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 "
                                    "123456 1000 10 18446744073709551615\n";
    std::ofstream(proc / "comm") << "my (odd) name\n";
    auto lookup = launcher::proc_lookup(base::Sysroot(dir.path()));
    auto info = lookup(4242);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->ppid, 17U);
    EXPECT_EQ(info->state, 'S');
    EXPECT_EQ(info->start_time, 123456U);
    EXPECT_EQ(info->name, "my (odd) name");
    EXPECT_FALSE(lookup(4243));
    // Another user's process named with a terminal escape: shown escaped.
    std::ofstream(proc / "comm") << "\x1b]0;owned\a\n";
    EXPECT_EQ(lookup(4242)->name, "\\x1b]0;owned\\x07");

    RankRecord r{0, 0, 4242, 123456, buses[0]};
    EXPECT_TRUE(launcher::rank_alive(r, lookup));
    r.start_time = 99;
    EXPECT_FALSE(launcher::rank_alive(r, lookup)) << "a reused pid is not the rank";
    std::ofstream(proc / "stat") << "4242 (x) Z 17 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0\n";
    r.start_time = 123456;
    EXPECT_FALSE(launcher::rank_alive(r, lookup)) << "a zombie has exited";

    auto self = launcher::proc_lookup(base::Sysroot("/"))(static_cast<unsigned>(getpid()));
    ASSERT_TRUE(self);
    EXPECT_EQ(self->ppid, static_cast<unsigned>(getppid()));
    EXPECT_GT(self->start_time, 0U);
}
