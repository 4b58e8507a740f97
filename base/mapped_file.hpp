#pragma once

// Windows of a file mapped read-only, for readers that would otherwise copy every byte with
// read(). A mapped file that shrinks under its reader (logrotate's copytruncate, a job that
// restarts its log) would raise SIGBUS on the pages past its new end; here such a page reads as
// zeros instead and the window says so, so the reader can report the input as changed.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace base {

class MappedWindow {
public:
    MappedWindow() = default;
    MappedWindow(const MappedWindow&) = delete;
    MappedWindow& operator=(const MappedWindow&) = delete;
    ~MappedWindow() { unmap(); }

    /// Maps `size` bytes of `fd` from `offset` (any offset; the mapping starts at the page
    /// before it). Returns false, with errno set, where the file cannot be mapped.
    bool map(int fd, std::uint64_t offset, std::size_t size);
    void unmap();
    /// The bytes mapped: `size` bytes from the offset given to map().
    std::string_view bytes() const { return {m_data, m_size}; }

    /// How many times, in this process, a page past the end of a shrunken file was read (and
    /// read as zeros). A reader compares it before and after.
    static std::uint64_t pages_lost();

private:
    void* m_map = nullptr;
    std::size_t m_map_size = 0;
    const char* m_data = nullptr;
    std::size_t m_size = 0;
    int m_slot = -1;
};

} // namespace base
