#pragma once

// A file descriptor closed when its owner goes out of scope.

#include <unistd.h>
#include <utility>

namespace base {

class UniqueFd {
public:
    /// Owns `fd`; a negative one (a failed open) is held and never closed.
    explicit UniqueFd(int fd = -1) : m_fd(fd) { }
    ~UniqueFd() { reset(); }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) { }
    UniqueFd& operator=(UniqueFd&& other) noexcept
    {
        reset(other.release());
        return *this;
    }

    int get() const { return m_fd; }
    /// Gives up ownership: the caller closes what is returned.
    int release() { return std::exchange(m_fd, -1); }
    /// Closes the one held, then owns `fd`.
    void reset(int fd = -1)
    {
        if (m_fd >= 0) {
            close(m_fd);
        }
        m_fd = fd;
    }

private:
    int m_fd;
};

} // namespace base
