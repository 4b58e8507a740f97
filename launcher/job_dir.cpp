#include "launcher/job_dir.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace launcher {

namespace {

using base::Error;

constexpr std::size_t job_id_length = 16;
constexpr const char* record_prefix = "rank-";

} // namespace

std::string new_job_id()
{
    unsigned char bytes[job_id_length / 2];
    std::size_t got = 0;
    while (got < sizeof bytes) {
        const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n < 0 && errno != EINTR) {
            throw Error(fmt::format("cannot make a job id: getrandom: {}", std::strerror(errno)));
        }
        got += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    std::string id;
    for (unsigned char b : bytes) {
        id += fmt::format("{:02x}", b);
    }
    return id;
}

bool valid_job_id(const std::string& id)
{
    return id.size() == job_id_length &&
        std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string job_dir_path(const std::string& job_id, const std::string& tmpdir)
{
    return fmt::format("{}/gpurun-{}", tmpdir.empty() ? "/tmp" : tmpdir, job_id);
}

std::string job_dir_from_environment()
{
    const char* id = std::getenv(job_id_variable);
    if (id == nullptr || !valid_job_id(id)) {
        throw Error(fmt::format("{} is {}: not a job id made by gpurun; gpurun-rank is started by gpurun",
            job_id_variable, id == nullptr ? "not set" : base::quote_input(id)));
    }
    const char* tmpdir = std::getenv("TMPDIR");
    return job_dir_path(id, tmpdir != nullptr ? tmpdir : "");
}

void make_private_dir(const std::string& dir)
{
    if (mkdir(dir.c_str(), 0700) == 0) {
        // The umask may have taken bits away; it never adds any.
        if (chmod(dir.c_str(), 0700) != 0) {
            throw Error(fmt::format("cannot set the mode of the job directory {}: {}", dir, std::strerror(errno)));
        }
    } else if (errno != EEXIST) {
        throw Error(fmt::format(
            "cannot make the job directory {}: {}; set TMPDIR to a writable directory", dir, std::strerror(errno)));
    }
    if (const std::string why = base::why_not_private(dir); !why.empty()) {
        throw Error(fmt::format("the job directory {} is not private: {}; remove it, or set TMPDIR to a directory of "
                                "your own",
            dir, why));
    }
}

void write_rank_record(const std::string& dir, const RankRecord& record)
{
    const std::string text = fmt::format("rank {}\nlocal_rank {}\npid {}\nstart_time {}\ngpu {}\n", record.rank,
        record.local_rank, record.pid, record.start_time, record.gpu.to_string());
    base::write_file_atomically(fmt::format("{}/{}{}", dir, record_prefix, record.rank), text, "rank record", 0600);
}

std::vector<RankRecord> read_rank_records(const std::string& dir)
{
    std::vector<RankRecord> records;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().rfind(record_prefix, 0) != 0) {
            continue;
        }
        std::ifstream in(it->path());
        RankRecord r;
        unsigned found = 0;
        std::string key;
        std::string value;
        while (in >> key >> value) {
            std::istringstream v(value);
            if (key == "rank" && v >> r.rank) {
                found |= 1;
            } else if (key == "local_rank" && v >> r.local_rank) {
                found |= 2;
            } else if (key == "pid" && v >> r.pid) {
                found |= 4;
            } else if (key == "start_time" && v >> r.start_time) {
                found |= 8;
            } else if (auto bus = base::PciAddress::parse(value); key == "gpu" && bus) {
                r.gpu = *bus;
                found |= 16;
            }
        }
        if (found == 31) {
            records.push_back(r);
        }
    }
    std::sort(records.begin(), records.end(), [](const RankRecord& a, const RankRecord& b) { return a.rank < b.rank; });
    return records;
}

} // namespace launcher
