#include "base/input_file.hpp"

#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace base {

namespace {

// The rest of `fd` after `text`, which already holds what was read of it.
std::string read_rest(int fd, const std::string& shown, const std::string& what, std::size_t limit, std::string text)
{
    char buffer[65536];
    while (true) {
        if (text.size() > limit) {
            throw Error(fmt::format("{} {}: longer than {}, more than such a file ever holds; is it the right file?",
                what, shown,
                limit >= (std::size_t{1} << 20) ? fmt::format("{} MiB", limit >> 20) : fmt::format("{} bytes", limit)));
        }
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
        text.append(buffer, static_cast<std::size_t>(n));
    }
}

// What a FIFO opened without blocking holds at once. With no process that has it open for
// writing, a read returns 0 (with one, it fails with EAGAIN or returns data): then waits
// fifo_writer_wait for a writer to come and write or close; none is a base::Error. Bash's
// <(command) is a pipe whose writer is already there.
std::string start_fifo(int fd, const std::string& path, const std::string& what)
{
    char buffer[65536];
    ssize_t n = -1;
    do {
        n = read(fd, buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        return std::string(buffer, static_cast<std::size_t>(n));
    }
    if (n == 0) {
        pollfd p{fd, POLLIN, 0};
        const int ready = poll(&p, 1, static_cast<int>(fifo_writer_wait.count() * 1000));
        if (ready == 0) {
            throw Error(fmt::format("{} {}: a FIFO that no process wrote to within {} s; start its writer "
                                    "first, or give a file",
                what, path, fifo_writer_wait.count()));
        }
    }
    return {};
}

// `fd` whole, after `start` (what was already read of it), once its kind is one to read.
std::string read_kind_checked(
    int fd, const std::string& shown, const std::string& what, std::size_t limit, std::string start)
{
    struct stat st { };
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        throw Error(fmt::format("{} {}: it is a directory; give a file", what, shown));
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
        throw Error(fmt::format(
            "{} {}: it is a {}, not a file; give a file", what, shown, S_ISSOCK(st.st_mode) ? "socket" : "device"));
    }
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        start.reserve(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), limit) + 1);
    }
    return read_rest(fd, shown, what, limit, std::move(start));
}

} // namespace

std::string read_input_fd(int fd, const std::string& shown, const std::string& what, std::size_t limit)
{
    return read_kind_checked(fd, shown, what, limit, {});
}

std::string read_input_file(const std::string& path, const std::string& what, std::size_t limit)
{
    // Not blocking in open: a FIFO with no writer would wait for one for ever.
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    struct stat st { };
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0) {
        throw Error(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
    }
    std::string start = S_ISFIFO(st.st_mode) ? start_fifo(fd.get(), path, what) : std::string();
    const int flags = fcntl(fd.get(), F_GETFL);
    if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
        throw Error(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
    }
    return read_kind_checked(fd.get(), path, what, limit, std::move(start));
}

bool natural_less(const std::string& a, const std::string& b)
{
    std::size_t i = 0;
    std::size_t j = 0;
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    while (i < a.size() && j < b.size()) {
        if (digit(a[i]) && digit(b[j])) {
            std::size_t i2 = i;
            std::size_t j2 = j;
            while (i2 < a.size() && digit(a[i2])) {
                ++i2;
            }
            while (j2 < b.size() && digit(b[j2])) {
                ++j2;
            }
            std::string x = a.substr(i, i2 - i);
            std::string y = b.substr(j, j2 - j);
            x.erase(0, std::min(x.find_first_not_of('0'), x.size() - 1));
            y.erase(0, std::min(y.find_first_not_of('0'), y.size() - 1));
            if (x.size() != y.size()) {
                return x.size() < y.size();
            }
            if (x != y) {
                return x < y;
            }
            i = i2;
            j = j2;
            continue;
        }
        if (a[i] != b[j]) {
            return a[i] < b[j];
        }
        ++i;
        ++j;
    }
    return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

std::vector<std::string> input_files(const std::vector<std::string>& arguments,
    const std::function<bool(const std::string& path)>& wanted, std::string_view none_found,
    std::vector<std::string>* skipped)
{
    std::vector<std::string> files;
    for (const auto& argument : arguments) {
        std::error_code ec;
        if (argument == "-" || !std::filesystem::is_directory(argument, ec)) {
            files.push_back(argument);
            continue;
        }
        std::vector<std::string> inside;
        std::vector<std::string> refused;
        for (const auto& entry : std::filesystem::directory_iterator(argument, ec)) {
            if (entry.is_regular_file(ec)) {
                (wanted(entry.path().string()) ? inside : refused).push_back(entry.path().string());
            }
        }
        if (ec) {
            throw Error(fmt::format("cannot list {}: {}", argument, ec.message()));
        }
        if (inside.empty()) {
            throw Error(fmt::format("{} {}", argument, none_found));
        }
        std::sort(inside.begin(), inside.end(), natural_less);
        files.insert(files.end(), inside.begin(), inside.end());
        if (skipped != nullptr) {
            std::sort(refused.begin(), refused.end(), natural_less);
            skipped->insert(skipped->end(), refused.begin(), refused.end());
        }
    }
    return files;
}

} // namespace base
