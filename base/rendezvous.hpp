#pragma once

// Two processes on two nodes meet over TCP to swap a few bytes before they build an NCCL
// communicator together (its unique id one way, each side's GPU count both ways): the leader
// listens, the other connects to it. Nothing else is trusted to carry them: no shared file system,
// no MPI. Like NCCL's own bootstrap, the bytes are not secret and nothing is authenticated.

#include <chrono>
#include <string>
#include <string_view>

namespace base {

/// The leader's side: listens on `port` (every address of this host) until one peer connects
/// within `timeout`, sends it `mine` and reads back exactly `theirs` bytes. Throws base::Error
/// saying what failed (the port in use, no peer in time, the peer gone).
std::string meet_as_leader(int port, std::string_view mine, std::size_t theirs, std::chrono::milliseconds timeout);

/// The peer's side: connects to `host`:`port` (again and again until `timeout`: the leader may
/// not be listening yet), reads exactly `theirs` bytes and sends `mine`. Throws base::Error.
std::string meet_leader(
    const std::string& host, int port, std::string_view mine, std::size_t theirs, std::chrono::milliseconds timeout);

} // namespace base
