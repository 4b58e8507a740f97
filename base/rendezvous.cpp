#include "base/rendezvous.hpp"

#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace base {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline)
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<long long>(0, std::min<long long>(left, 1 << 30)));
}

/// Waits until `fd` is ready for `events` or the deadline; false at the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline)
{
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = poll(&p, 1, remaining_ms(deadline));
        if (n > 0) {
            return true;
        }
        if (n == 0 || errno != EINTR) {
            return false;
        }
    }
}

/// Sends all of `bytes`, then reads exactly `size` bytes (or the other way round), by the deadline.
void send_all(int fd, std::string_view bytes, Clock::time_point deadline, const std::string& who)
{
    while (!bytes.empty()) {
        if (!wait_for(fd, POLLOUT, deadline)) {
            throw Error(fmt::format("{}: no room to send within the time", who));
        }
        const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            throw Error(fmt::format("{}: send: {}", who, std::strerror(errno)));
        }
        bytes.remove_prefix(n > 0 ? static_cast<std::size_t>(n) : 0);
    }
}

std::string read_exactly(int fd, std::size_t size, Clock::time_point deadline, const std::string& who)
{
    std::string out(size, '\0');
    std::size_t got = 0;
    while (got < size) {
        if (!wait_for(fd, POLLIN, deadline)) {
            throw Error(fmt::format("{}: {} of {} bytes came within the time", who, got, size));
        }
        const ssize_t n = recv(fd, out.data() + got, size - got, 0);
        if (n == 0) {
            throw Error(fmt::format("{}: the other side closed after {} of {} bytes", who, got, size));
        }
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            throw Error(fmt::format("{}: recv: {}", who, std::strerror(errno)));
        }
        got += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    return out;
}

} // namespace

std::string meet_as_leader(int port, std::string_view mine, std::size_t theirs, std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    const std::string who = fmt::format("waiting for the peer on port {}", port);
    // IPv6 with IPv4 mapped in: every address of this host, either family.
    UniqueFd listener(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (listener.get() < 0) {
        throw Error(fmt::format("{}: socket: {}", who, std::strerror(errno)));
    }
    const int on = 1;
    const int off = 0;
    setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<std::uint16_t>(port));
    if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener.get(), 4) != 0) {
        throw Error(fmt::format("{}: cannot listen: {}", who, std::strerror(errno)));
    }
    if (!wait_for(listener.get(), POLLIN, deadline)) {
        throw Error(fmt::format("{}: no peer connected within {} s", who, timeout.count() / 1000.0));
    }
    UniqueFd peer(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (peer.get() < 0) {
        throw Error(fmt::format("{}: accept: {}", who, std::strerror(errno)));
    }
    send_all(peer.get(), mine, deadline, who);
    return read_exactly(peer.get(), theirs, deadline, who);
}

std::string meet_leader(
    const std::string& host, int port, std::string_view mine, std::size_t theirs, std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    const std::string who = fmt::format("meeting the peer at {} port {}", host, port);
    std::string last_error = "no address";
    while (Clock::now() < deadline) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
            last_error = gai_strerror(rc);
            found = nullptr;
        }
        for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
            UniqueFd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
            if (fd.get() < 0) {
                last_error = std::strerror(errno);
                continue;
            }
            if (connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
                last_error = std::strerror(errno);
                continue;
            }
            int error = 0;
            socklen_t length = sizeof error;
            if (!wait_for(fd.get(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(2))) ||
                getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
                last_error = error != 0 ? std::strerror(error) : "connect timed out";
                continue;
            }
            freeaddrinfo(found);
            const std::string got = read_exactly(fd.get(), theirs, deadline, who);
            send_all(fd.get(), mine, deadline, who);
            return got;
        }
        if (found != nullptr) {
            freeaddrinfo(found);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the leader may not listen yet
    }
    throw Error(fmt::format("{}: not reached within {} s ({})", who, timeout.count() / 1000.0, last_error));
}

} // namespace base
