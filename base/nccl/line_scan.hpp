#pragma once

// Finds, in a block of log text, the lines an NCCL log reader must look at: those holding "NCCL"
// (every NCCL record, version banner, and PyTorch ProcessGroupNCCL line does), and the line after
// one that ends in a record prefix (NCCL 2.3 wrote prefix and message separately). Counts every
// line on the way. This is the part that touches every byte, so it is written for speed.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace base::nccl {

struct LineRef {
    std::size_t offset = 0; ///< from the start of the block
    std::size_t size = 0; ///< without the newline
    std::uint64_t number = 0; ///< 1-based line number in the input
};

class LineScanner {
public:
    /// Scans `size` bytes that end at a line end, or at the end of input. Appends the lines to
    /// read to `out`.
    void scan(const char* data, std::size_t size, std::vector<LineRef>& out);
    /// Scans the first part of a line too long to keep; the rest of it, up to its newline, is skipped.
    void scan_cut(const char* data, std::size_t size, std::vector<LineRef>& out);
    /// Lines seen so far.
    std::uint64_t lines() const { return m_lines; }

private:
    std::uint64_t m_lines = 0;
    bool m_skip_rest = false; ///< inside a cut line
    bool m_emit_next = false; ///< the next line follows a record prefix
};

} // namespace base::nccl
