#include "base/binding.hpp"
#include "base/error.hpp"

#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

/// Runs `body` in a child (binding there leaves this process alone) and returns what it wrote.
std::string in_child(const std::function<std::string()>& body)
{
    int fds[2];
    if (pipe(fds) != 0) {
        return "pipe failed";
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        std::string out;
        try {
            out = body();
        } catch (const base::Error& e) {
            out = std::string("error: ") + e.what();
        }
        (void)!write(fds[1], out.data(), out.size());
        _exit(0);
    }
    close(fds[1]);
    std::string out;
    char buffer[512];
    ssize_t n = 0;
    while ((n = read(fds[0], buffer, sizeof buffer)) > 0) {
        out.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return out;
}

TEST(Binding, CpusAreBoundAndReadBackFromTheKernel)
{
    const base::CpuSet allowed = base::cpu_binding();
    ASSERT_FALSE(allowed.empty());
    const base::CpuSet last({allowed.cpus().back()});
    EXPECT_EQ(in_child([&] {
        base::bind_cpus(last);
        return base::cpu_binding().to_list();
    }),
        last.to_list());
    EXPECT_EQ(base::cpu_binding().to_list(), allowed.to_list()) << "the test's own process stays as it was";
}

TEST(Binding, MemoryPolicyIsSetAsAskedAndReadBack)
{
    EXPECT_EQ(in_child([] {
        base::bind_memory({0}, base::MemoryPolicy::strict);
        return base::memory_binding();
    }),
        "bind 0");
    const std::string preferred = in_child([] {
        base::bind_memory({0}, base::MemoryPolicy::preferred);
        return base::memory_binding();
    });
    // Linux 5.15 and later keep several preferred nodes; before, the first one.
    EXPECT_TRUE(preferred == "preferred-many 0" || preferred == "preferred 0") << preferred;
    EXPECT_EQ(in_child([] {
        base::bind_memory({0}, base::MemoryPolicy::none);
        base::bind_memory({}, base::MemoryPolicy::strict);
        return base::memory_binding();
    }),
        "default");
}

TEST(Binding, ImpossibleRequestsAreErrorsThatSayWhat)
{
    EXPECT_EQ(in_child([] {
        base::bind_cpus(base::CpuSet());
        return std::string("bound");
    }),
        "error: cannot bind to an empty set of CPUs");
    const std::string far = in_child([] {
        base::bind_memory({4096}, base::MemoryPolicy::strict);
        return std::string("bound");
    });
    EXPECT_NE(far.find("NUMA node 4096"), std::string::npos) << far;
    const std::string absent = in_child([] {
        base::bind_memory({1000}, base::MemoryPolicy::strict);
        return std::string("bound");
    });
    EXPECT_NE(absent.find("set_mempolicy(nodes 1000) failed"), std::string::npos) << absent;
}

} // namespace
