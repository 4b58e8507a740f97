#pragma once

// What an Nsight Systems trace says about each GPU: how much of the trace it was busy (the union
// of kernel intervals, never a sum of durations), its top kernels, copies by direction, idle gaps,
// kernels per stream, and findings. Pure: events in, summary out. base/nsys/reader.hpp reads the
// events from nsys's SQLite export.

#include "base/finding.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace base::nsys {

/// The copy directions a report tells apart. `other` holds what CUPTI calls arrays and unified
/// memory (HtoA, AtoH, AtoA, AtoD, DtoA, unified HtoD/DtoH/DtoD) and unknown kinds.
enum class CopyKind { htod, dtoh, dtod, ptop, htoh, other };
constexpr std::size_t copy_kind_count = 6;
/// "htod", "dtoh", "dtod", "ptop", "htoh", "other": the JSON keys.
const char* to_string(CopyKind kind);
/// "HtoD", ..., "other": as nsys labelled them until 2023.
const char* label(CopyKind kind);

/// A copyKind number of an export without the ENUM_CUDA_MEMCPY_OPER table. The numbers are CUPTI's
/// CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP (not cudaMemcpyKind's).
CopyKind copy_kind_from_number(std::int64_t number);
/// A row of ENUM_CUDA_MEMCPY_OPER by its name ("CUDA_MEMCPY_KIND_HTOD") or, failing that, its
/// label ("Host-to-Device", "HtoD"); `other` for anything else.
CopyKind copy_kind_from_enum(std::string_view name, std::string_view label);

/// One kernel on the trace's clock (nanoseconds). `name` indexes Trace::kernel_names.
struct Kernel {
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::uint32_t device = 0;
    std::uint32_t name = 0;
    std::int64_t stream = -1;
};

/// One memcpy record. `count` is how many copies it stands for (nsys 2026 batches
/// cudaMemcpyBatchAsync into one record); `pageable` says that its host side is pageable memory.
struct Copy {
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::uint32_t device = 0;
    CopyKind kind = CopyKind::other;
    std::uint64_t bytes = 0;
    std::uint64_t count = 1;
    bool pageable = false;
    std::int64_t src_device = -1; ///< peer copies: the devices at both ends, -1 when not recorded
    std::int64_t dst_device = -1;
};

/// One memset record.
struct Memset {
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::uint32_t device = 0;
    std::uint64_t bytes = 0;
};

/// One export as read: every GPU's events. Events whose start is 0 (CUPTI: not collected) or that
/// end before they start are not counted.
struct Trace {
    std::string file; ///< how reports name it
    std::string product_version; ///< "2024.6.2.225", "" when the export does not say
    std::string schema_version; ///< "3.16.1"
    /// The whole trace (ANALYSIS_DETAILS); when end <= start, the first to the last GPU event.
    std::int64_t span_start = 0;
    std::int64_t span_end = 0;
    std::map<std::uint32_t, std::string> gpu_names; ///< deviceId -> "NVIDIA H100 80GB HBM3"
    std::vector<std::string> kernel_names;
    std::vector<Kernel> kernels;
    std::vector<Copy> copies;
    std::vector<Memset> memsets;
    std::vector<std::string> notes; ///< how the export was read ("no ENUM_CUDA_MEMCPY_OPER table: ...")
};

/// The thresholds of a summary.
struct Options {
    double gap_seconds = 0.5; ///< idle gaps at least this long are listed (nsys's gpu_gaps default)
    unsigned top = 10; ///< kernels listed per GPU
    double min_busy = 0.5; ///< a busy share below this is a finding
};

/// Kernels below this many nanoseconds count as tiny.
constexpr std::int64_t tiny_kernel_ns = 10'000;
/// At least this many kernels on a GPU, and at least this share of them tiny, make tiny_kernels.
constexpr std::uint64_t tiny_kernels_min_count = 1000;
constexpr double tiny_kernels_min_share = 0.5;
/// Copies dominate when their union is at least the kernels' and at least this share of the trace.
constexpr double copies_dominate_min_share = 0.1;
/// HtoD and DtoH copies through pageable memory of at least this many bytes make pageable_copies
/// (a few bytes a step, as loss.item() copies, are no problem).
constexpr std::uint64_t pageable_min_bytes = std::uint64_t{1} << 20;
/// Idle gaps listed per GPU (the count and the total cover them all).
constexpr std::size_t gaps_listed = 10;

struct KernelStats {
    std::string name;
    std::uint64_t count = 0;
    std::int64_t total_ns = 0;
    double mean_ns = 0;
    double median_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    double share = 0; ///< of this GPU's summed kernel time
};

struct CopyStats {
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
    std::int64_t total_ns = 0; ///< summed durations
    std::uint64_t pageable_count = 0;
    std::uint64_t pageable_bytes = 0;
    std::int64_t pageable_ns = 0;
    /// GB/s (1e9 bytes) over the summed copy time, in floating point; 0 without copy time.
    double bandwidth_gbps() const;
};

struct PeerStats {
    std::int64_t src_device = -1;
    std::int64_t dst_device = -1;
    CopyStats copies;
};

struct StreamStats {
    std::int64_t stream = -1;
    std::uint64_t kernels = 0;
    std::int64_t total_ns = 0;
};

/// An idle stretch between two GPU operations (kernels, copies, memsets), from the trace's start.
struct Gap {
    std::int64_t start_ns = 0;
    std::int64_t length_ns = 0;
};

/// One GPU of one export.
struct GpuSummary {
    std::string file;
    std::uint32_t device = 0;
    std::string name; ///< "" when the export does not name it
    std::int64_t span_ns = 0; ///< the trace's span
    std::int64_t busy_ns = 0; ///< union of kernel intervals
    std::int64_t busy_with_copies_ns = 0; ///< union of kernels, copies and memsets
    std::int64_t copy_busy_ns = 0; ///< union of copy intervals
    std::int64_t first_ns = 0; ///< first operation's start, from the trace's start
    std::int64_t last_ns = 0; ///< last operation's end
    std::uint64_t kernels = 0;
    std::uint64_t distinct_kernels = 0;
    std::int64_t kernel_total_ns = 0; ///< summed durations (more than busy_ns when kernels overlap)
    std::uint64_t tiny_kernels = 0; ///< shorter than tiny_kernel_ns
    double median_kernel_ns = 0;
    std::vector<KernelStats> top_kernels; ///< by total time, the first Options::top
    std::array<CopyStats, copy_kind_count> copies{}; ///< indexed by CopyKind
    CopyStats memsets;
    std::vector<PeerStats> peers; ///< peer copies by (source, destination)
    std::vector<StreamStats> streams; ///< by stream id
    std::uint64_t gap_count = 0; ///< idle gaps of at least Options::gap_seconds
    std::int64_t gap_total_ns = 0;
    std::vector<Gap> longest_gaps; ///< the longest gaps_listed, by start time

    /// busy_ns / span_ns, 0 for an empty span.
    double busy_share() const;
    double busy_share_with_copies() const;
    const CopyStats& copy(CopyKind kind) const { return copies[static_cast<std::size_t>(kind)]; }
};

using base::Severity;
using base::to_string;

/// A finding about a trace: its subject is the GPU ("gpu 0 (NVIDIA H100) in rank0.sqlite") or the
/// file; facts hold {"file", "device_id"} (null for the whole export).
using base::Finding;

/// One export's totals.
struct ReportSummary {
    std::string file;
    std::string product_version;
    std::string schema_version;
    std::int64_t span_ns = 0;
    std::uint64_t kernels = 0;
    std::uint64_t copies = 0;
    std::uint64_t memsets = 0;
    std::uint64_t skipped = 0; ///< events without timestamps
    std::vector<std::string> notes;
};

struct Summary {
    Options options;
    std::vector<ReportSummary> reports;
    std::vector<GpuSummary> gpus; ///< in input order, then by device id
    std::vector<Finding> findings; ///< fail first, then warn, then info; in GPU order within each
};

/// Summarises each trace's GPUs and judges them. GPUs without any event are left out: an export
/// lists every GPU the process could see, not only those it used.
Summary summarize(const std::vector<Trace>& traces, const Options& options = {});

/// The length of the union of [start, end) intervals: time during which at least one ran. Sorts
/// `intervals` by start.
std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

/// A duration as reports print it: "1.234 s", "12.3 ms", "4.2 us", "850 ns".
std::string format_duration(double ns);
/// A time from the trace's start: "0.710 s".
std::string format_time(std::int64_t ns);

/// The title, explanation and remedy of every finding code, for `gpudoctor explain` and the man page.
const std::vector<FindingCode>& finding_codes();

} // namespace base::nsys
