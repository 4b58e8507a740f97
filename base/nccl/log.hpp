#pragma once

// Reads NCCL_DEBUG=INFO output (any version from 2.3 to 2.30, behind any launcher prefix) and
// turns it into communicators, a transport table per host pair, and findings. Input is streamed:
// memory grows with the number of ranks and communicators, never with the size of the log, and
// Limits bounds those.

#include "base/finding.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace base::nccl {

/// The transport classes counted in the summary (one connection line counts once).
enum class Transport { p2p, shm, nvls, collnet, net_ib, net_ib_gdr, net_socket, net_other };
constexpr std::size_t transport_count = 8;
const char* to_string(Transport transport); ///< "p2p", "shm", ..., the JSON keys

using base::Finding;
using base::Severity;
using base::to_string;
using base::Where;

/// One rank of a communicator as its Init line tells it.
struct Rank {
    int rank = -1;
    std::string host;
    long pid = 0;
    int cuda_dev = -1;
    int nvml_dev = -1;
    std::string bus_id; ///< as printed ("1b000"), "" when absent
    bool init_complete = false;
    Where where;
};

/// Connection lines between two hosts (equal for intra-node), by transport class and by the exact
/// path NCCL printed ("P2P/CUMEM/read", "NET/IB/0/GDRDMA").
struct HostPair {
    std::string from;
    std::string to;
    std::uint64_t counts[transport_count] = {};
    std::map<std::string, std::uint64_t> paths;
};

struct Communicator {
    std::string id; ///< commId when NCCL prints one (2.16+), else "#N"
    std::size_t job = 0; ///< index into Analysis::jobs
    int nranks = 0;
    std::vector<std::string> versions; ///< NCCL versions of the processes in it
    std::vector<Rank> ranks; ///< sorted by rank; ranks never seen are absent
    std::vector<std::string> hosts; ///< sorted
    std::vector<HostPair> links; ///< sorted by (from, to)
    std::uint64_t connections = 0;
    unsigned nvls_channels = 0; ///< from the channel summary line, max over ranks
    unsigned collnet_channels = 0;
    Where first;
};

/// A WARN kind with its count and first occurrence.
struct WarnGroup {
    std::string kind; ///< "Cuda failure", "Call to ibv_reg_mr failed", ...
    std::size_t job = 0; ///< index into Analysis::jobs
    std::string example; ///< the first message of that kind
    std::uint64_t count = 0;
    Where where;
};

/// How much one analysis keeps. Records past a limit are left out and counted, and the analysis
/// says so (finding nccl.truncated). The defaults are far above what one job logs: the largest
/// clusters have some 10,000 hosts of 8 GPUs; a process logs from its main thread and a few of
/// NCCL's; a rank is in a handful of communicators (world, tensor, pipeline, data parallel), and
/// its connection lines name a few peers per path. At every limit the analysis holds some
/// hundreds of MB; without them a log of 270 MB made of distinct communicators took 4 GB.
struct Limits {
    std::size_t hosts = 20'000;
    std::size_t processes = 100'000; ///< distinct (host, pid)
    std::size_t threads = 200'000; ///< distinct (host, pid, tid)
    std::size_t ranks = 100'000; ///< distinct (host, pid, cudaDev) in Init lines
    std::size_t communicators = 10'000;
    std::size_t communicator_ranks = 1'000'000; ///< ranks of all communicators together
    std::size_t connections = 1'000'000; ///< distinct (source, destination, path) of all communicators
    std::size_t ring_ranks = 4'000'000; ///< ranks of all ring orders kept
};

/// One job's part of the inputs. Logs read together may be of unrelated jobs: a job is what the
/// evidence ties together (a commId, a process, an init order whose ranks fit together, the NCCL
/// version), and its communicators, host pairs, WARNs and findings come from its inputs only.
struct Job {
    std::vector<std::string> inputs;
    std::vector<std::string> nccl_versions;
    std::vector<std::string> hosts; ///< sorted
    std::vector<std::size_t> communicators; ///< indexes into Analysis::communicators
    std::vector<WarnGroup> warnings;
    std::vector<Finding> findings; ///< fail first, then warn, then info
    std::uint64_t records = 0;
    std::uint64_t connections = 0;
    std::uint64_t counts[transport_count] = {};
    unsigned ranks = 0;
    unsigned processes = 0;
    unsigned processes_init_complete = 0;
};

struct Analysis {
    std::vector<std::string> inputs;
    std::vector<std::string> skipped; ///< files of a directory left unread: not logs (Analyzer::skip)
    std::vector<std::string> nccl_versions; ///< sorted, unique ("2.18.3+cuda12.2")
    std::vector<Job> jobs; ///< in the order of their first input
    std::vector<Communicator> communicators; ///< of every job, job by job
    std::vector<WarnGroup> warnings; ///< of every job, job by job
    /// Of every job (with "job" in their facts when there are several) and of the whole reading
    /// (nccl.truncated): fail first, then warn, then info.
    std::vector<Finding> findings;
    std::uint64_t lines = 0; ///< physical lines read
    std::uint64_t records = 0; ///< NCCL records found
    std::uint64_t connections = 0;
    std::uint64_t counts[transport_count] = {};
    unsigned hosts = 0;
    unsigned ranks = 0; ///< distinct (host, pid, device) that logged as a rank
    unsigned processes = 0; ///< distinct (host, pid)
    unsigned processes_init_complete = 0; ///< of those, the ones with an Init COMPLETE line
    std::uint64_t records_left_out = 0; ///< records past Limits, not in the numbers above
};

/// Streams inputs and keeps only what the report needs.
/// Whether the inputs may be of several jobs (gpudoctor nccl-log) or are known to be one job's
/// (the per-rank logs gpurun --nccl-check and the all-reduce probe write).
enum class Inputs { may_be_several_jobs, one_job };

class Analyzer {
public:
    explicit Analyzer(const Limits& limits = {}, Inputs inputs = Inputs::may_be_several_jobs);
    ~Analyzer();
    Analyzer(const Analyzer&) = delete;
    Analyzer& operator=(const Analyzer&) = delete;

    /// Reads a file ("-" = stdin) to its end; gzip input is recognised by its magic bytes.
    /// Throws base::Error when the input cannot be opened or its compression is corrupt.
    /// `name` is how reports name it ("" = `path`).
    void read_file(const std::string& path, const std::string& name = "");
    /// Reads text held in memory under the given name (tests, fuzzing).
    void read_text(std::string_view text, const std::string& name);
    /// Starts an input that is read in pieces while it is written (gpurun --nccl-check follows
    /// its ranks' logs); returns its number for read_more().
    std::uint32_t add_input(const std::string& name);
    /// Reads the next piece of input `input` (from add_input), cut anywhere: its whole lines are
    /// read, the start of a line waits for the rest, and a line longer than a block is cut as
    /// read_file cuts it. With `last`, the end of the input, whose final line may lack a newline;
    /// the input is done. Line numbers go on from the piece before. Pieces of several inputs may
    /// alternate, as logs grow side by side.
    void read_more(std::uint32_t input, std::string_view text, bool last = false);
    /// Notes a file of a directory that was not read because it is not a log (looks_like_log).
    void skip(const std::string& path);
    /// The report so far; the analyzer can go on reading afterwards.
    Analysis analysis() const;

    struct State; ///< what the analyzer keeps; defined in log.cpp

private:
    std::unique_ptr<State> m_state;
};

/// Whether a file in a directory of logs is one: by its name (`*.log`, `*.txt`, `*.out`, `*.err`,
/// `*.gz`, `*.log.N`), or, for a name that tells nothing (no or another extension), by its first
/// 64 KiB holding an NCCL record or gzip data. Documents and data beside logs (README*, LICENSE*,
/// `*.md`, `*.json`, `*.yaml`, `*.py`, ...) are not, even when they quote NCCL lines.
bool looks_like_log(const std::string& path);

/// The human report.
std::string render_text(const Analysis& analysis, bool color = false);
/// The JSON report: nccl_versions, jobs, communicators, summary, warnings, findings. Written as it
/// goes (base::JsonWriter), with 2 spaces of indent, to the end of `out`: no document of the
/// whole report is built.
void write_json(const Analysis& analysis, std::string& out);
/// The same report as a document, for callers that keep or change it.
nlohmann::json render_json(const Analysis& analysis);
/// A short verdict for gpurun --nccl-check: one line per finding (or "no problems"), and the
/// transport summary.
std::string render_verdict(const Analysis& analysis);
/// The title, explanation and remedy of every finding code, for `gpudoctor explain` and the man page.
const std::vector<FindingCode>& finding_codes();

} // namespace base::nccl
