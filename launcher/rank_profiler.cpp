#include "launcher/rank_profiler.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/process.hpp"
#include "launcher/plan_report.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fmt/format.h>

namespace launcher {

namespace {

using base::Error;

constexpr unsigned largest_rank = (1U << 20) - 1;

std::string rank_phrase(const std::vector<unsigned>& ranks)
{
    return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", format_rank_list(ranks));
}

std::vector<unsigned> chosen_ranks(const ProfileOptions& profile, unsigned world_size)
{
    std::vector<unsigned> out;
    for (unsigned r = 0; r < world_size; ++r) {
        if (profiles_rank(profile, r)) {
            out.push_back(r);
        }
    }
    return out;
}

} // namespace

std::vector<unsigned> parse_rank_list(std::string_view text, const std::string& option)
{
    auto bad = [&](const std::string& why) {
        return Error(fmt::format("{} {}: {}; write ranks as 0,3 or 0-7, or all", option,
            text.empty() ? std::string("''") : std::string(text), why));
    };
    if (text == "all") {
        return {};
    }
    auto number = [&](std::string_view word) {
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
        if (word.empty() || ec != std::errc() || ptr != word.data() + word.size()) {
            throw bad(fmt::format("'{}' is not a rank number", word));
        }
        if (value > largest_rank) {
            throw bad(fmt::format("rank {} is beyond {}", word, largest_rank));
        }
        return value;
    };
    // Ranges first, merged, then expanded: "0-1048575,0-1048575" costs no more than once.
    std::vector<std::pair<unsigned, unsigned>> ranges;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        const std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
        const std::size_t dash = item.find('-');
        if (dash == std::string_view::npos) {
            const unsigned rank = number(item);
            ranges.emplace_back(rank, rank);
        } else {
            const unsigned first = number(item.substr(0, dash));
            const unsigned last = number(item.substr(dash + 1));
            if (last < first) {
                throw bad(fmt::format("the range {} goes down; write {}-{}", item, last, first));
            }
            ranges.emplace_back(first, last);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        start = comma + 1;
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<unsigned> ranks;
    for (const auto& [first, last] : ranges) {
        for (unsigned r = ranks.empty() ? first : std::max(first, ranks.back() + 1); r <= last; ++r) {
            ranks.push_back(r);
        }
    }
    return ranks;
}

std::string format_rank_list(const std::vector<unsigned>& ranks)
{
    if (ranks.empty()) {
        return "all";
    }
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
            ++j;
        }
        out += fmt::format("{}{}", out.empty() ? "" : ",", ranks[i]);
        if (j > i) {
            out += fmt::format("-{}", ranks[j]);
        }
        i = j + 1;
    }
    return out;
}

bool profiles_rank(const ProfileOptions& profile, unsigned rank)
{
    return profile.profiler != Profiler::none &&
        (profile.ranks.empty() || std::binary_search(profile.ranks.begin(), profile.ranks.end(), rank));
}

std::string profile_report_base(const std::string& dir, unsigned rank)
{
    return (std::filesystem::path(dir) / fmt::format("rank{}", rank)).string();
}

std::vector<std::string> nsys_command(
    const std::string& dir, unsigned rank, const std::vector<std::string>& program, const std::string& mpi_impl)
{
    // Long options with '=', as the Nsight Systems user guide writes them. gpurun drives Open MPI,
    // so the MPI trace needs no detection.
    std::vector<std::string> argv{"nsys", "profile", "-o", profile_report_base(dir, rank), "--trace=cuda,nvtx,osrt,mpi",
        "--mpi-impl=" + mpi_impl, "--export=sqlite", "--force-overwrite=true"};
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
}

std::string default_profile_dir(std::time_t now)
{
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32] = {};
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    return std::string("gpurun-profile-") + stamp;
}

void prepare_profile(ProfileOptions& profile, unsigned world_size, bool dry_run, bool remote_hosts,
    const char* path_env, std::vector<std::string>& notes)
{
    if (profile.profiler == Profiler::none) {
        return;
    }
    if (!profile.ranks.empty() && profile.ranks.back() >= world_size) {
        std::vector<unsigned> beyond;
        std::copy_if(profile.ranks.begin(), profile.ranks.end(), std::back_inserter(beyond),
            [&](unsigned r) { return r >= world_size; });
        throw Error(fmt::format("--profile-ranks {}: the job has {} rank{} (0{}); {} {} not in it",
            format_rank_list(profile.ranks), world_size, world_size == 1 ? "" : "s",
            world_size == 1 ? "" : fmt::format("-{}", world_size - 1), rank_phrase(beyond),
            beyond.size() == 1 ? "is" : "are"));
    }
    if (!base::find_executable("nsys", path_env)) {
        const std::string what = "--profile nsys: nsys is not on PATH; install Nsight Systems (nsys) or add its bin "
                                 "directory (such as /opt/nvidia/nsight-systems/VERSION/bin) to PATH";
        if (!dry_run) {
            throw Error(what);
        }
        notes.push_back(what);
    }
    std::error_code ec;
    const bool by_default = profile.dir.empty();
    std::filesystem::path dir = by_default ? std::filesystem::path(default_profile_dir(std::time(nullptr)))
                                           : std::filesystem::path(profile.dir);
    dir = std::filesystem::absolute(dir, ec).lexically_normal();
    if (!dir.has_filename()) {
        dir = dir.parent_path();
    }
    if (by_default && !dry_run) {
        // Two jobs started in the same second get their own directories.
        const std::filesystem::path base = dir;
        for (unsigned n = 2; std::filesystem::exists(dir, ec) && n < 1000; ++n) {
            dir = base.string() + fmt::format("-{}", n);
        }
    }
    profile.dir = dir.string();
    if (remote_hosts) {
        notes.push_back(fmt::format("--profile nsys: ranks on other hosts write their reports to {} on their own "
                                    "host; use a --profile-dir on a shared file system to have them all here",
            profile.dir));
    }
}

void create_profile_dir(const ProfileOptions& profile)
{
    if (profile.profiler == Profiler::none) {
        return;
    }
    // As --nccl-log-dir: the reports go into a directory of the user's that no other user can
    // write to or swap (made 0700 when missing).
    base::own_directory(profile.dir, "--profile-dir");
}

std::string profile_epilogue(const ProfileOptions& profile, unsigned world_size)
{
    if (profile.profiler == Profiler::none) {
        return "";
    }
    std::vector<unsigned> found;
    std::vector<unsigned> missing;
    std::vector<std::string> exports;
    for (unsigned r : chosen_ranks(profile, world_size)) {
        const std::string sqlite = profile_report_base(profile.dir, r) + ".sqlite";
        std::error_code ec;
        if (std::filesystem::exists(sqlite, ec)) {
            found.push_back(r);
            exports.push_back(sqlite);
        } else {
            missing.push_back(r);
        }
    }
    std::string out;
    if (!found.empty()) {
        out += fmt::format("gpurun: profile: the nsys reports of {} are in {} (rank<N>.nsys-rep for the Nsight "
                           "Systems GUI, rank<N>.sqlite)\n",
            rank_phrase(found), profile.dir);
    }
    if (!missing.empty()) {
        out += fmt::format("gpurun: profile: no report from {} in {}: nsys failed (see its output above), or the "
                           "rank ran on another host and wrote there\n",
            rank_phrase(missing), profile.dir);
    }
    if (!found.empty()) {
        std::vector<std::string> command{"gpudoctor", "profile"};
        if (exports.size() <= 4) {
            command.insert(command.end(), exports.begin(), exports.end());
        } else {
            command.push_back(profile.dir);
        }
        out += fmt::format("gpurun: profile: read them with: {}\n", shell_quote(command));
    }
    return out;
}

} // namespace launcher
