// Kept apart from process.cpp: <iostream> costs every program that links it the start-up of the
// standard streams and their locale (about 0.1 ms here), which the rank helper does not need.
#include "base/process.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace base {

int exit_status_after_output(int status, const char* program) noexcept
{
    // std::cout shares stdout's buffer: its flush is stdout's, and either may be the one that fails.
    errno = 0;
    std::cout.flush();
    int err = errno;
    errno = 0;
    const int flushed = std::fflush(stdout);
    err = errno != 0 ? errno : err;
    if (std::cout.good() && flushed == 0 && std::ferror(stdout) == 0) {
        return status;
    }
    // A write that failed before these flushes has left no reason behind.
    std::fprintf(
        stderr, "%s: cannot write the output: %s\n", program, err != 0 ? std::strerror(err) : "a write to it failed");
    return 3;
}

} // namespace base
