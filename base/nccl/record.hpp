#pragma once

// The pure part of the NCCL log reader: one physical line in, NCCL records and their meaning out.
// Nothing here allocates per call except the output vectors the caller owns; every string_view
// points into the line the caller passed.

#include "base/nccl/log.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace base::nccl {

enum class Level { info, warn, trace, abort };

/// One `host:pid:tid [dev] NCCL LEVEL message` record found in a line. Records whose prefix was
/// stripped (`[0] NCCL INFO`, `NCCL INFO`) have an empty host, pid 0 and `prefixed` false; a
/// prefix with an empty host (`:5202:5683 [0]`) or redacted numbers (`pod-id:num:num [0]`) is
/// kept, with pid and tid 0 where they are not numbers.
struct NcclRecord {
    std::string_view host;
    long pid = 0;
    long tid = 0;
    bool prefixed = false; ///< a host:pid:tid prefix was there
    int dev = -1;
    Level level = Level::info;
    std::string_view location; ///< "transport/net_ib.cc:1295" on WARN and TRACE lines
    std::string_view message; ///< up to the next record on the same line, trailing blanks trimmed
};

/// Copies `raw` into `scratch` without ANSI escape sequences, carriage returns, NUL and other
/// control characters (tabs become spaces); returns `raw` itself when there was nothing to drop.
std::string_view clean_line(std::string_view raw, std::string& scratch);

/// Appends every NCCL record that starts in `line` (a cleaned line) to `out`.
void find_records(std::string_view line, std::vector<NcclRecord>& out);

enum class Direction { none, send, receive };

/// A transport connection line: `Ring 00 : 0[0] -> 1[1] via P2P/IPC`,
/// `Channel 02/1 : 15[7] -> 16[0] [send] via NET/IB/0/GDRDMA`, `CollNet 00/0 : 3 [send] via COLLNET/SHARP/0`.
struct NcclConnection {
    int channel = 0;
    int conn_index = -1; ///< the `/N` after the channel, -1 when absent
    int src = -1;
    int dst = -1; ///< -1 on CollNet lines, which name only the local rank
    Direction direction = Direction::none;
    std::string_view path; ///< "P2P/CUMEM/read", "NET/IB/0/GDRDMA"
    bool ring_keyword = false; ///< `Ring`/`Coll` (NCCL <= 2.6) rather than `Channel`/`CollNet`
    bool collnet = false;
};
std::optional<NcclConnection> parse_connection(std::string_view message);

/// Which class a connection path belongs to.
Transport classify_path(std::string_view path);

enum class InitStage { none, start, complete };

/// A communicator's init line, any version: `comm 0x.. rank R nranks N cudaDev D [nvmlDev M]
/// [busId B] [parent P color C key K] [commId 0x..] - Init START|COMPLETE` (2.3 prints no stage).
struct NcclInit {
    std::string_view comm;
    int rank = -1;
    int nranks = 0;
    int cuda_dev = -1;
    int nvml_dev = -1;
    std::string_view bus_id;
    std::string_view comm_id;
    InitStage stage = InitStage::none;
};
std::optional<NcclInit> parse_init(std::string_view message);

/// A ring order line (`Channel 00/02 :    0   1   2   3`): the channel and the ranks in order.
/// `truncated` is set when NCCL cut the list short (`...`).
struct NcclRingOrder {
    int channel = 0;
    std::vector<int> ranks;
    bool truncated = false;
};
bool parse_ring_order(std::string_view message, NcclRingOrder& out);

/// `NCCL version 2.18.3+cuda12.2` anywhere in `text`: the version after "NCCL version ", a dotted
/// number with what follows up to a blank or comma. It must have NCCL's "+cuda" (TensorFlow's
/// bundled NCCL prints it unexpanded: `2.4.7+cudaCUDA_MAJOR.CUDA_MINOR`), except in the message
/// of an NCCL record (`in_record`) or on a line that is the banner alone (NCCL up to 2.8 printed it
/// without a prefix), where a version without it (a build's own suffix, or none) is taken too.
std::optional<std::string_view> find_version(std::string_view text, bool in_record = false);

/// `NAME set by environment to VALUE[.]`.
struct NcclEnvSetting {
    std::string_view name;
    std::string_view value;
};
std::optional<NcclEnvSetting> parse_env_setting(std::string_view message);

/// The `N coll channels, [N collnet channels, ][N nvls channels, ]...` summary line.
struct NcclChannelSummary {
    unsigned coll = 0;
    unsigned collnet = 0;
    unsigned nvls = 0;
};
std::optional<NcclChannelSummary> parse_channel_summary(std::string_view message);

/// A stable kind for a WARN message, so that the same failure from many ranks groups together:
/// "Cuda failure 'out of memory'", "Call to ibv_reg_mr failed", "NET/IB completion error", ...
std::string warn_kind(std::string_view message);

/// PyTorch's `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=.., OpType=..,
/// ..., Timeout(ms)=..) ran for .. milliseconds before timing out.`
struct WatchdogTimeout {
    std::string op;
    long seq = -1;
    long timeout_ms = -1;
    long ran_ms = -1;
    int rank = -1; ///< from `[Rank N]` or `[rankN]` when present
};
std::optional<WatchdogTimeout> parse_watchdog(std::string_view line);

/// PyTorch's `NCCL error in: file:line, <error string>, NCCL version x.y.z`: the error string.
std::optional<std::string_view> parse_comm_error(std::string_view line);

} // namespace base::nccl
