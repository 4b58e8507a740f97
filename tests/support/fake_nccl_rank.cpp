// A program that logs like one rank of an NCCL job, for the gpurun --nccl-check tests. Like NCCL,
// it writes its INFO lines only when NCCL_DEBUG is INFO or TRACE, to NCCL_DEBUG_FILE with %h (the
// host name up to its first '.') and %p (the pid) expanded, or to standard output when that is
// unset or cannot be opened. Rank and size come from OMPI_COMM_WORLD_RANK/SIZE.
//
//   fake_nccl_rank [--transport p2p|shm] [--wait-for FILE]
//
// --transport picks the path of the Channel lines (P2P/CUMEM/read, or SHM/direct/direct);
// --wait-for makes the rank wait after Init COMPLETE until FILE exists (60 s at most) before it
// prints "fake_nccl_rank R: done" and exits. Standard output also gets one line with what it saw.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <strings.h>
#include <thread>
#include <unistd.h>

namespace {

std::string env_or(const char* name, const char* fallback)
{
    const char* v = std::getenv(name);
    return v != nullptr ? v : fallback;
}

std::string short_hostname()
{
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    std::string host = name;
    return host.substr(0, host.find('.'));
}

std::string expand(const std::string& pattern, const std::string& host, long pid)
{
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
            out += host;
            ++i;
        } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
            out += std::to_string(pid);
            ++i;
        } else {
            out += pattern[i];
        }
    }
    return out;
}

} // namespace

int main(int argc, char** argv)
{
    std::string transport = "P2P/CUMEM/read";
    std::string wait_for;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--transport" && i + 1 < argc) {
            const std::string t = argv[++i];
            transport = t == "shm" ? "SHM/direct/direct" : "P2P/CUMEM/read";
        } else if (a == "--wait-for" && i + 1 < argc) {
            wait_for = argv[++i];
        } else {
            std::fprintf(stderr, "fake_nccl_rank: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    const int rank = std::atoi(env_or("OMPI_COMM_WORLD_RANK", "0").c_str());
    const int nranks = std::atoi(env_or("OMPI_COMM_WORLD_SIZE", "1").c_str());
    const std::string level = env_or("NCCL_DEBUG", "");
    std::printf("fake_nccl_rank %d of %d: NCCL_DEBUG=%s NCCL_DEBUG_SUBSYS=%s\n", rank, nranks, level.c_str(),
        env_or("NCCL_DEBUG_SUBSYS", "").c_str());
    std::fflush(stdout);

    const bool info = strcasecmp(level.c_str(), "INFO") == 0 || strcasecmp(level.c_str(), "TRACE") == 0;
    const std::string host = short_hostname();
    const long pid = static_cast<long>(getpid());
    FILE* log = nullptr;
    if (info) {
        log = stdout;
        if (const char* file = std::getenv("NCCL_DEBUG_FILE"); file != nullptr && *file != '\0') {
            if (FILE* f = std::fopen(expand(file, host, pid).c_str(), "w"); f != nullptr) {
                log = f;
            }
        }
    }
    auto line = [&](const std::string& text) {
        if (log != nullptr) {
            std::fprintf(log, "%s:%ld:%ld [%d] NCCL INFO %s\n", host.c_str(), pid, pid, rank, text.c_str());
            std::fflush(log);
        }
    };
    const std::string comm = "ncclCommInitRank comm 0x5555aaaa0000 rank " + std::to_string(rank) + " nranks " +
        std::to_string(nranks) + " cudaDev " + std::to_string(rank) + " nvmlDev " + std::to_string(rank) + " busId " +
        std::to_string(rank + 1) + "0000 commId 0xabcdef0123456789";
    line("NCCL version 2.21.5+cuda12.4");
    line(comm + " - Init START");
    if (nranks > 1) {
        const int next = (rank + 1) % nranks;
        for (int channel = 0; channel < 2; ++channel) {
            line("Channel 0" + std::to_string(channel) + "/0 : " + std::to_string(rank) + "[" + std::to_string(rank) +
                "] -> " + std::to_string(next) + "[" + std::to_string(next) + "] via " + transport);
        }
    }
    line(comm + " - Init COMPLETE");

    if (!wait_for.empty()) {
        for (int i = 0; i < 600 && !std::filesystem::exists(wait_for); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    std::printf("fake_nccl_rank %d: done\n", rank);
    return 0;
}
