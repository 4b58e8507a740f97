#pragma once

// A file descriptor closed when its owner goes out of scope.

#include <unistd.h>

namespace probes {

class UniqueFd {
public:
    /// Owns `fd`; a negative one (a failed open) is held and never closed.
    explicit UniqueFd(int fd) : m_fd(fd) { }
    ~UniqueFd()
    {
        if (m_fd >= 0) {
            close(m_fd);
        }
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    int get() const { return m_fd; }

private:
    int m_fd;
};

} // namespace probes
