#pragma once

#include "base/cuda.hpp"
#include "base/dynamic_library.hpp"

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace base {

/// The slice of nccl.h this project calls, declared here so the build needs no NCCL headers.
namespace nccl_abi {
using Result = int; // ncclResult_t
using Comm = struct ncclComm*;
constexpr Result success = 0;
constexpr int float32 = 7; // ncclFloat32
constexpr int sum = 0; // ncclSum
/// ncclUniqueId: what every process of one communicator is given (NCCL_UNIQUE_ID_BYTES).
struct UniqueId {
    char internal[128];
};
} // namespace nccl_abi

/// ncclGetVersion()'s number as text: major*1000+minor*100+patch up to 2.8, major*10000+minor*100+patch
/// from 2.9 on (21803 = "2.18.3"; 2804 = "2.8.4").
std::string nccl_version_text(int version);

struct NcclApi {
    nccl_abi::Result (*get_version)(int*) = nullptr; // ncclGetVersion
    nccl_abi::Result (*comm_init_all)(nccl_abi::Comm*, int, const int*) = nullptr; // ncclCommInitAll
    nccl_abi::Result (*comm_destroy)(nccl_abi::Comm) = nullptr; // ncclCommDestroy
    nccl_abi::Result (*all_reduce)(const void*, void*, std::size_t, int, int, nccl_abi::Comm,
        cuda_abi::Stream) = nullptr; // ncclAllReduce
    nccl_abi::Result (*group_start)() = nullptr; // ncclGroupStart
    nccl_abi::Result (*group_end)() = nullptr; // ncclGroupEnd
    const char* (*error_string)(nccl_abi::Result) = nullptr; // ncclGetErrorString, optional
    // For a communicator across processes (every NCCL 2 has them; a library without is refused there).
    nccl_abi::Result (*get_unique_id)(nccl_abi::UniqueId*) = nullptr; // ncclGetUniqueId
    nccl_abi::Result (*comm_init_rank)(nccl_abi::Comm*, int, nccl_abi::UniqueId, int) = nullptr; // ncclCommInitRank
};

/// libnccl.so.2 (or GPUKIT_NCCL_LIBRARY), loaded with dlopen. Throws base::Error naming the
/// file when it is missing or lacks a symbol the all-reduce needs.
class Nccl {
public:
    static Nccl load();
    static Nccl load(const std::string& file);
    static std::string default_file();

    /// "2.21.5" (ncclGetVersion's encoding changed at 2.9).
    std::string version() const;
    /// NCCL's text for a result: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)
    /// (ncclResult 1)".
    std::string describe(nccl_abi::Result rc) const;
    /// Throws base::Error "<what> failed: <describe(rc)>".
    void check(nccl_abi::Result rc, const std::string& what) const;

    const NcclApi& api() const { return m_api; }
    const std::string& file() const { return m_library.file(); }

private:
    Nccl(DynamicLibrary library, NcclApi api);
    DynamicLibrary m_library;
    NcclApi m_api;
};

/// How the all-reduce is timed, like nccl-tests' all_reduce_perf at one size: `warmup`
/// all-reduces, then `iterations` between events on every GPU's stream; the time of one is the
/// slowest GPU's elapsed time divided by the iterations.
struct AllReduceSettings {
    std::size_t bytes = std::size_t{1} << 30; ///< per GPU, float32 sum, out of place
    unsigned warmup = 5;
    unsigned iterations = 20;
};

struct AllReduceResult {
    AllReduceSettings settings;
    std::string nccl_version;
    std::vector<int> devices; ///< CUDA device ordinals, one rank each
    int ranks = 0; ///< of the communicator: the devices, or a joined communicator's ranks
    double time_us = 0; ///< one all-reduce
    double algbw_gbps = 0; ///< bytes / time
    double busbw_gbps = 0; ///< algbw × 2(n-1)/n
};

/// nccl-tests' bus-bandwidth factor for all-reduce: 2(n-1)/n (0 for n < 1).
double allreduce_bus_factor(int ranks);
/// algbw and busbw (GB/s) of an all-reduce of `bytes` per rank that took `time_us`.
void allreduce_rates(std::size_t bytes, double time_us, int ranks, double& algbw_gbps, double& busbw_gbps);

/// A communicator that other processes (on other nodes) join too: `ranks` in all, this process's
/// devices being ranks `first_rank`, `first_rank` + 1, ...; every process is given the same id
/// (ncclGetUniqueId's, made by one of them).
struct JoinedComm {
    int ranks = 0;
    int first_rank = 0;
    nccl_abi::UniqueId id{};
};

/// One process, one thread, ncclCommInitAll over `devices` (or, with `joined`, ncclCommInitRank
/// for each device in one group, which returns once every process has joined): warm-up, then the
/// timed all-reduces; busbw counts every rank of the communicator. Throws base::Error naming
/// the CUDA or NCCL call that failed. NCCL writes its own debug output where the environment says
/// (NCCL_DEBUG, NCCL_DEBUG_FILE); the caller sets those beforehand.
AllReduceResult measure_allreduce(const Cuda& cuda, const Nccl& nccl, const std::vector<int>& devices,
    const AllReduceSettings& settings, const JoinedComm* joined = nullptr);

nlohmann::json to_json(const AllReduceResult& result);

} // namespace base
