#pragma once

// gpudoctor fleet, the way back: each node's check sends its answer (its snapshot, or why there is
// none) through the launcher's output streams, the only path every launcher gives back to this
// node. The stream is shared: lines of other nodes, the launcher's own messages and its prefixes
// ("[3] ", "0: ") come between and before them. So an answer travels as frames, each one line
// that says whose part it is, which part, and its length and CRC-32; a line cut or mixed on the
// way fails its check and is not used. Pure: the launch is in launch.hpp.

#include "doctor/fleet/merge.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace doctor::fleet {

/// What starts every frame line.
inline constexpr std::string_view frame_marker = "@gpudoctor-fleet ";

/// The most payload bytes in one frame: with its header, a frame line stays under 1 KiB, the
/// most Slurm's slurmstepd relays of a line in one message, and under PIPE_BUF (4096), so it is
/// written in one piece.
inline constexpr std::size_t frame_payload = 900;

/// The frames of one node's answer: "@gpudoctor-fleet RANK KIND SEQ TOTAL LENGTH CRC32 PAYLOAD\n"
/// per part, KIND the answer's word with '_' for blanks ("timed_out"). `payload` is compact JSON
/// (nlohmann's dump() without indent, which never holds a line break): the snapshot document, or
/// a string saying why there is none. Every '<' in it, which JSON has only inside strings, is
/// sent as \u003c: the same JSON, and no part of it can pass for Open MPI's mark.
std::string frame_answer(unsigned rank, Answer answer, std::string_view payload);

/// One node's answer, put together from its frames.
struct ReceivedAnswer {
    Answer answer = Answer::snapshot;
    std::string payload; ///< complete only when `parts` == `total`
    unsigned parts = 0; ///< intact frames received
    unsigned total = 0; ///< frames the answer has
    bool complete() const { return total > 0 && parts == total; }
};

/// What came back through a launcher.
struct Collected {
    std::map<unsigned, ReceivedAnswer> answers; ///< by rank
    std::string other; ///< every line that holds no frame: the launcher's and the nodes' messages
    /// The lines without a frame that a rank's mark says it wrote (Open MPI's, srun's "3: ",
    /// Hydra's "[3] "), marks taken off, blank lines left out.
    std::map<unsigned, std::string> said;
};

/// Finds the frames in a launcher's standard output and error (`errors`, read apart: a message of
/// the launcher's own may come between two pieces of a node's line): lines of several nodes
/// interleaved, with anything before a frame's marker on its line (srun's "3: ", Hydra's "[3] ").
/// Open MPI cuts lines into pieces and marks each piece with its writer (--tag-output:
/// "[1,3]<stdout>:"); the pieces of each stream are put together by their marks first. A frame
/// whose length or CRC does not match is dropped, and so is a repeat of a part already received.
Collected collect_answers(std::string_view output, std::string_view errors = {});

/// How the launch ended, for the nodes that sent no whole answer.
struct LaunchEnd {
    int exit_code = 0; ///< the launcher's (gpurun's) exit status
    bool timed_out = false; ///< stopped at the fleet's deadline
    double deadline_seconds = 0;
    int signal = 0; ///< the signal (SIGINT, SIGTERM, SIGHUP) that stopped it, passed on to gpurun
};

/// The answer of the node `host` (rank `rank`) from what was collected: its snapshot, the
/// failure it reported itself (timed out, crashed), or, with no whole answer, what the launcher's
/// output says of it: timed out (the launch was stopped at the deadline); unreachable, saying so,
/// when a signal stopped the launch; crashed (gpurun's
/// report of its rank: "gpurun: rank R (host, ...) failed: ..."); garbage (only some of its
/// frames arrived intact, or it printed something else: its first line is quoted); unreachable
/// (a launcher line that names the host, else the launcher's first line and exit status).
NodeOutput node_output(const std::string& host, unsigned rank, const Collected& collected, const LaunchEnd& end);

} // namespace doctor::fleet
