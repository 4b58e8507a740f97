#include "probes/command.hpp"

#include "probes/error.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace probes {

void KeptOutput::append(const char* data, std::size_t size)
{
    const std::size_t to_head = std::min(size, m_head_limit - m_head.size());
    m_head.append(data, to_head);
    data += to_head;
    size -= to_head;
    if (size == 0) {
        return;
    }
    m_tail.append(data, size);
    // Trim only once the tail is twice its size: each byte is moved at most once.
    if (m_tail.size() > 2 * m_tail_limit) {
        const std::size_t cut = m_tail.size() - m_tail_limit;
        m_tail.erase(0, cut);
        m_dropped += cut;
    }
}

std::string KeptOutput::take()
{
    if (m_tail.size() > m_tail_limit) {
        const std::size_t cut = m_tail.size() - m_tail_limit;
        m_tail.erase(0, cut);
        m_dropped += cut;
    }
    std::string out = std::move(m_head);
    if (m_dropped > 0) {
        if (!out.empty() && out.back() != '\n') {
            out += '\n';
        }
        out += fmt::format("[... {} bytes of output left out ...]\n", m_dropped);
    }
    out += m_tail;
    m_head.clear();
    m_tail.clear();
    m_dropped = 0;
    return out;
}

std::optional<std::string> find_executable(const std::string& name, const char* path)
{
    auto usable = [](const std::string& file) {
        struct stat st { };
        return stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0;
    };
    if (name.empty()) {
        return std::nullopt;
    }
    if (name.find('/') != std::string::npos) {
        return usable(name) ? std::optional<std::string>(name) : std::nullopt;
    }
    std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t pos = 0;
    while (pos <= dirs.size()) {
        std::size_t colon = dirs.find(':', pos);
        std::string dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
        std::string file = (dir.empty() ? std::string(".") : dir) + "/" + name;
        if (usable(file)) {
            return file;
        }
        if (colon == std::string::npos) {
            break;
        }
        pos = colon + 1;
    }
    return std::nullopt;
}

namespace {

// Runs argv; `envp` null: this process's environment and a PATH search (execvp); otherwise
// `file` is executed with exactly `envp`.
CommandResult run_child(
    const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const char* file, char* const* envp)
{
    if (argv.empty()) {
        throw Error("run_command: empty argv");
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        throw Error(fmt::format("cannot run {}: pipe: {}", argv[0], std::strerror(errno)));
    }
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(fds[0]);
        close(fds[1]);
        throw Error(fmt::format("cannot run {}: fork: {}", argv[0], std::strerror(err)));
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC); // closed at exec, after dup2
        if (devnull >= 0) {
            dup2(devnull, 0);
        }
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        if (envp == nullptr) {
            execvp(args[0], args.data());
        } else {
            execve(file, args.data(), envp);
        }
        _exit(127);
    }
    close(fds[1]);
    CommandResult result;
    KeptOutput kept;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            result.timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int ready = poll(&p, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            continue;
        }
        ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        kept.append(buffer, static_cast<std::size_t>(n));
    }
    result.output = kept.take();
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) { }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

} // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout)
{
    return run_child(argv, timeout, nullptr, nullptr);
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const std::map<std::string, std::string>& env)
{
    if (argv.empty()) {
        throw Error("run_command: empty argv");
    }
    auto path = env.find("PATH");
    // Not found: execve fails in the child and the result is exit status 127, as with execvp.
    std::string file = find_executable(argv[0], path == env.end() ? nullptr : path->second.c_str()).value_or(argv[0]);
    std::vector<std::string> entries;
    entries.reserve(env.size());
    for (const auto& [name, value] : env) {
        std::string entry = name;
        entry += '=';
        entry += value;
        entries.push_back(std::move(entry));
    }
    std::vector<char*> envp;
    for (auto& e : entries) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    return run_child(argv, timeout, file.c_str(), envp.data());
}

void exit_after_failed_exec(const std::string& message, int err) noexcept
{
    const char* reason = std::strerror(err);
    for (const auto& [text, size] : {std::pair{message.data(), message.size()}, std::pair{reason, std::strlen(reason)},
             std::pair{"\n", std::size_t{1}}}) {
        if (write(STDERR_FILENO, text, size) < 0) {
            break;
        }
    }
    _exit(127);
}

} // namespace probes
