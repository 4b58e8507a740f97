// The program integration tests start under gpurun. It writes what the rank sees into
// $PROBE_DIR/rank-$RANK.txt: selected environment variables, its Cpus_allowed_list and its
// arguments (one "arg=" line each), and HOST= its host name. PROBE_EXIT_RANK/PROBE_EXIT make one
// rank exit with a code; PROBE_SLEEP makes every rank write its pid to $PROBE_DIR/pid-$RANK and sleep.
// PROBE_OPEN_GPU stands for "the program opened a GPU" with the fake NVML: the rank appends
// "<pid> <gpu>" to $FAKE_NVML_PROCESS_FILE, <gpu> being the value given (an index or a bus id), or
// the rank's own GPU (GPURUN_GPU_BUS_ID) for "own".
// PROBE_PRINT=N: N lines "out N of RANK" on stdout and "err N of RANK" on stderr; PROBE_LONG_LINE=B:
// one stdout line of B bytes 'x' and the 256 byte values as one more "line"; PROBE_DAEMON: starts a
// daemon (double fork, new session) that writes its pid to $PROBE_DIR/daemon-$RANK and sleeps;
// PROBE_IGNORE_TERM: the rank ignores SIGINT, SIGTERM and SIGHUP.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

void start_daemon(const std::string& dir, const char* rank)
{
    const pid_t first = fork();
    if (first == 0) {
        setsid();
        if (fork() == 0) {
            std::ofstream(dir + "/daemon-" + rank) << getpid() << '\n';
            sleep(120);
        }
        _exit(0);
    }
    waitpid(first, nullptr, 0);
    // The pid is written before the rank goes on.
    for (int i = 0; i < 500 && access((dir + "/daemon-" + rank).c_str(), F_OK) != 0; ++i) {
        usleep(10000);
    }
}

} // namespace

int main(int argc, char** argv)
{
    const char* dir = std::getenv("PROBE_DIR");
    const char* rank = std::getenv("RANK");
    if (dir == nullptr || rank == nullptr) {
        return 99;
    }
    std::ofstream out(std::string(dir) + "/rank-" + rank + ".txt");
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
             "MASTER_ADDR", "MASTER_PORT", "CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "GPURUN_GPU",
             "GPURUN_GPU_BUS_ID", "GPURUN_GPU_UUID", "GPURUN_CPUS", "GPURUN_NUMA", "OMP_NUM_THREADS",
             "GPURUN_LOCAL_BATCH", "GPURUN_LOSS_WEIGHT", "GPURUN_NIC", "GPURUN_HCA", "UCX_NET_DEVICES", "NCCL_IB_HCA",
             "PMI_RANK", "SLURM_PROCID", "FAKE_LAUNCHER_HOST", "GPURUN_NODE_PLAN"}) {
        const char* value = std::getenv(name);
        out << name << '=' << (value != nullptr ? value : "<unset>") << '\n';
    }
    // The node the rank runs on: a network namespace with its own hostname in the multi-node tests.
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) {
        out << "HOST=" << host << '\n';
    }
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) {
            std::string value = line.substr(line.find(':') + 1);
            value.erase(0, value.find_first_not_of(" \t"));
            out << "Cpus_allowed_list=" << value << '\n';
        }
    }
    for (int i = 1; i < argc; ++i) {
        out << "arg=" << argv[i] << '\n';
    }
    out.close();
    if (std::getenv("PROBE_IGNORE_TERM") != nullptr) {
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
            signal(sig, SIG_IGN);
        }
    }
    if (const char* lines = std::getenv("PROBE_PRINT"); lines != nullptr) {
        for (int i = 1; i <= std::atoi(lines); ++i) {
            std::printf("out %d of %s\n", i, rank);
            std::fflush(stdout);
            std::fprintf(stderr, "err %d of %s\n", i, rank);
        }
    }
    if (const char* bytes = std::getenv("PROBE_LONG_LINE"); bytes != nullptr) {
        std::string line(static_cast<std::size_t>(std::atol(bytes)), 'x');
        line += '\n';
        for (int b = 0; b < 256; ++b) {
            line += static_cast<char>(b);
        }
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
    }
    if (std::getenv("PROBE_DAEMON") != nullptr) {
        start_daemon(dir, rank);
    }
    // The pid first: a monitor may stop the rank as soon as it "opens" a GPU.
    const char* sleep_for = std::getenv("PROBE_SLEEP");
    if (sleep_for != nullptr) {
        std::ofstream(std::string(dir) + "/pid-" + rank) << getpid() << '\n';
    }
    const char* open_gpu = std::getenv("PROBE_OPEN_GPU");
    const char* process_file = std::getenv("FAKE_NVML_PROCESS_FILE");
    if (open_gpu != nullptr && process_file != nullptr) {
        const char* own = std::getenv("GPURUN_GPU_BUS_ID");
        const std::string gpu = std::string(open_gpu) == "own" ? (own != nullptr ? own : "none") : open_gpu;
        std::ofstream(process_file, std::ios::app) << getpid() << ' ' << gpu << '\n';
    }
    if (sleep_for != nullptr) {
        sleep(static_cast<unsigned>(std::atoi(sleep_for)));
    }
    const char* exit_rank = std::getenv("PROBE_EXIT_RANK");
    if (exit_rank != nullptr && std::string(exit_rank) == rank) {
        return std::atoi(std::getenv("PROBE_EXIT") != nullptr ? std::getenv("PROBE_EXIT") : "1");
    }
    return 0;
}
