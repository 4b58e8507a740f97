#pragma once

// Files named on the command line (a topology, a hostfile, a snapshot, a policy, a model table)
// are read whole into memory, so each read has a ceiling: far more than any real input, far less
// than what /dev/zero or a disk image given by mistake would take.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace base {

/// The most read_input_file reads: 64 MiB (a 1024-node hostfile is 20 KiB, a large server's
/// topology under 1 MiB).
inline constexpr std::size_t input_file_limit = std::size_t{64} << 20;

/// How long read_input_file waits for a FIFO's writer when none has it open.
inline constexpr std::chrono::seconds fifo_writer_wait{10};

/// The whole of `path`. Pipes and FIFOs are read as streams (so `<(command)` works; a FIFO that
/// no process writes to within fifo_writer_wait is an error, not a wait for ever); a directory, a
/// device or socket, a file that cannot be opened or read, or one longer than `limit` bytes is a
/// base::Error naming `what` and `path`: "cannot read hostfile /x: No such file or directory",
/// "hostfile /tmp: it is a directory; give a file", "topology /dev/zero: it is a device, not a
/// file; give a file".
std::string read_input_file(const std::string& path, const std::string& what, std::size_t limit = input_file_limit);

/// The same for an open descriptor (standard input for "-"), named `shown` in errors.
std::string read_input_fd(
    int fd, const std::string& shown, const std::string& what, std::size_t limit = input_file_limit);

/// "rank2.sqlite" before "rank10.sqlite": runs of digits compare as numbers.
bool natural_less(const std::string& a, const std::string& b);

/// The inputs of a command line with each directory replaced by the regular files in it that
/// `wanted` accepts, in natural order; subdirectories are not read, and "-" (standard input)
/// stays. The files of a directory that `wanted` refuses are added to `skipped` when it is given.
/// A directory that cannot be listed, or that holds no wanted file, is a base::Error: "DIR "
/// followed by `none_found`.
std::vector<std::string> input_files(const std::vector<std::string>& arguments,
    const std::function<bool(const std::string& path)>& wanted, std::string_view none_found,
    std::vector<std::string>* skipped = nullptr);

} // namespace base
