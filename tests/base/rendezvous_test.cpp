// Two sides meeting over TCP on this host: the bytes swapped both ways, whichever starts first,
// and what each says when the other does not come.
#include "base/error.hpp"
#include "base/rendezvous.hpp"
#include "tests/support/error_of.hpp"

#include <future>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using test_support::error_of;

namespace {

/// A port nothing listens on right now (the kernel's choice, released again).
int free_port()
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
    close(fd);
    return ntohs(a.sin_port);
}

} // namespace

TEST(Rendezvous, TheBytesGoBothWaysWhoeverComesFirst)
{
    using namespace std::chrono_literals;
    const std::string id(128, '\x07');
    for (bool leader_first : {true, false}) {
        SCOPED_TRACE(leader_first);
        const int port = free_port();
        std::future<std::string> leader;
        std::future<std::string> peer;
        auto start_leader = [&] {
            leader = std::async(std::launch::async, [&] { return base::meet_as_leader(port, id + "8", 2, 5s); });
        };
        auto start_peer = [&] {
            peer = std::async(std::launch::async, [&] { return base::meet_leader("localhost", port, "16", 129, 5s); });
        };
        if (leader_first) {
            start_leader();
            std::this_thread::sleep_for(50ms);
            start_peer();
        } else {
            start_peer(); // connects in vain until the leader listens
            std::this_thread::sleep_for(300ms);
            start_leader();
        }
        EXPECT_EQ(peer.get(), id + "8");
        EXPECT_EQ(leader.get(), "16");
    }
}

TEST(Rendezvous, NoPeerOrNoLeaderWithinTheTimeIsAnError)
{
    using namespace std::chrono_literals;
    const int port = free_port();
    EXPECT_EQ(error_of([&] { base::meet_as_leader(port, "x", 1, 300ms); }),
        "waiting for the peer on port " + std::to_string(port) + ": no peer connected within 0.3 s");
    EXPECT_EQ(error_of([&] { base::meet_leader("127.0.0.1", port, "x", 1, 300ms); }),
        "meeting the peer at 127.0.0.1 port " + std::to_string(port) +
            ": not reached within 0.3 s (Connection refused)");
    // A port another program listens on.
    const int fd = socket(AF_INET6, SOCK_STREAM, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(fd, 1), 0);
    EXPECT_NE(
        error_of([&] { base::meet_as_leader(port, "x", 1, 300ms); }).find(": cannot listen: Address already in use"),
        std::string::npos);
    close(fd);
}

TEST(Rendezvous, APeerThatLeavesEarlyIsNamed)
{
    using namespace std::chrono_literals;
    const int port = free_port();
    auto leader = std::async(std::launch::async, [&] { return base::meet_as_leader(port, "id", 4, 3s); });
    std::this_thread::sleep_for(50ms);
    // It reads the id, sends two of the four bytes the leader waits for, and closes.
    auto peer = std::async(std::launch::async, [&] { return base::meet_leader("localhost", port, "ab", 2, 3s); });
    EXPECT_EQ(peer.get(), "id");
    EXPECT_EQ(error_of([&] { leader.get(); }),
        "waiting for the peer on port " + std::to_string(port) + ": the other side closed after 2 of 4 bytes");
}
