#include "probes/input_file.hpp"

#include "probes/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace probes {

std::string read_input_fd(int fd, const std::string& shown, const std::string& what, std::size_t limit)
{
    struct stat st { };
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        throw Error(fmt::format("{} {}: it is a directory; give a file", what, shown));
    }
    std::string text;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        text.reserve(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), limit) + 1);
    }
    char buffer[65536];
    while (true) {
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw Error(fmt::format("cannot read {} {}: {}", what, shown, std::strerror(errno)));
        }
        if (n == 0) {
            return text;
        }
        if (text.size() + static_cast<std::size_t>(n) > limit) {
            throw Error(fmt::format("{} {}: longer than {}, more than such a file ever holds; is it the right file?",
                what, shown,
                limit >= (std::size_t{1} << 20) ? fmt::format("{} MiB", limit >> 20) : fmt::format("{} bytes", limit)));
        }
        text.append(buffer, static_cast<std::size_t>(n));
    }
}

std::string read_input_file(const std::string& path, const std::string& what, std::size_t limit)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw Error(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
    }
    try {
        std::string text = read_input_fd(fd, path, what, limit);
        close(fd);
        return text;
    } catch (...) {
        close(fd);
        throw;
    }
}

} // namespace probes
