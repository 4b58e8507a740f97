#pragma once

// What each rank_probe rank wrote: $PROBE_DIR/rank-<RANK>.txt, one NAME=VALUE line each.
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace test_support {

using RankValues = std::multimap<std::string, std::string>;

inline RankValues read_rank(const TempDir& dir, unsigned rank)
{
    RankValues values;
    std::ifstream in(dir / ("rank-" + std::to_string(rank) + ".txt"));
    std::string line;
    while (std::getline(in, line)) {
        auto eq = line.find('=');
        values.emplace(line.substr(0, eq), line.substr(eq + 1));
    }
    return values;
}

/// The first value of `key`, or "<missing>" (the probe writes "<unset>" for an unset variable).
inline std::string one(const RankValues& v, const std::string& key)
{
    auto it = v.find(key);
    return it == v.end() ? "<missing>" : it->second;
}

/// The pids ranks 0..n-1 wrote to $PROBE_DIR/pid-<RANK> (PROBE_SLEEP), once all n are there; fewer
/// when `timeout` passes first.
inline std::vector<pid_t> wait_for_rank_pids(const TempDir& dir, unsigned n, std::chrono::milliseconds timeout)
{
    std::vector<pid_t> pids;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
        pids.clear();
        for (unsigned rank = 0; rank < n; ++rank) {
            std::ifstream in(dir / ("pid-" + std::to_string(rank)));
            pid_t p = 0;
            if (in >> p) {
                pids.push_back(p);
            }
        }
        if (pids.size() == n || std::chrono::steady_clock::now() >= until) {
            return pids;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

/// Kills `pid` (a gpurun whose ranks did not start) and returns what it wrote to `log`.
inline std::string kill_and_read(pid_t pid, const std::filesystem::path& log)
{
    kill(pid, SIGKILL);
    wait_for(pid, std::chrono::seconds(5));
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Interrupted {
    int code = -1; ///< the exit code; -1 when it did not end in time and was killed
    std::chrono::steady_clock::duration took{};
};

/// Sends SIGINT to `pid` (Ctrl-C) and waits for it up to `limit`, then SIGKILLs it.
inline Interrupted interrupt(pid_t pid, std::chrono::seconds limit)
{
    const auto sent = std::chrono::steady_clock::now();
    kill(pid, SIGINT);
    Interrupted result;
    result.code = wait_for(pid, limit);
    result.took = std::chrono::steady_clock::now() - sent;
    if (result.code == -1) {
        kill(pid, SIGKILL);
        wait_for(pid, std::chrono::seconds(5));
    }
    return result;
}

} // namespace test_support
