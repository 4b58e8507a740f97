#include "doctor/fleet/launch.hpp"

#include "base/cuda.hpp"
#include "base/error.hpp"
#include "base/launchers/backends.hpp"
#include "base/launchers/hostfile.hpp"
#include "base/launchers/node_list.hpp"
#include "base/process.hpp"
#include "base/rendezvous.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace doctor::fleet {

namespace {

using Clock = std::chrono::steady_clock;
using base::Error;

/// How long gpurun gets to stop its launch after SIGTERM before it is killed.
constexpr auto stop_grace = std::chrono::seconds(15);
/// How long the output is still read once gpurun has ended (a launcher's child may hold it open).
constexpr auto drain_time = std::chrono::seconds(2);

Clock::duration seconds(double s)
{
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(s, 1e7)));
}

/// Reads what the pipe holds now; false once it is closed.
bool read_available(int fd, std::string& into)
{
    std::array<char, 65536> buffer{};
    for (;;) {
        const ssize_t n = read(fd, buffer.data(), buffer.size());
        if (n > 0) {
            into.append(buffer.data(), static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

/// What the child's failure was, in words: "the check ended with exit status 3: what it said",
/// "... with signal 11 (Segmentation fault)" (gpurun's words for a rank's end).
std::string failure_words(const base::ChildOutcome& outcome)
{
    const std::string_view said = base::trim_blanks(outcome.output);
    return fmt::format("the check ended with {}{}", base::ending_words(outcome.status),
        said.empty() ? std::string() : ": " + std::string(said.substr(0, said.find('\n'))));
}

/// `text` as a JSON string, any bytes that are not UTF-8 replaced.
std::string as_json_text(const std::string& text)
{
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

std::vector<std::string> fleet_hosts(
    const std::string& host_list, const std::string& hostfile, const std::function<const char*(const char*)>& getenv)
{
    std::vector<base::launchers::HostSlots> list;
    if (!host_list.empty() && !hostfile.empty()) {
        throw Error("fleet: -H and --hostfile: name the nodes one way");
    }
    if (!host_list.empty()) {
        list = base::launchers::parse_host_list(host_list, "-H");
    } else if (!hostfile.empty()) {
        list = base::launchers::read_hostfile(hostfile); // one without hosts is an error there
    } else if (const char* nodes = getenv("SLURM_JOB_NODELIST"); nodes != nullptr) {
        return base::launchers::parse_node_names(nodes, "SLURM_JOB_NODELIST");
    }
    std::vector<std::string> names;
    for (const auto& h : list) {
        names.push_back(h.name);
    }
    return names;
}

std::string resolve_launcher(const std::string& word, const std::function<const char*(const char*)>& getenv)
{
    namespace b = base::launchers;
    auto kind = b::LauncherKind::automatic;
    std::vector<std::string> words{"auto"};
    for (const auto& row : b::table()) {
        words.emplace_back(row.word);
        kind = word == row.word ? row.kind : kind;
    }
    if (kind == b::LauncherKind::automatic && !word.empty() && word != "auto") {
        throw Error(fmt::format("--launcher {}: expected one of {}", base::quote_input(word), fmt::join(words, ", ")));
    }
    return b::row(b::find_launcher(kind, getenv).kind).word;
}

std::vector<std::string> gpurun_command(const FleetLaunch& o)
{
    std::string hosts;
    for (const auto& h : o.hosts) {
        // An IPv6 address keeps its colons inside brackets, as gpurun's -H reads it.
        hosts += fmt::format(
            "{}{}:1", hosts.empty() ? "" : ",", h.find(':') != std::string::npos ? fmt::format("[{}]", h) : h);
    }
    std::vector<std::string> argv{o.gpurun, "--cpu-only", "--bind", "none", "--mem-bind", "none", "--nic-binding",
        "none", "--grace", "5", "-np", std::to_string(o.hosts.size()), "-H", hosts};
    std::string launcher_args = o.launcher_args;
    if (!o.launcher.empty()) {
        argv.insert(argv.end(), {"--launcher", o.launcher});
        for (const auto& b : base::launchers::table()) {
            if (o.launcher == b.word && b.tag_option != nullptr) {
                launcher_args.insert(
                    0, launcher_args.empty() ? std::string(b.tag_option) : b.tag_option + std::string(" "));
            }
        }
    }
    if (!launcher_args.empty()) {
        argv.insert(argv.end(), {"--launcher-args", launcher_args});
    }
    argv.insert(argv.end(),
        {"--", o.gpudoctor, "fleet", node_side_option, "--deadline", fmt::format("{:g}", o.deadline_seconds)});
    argv.insert(argv.end(), o.node_args.begin(), o.node_args.end());
    return argv;
}

std::vector<NodeOutput> launch(const FleetLaunch& options, int* signal)
{
    base::Supervisor job;
    base::ReaderPipe out = base::make_reader_pipe("gpurun's output");
    base::ReaderPipe err = base::make_reader_pipe("gpurun's errors");
    job.start(
        gpurun_command(options), true, "gpudoctor: fleet: cannot run gpurun: ", err.write.get(), out.write.get(), true);
    out.write = base::UniqueFd();
    err.write = base::UniqueFd();

    std::string output;
    std::string errors;
    LaunchEnd end;
    end.deadline_seconds = options.deadline_seconds + options.launch_margin_seconds;
    bool out_open = true;
    bool err_open = true;
    bool exited = false;
    const auto stop_at = Clock::now() + seconds(end.deadline_seconds);
    auto kill_at = Clock::time_point::max();
    auto drain_until = Clock::time_point::max();
    // Until gpurun has ended and its output is read (or a child it left holds the pipes open).
    while ((!exited || out_open || err_open) && Clock::now() < drain_until) {
        const auto now = Clock::now();
        if (!exited && !end.timed_out && now >= stop_at) {
            end.timed_out = true;
            job.child().signal(SIGTERM); // gpurun stops the launch on every node
            kill_at = now + stop_grace;
        }
        if (!exited && now >= kill_at) {
            job.kill_now();
            kill_at = Clock::time_point::max();
        }
        const auto next = std::min({stop_at, kill_at, drain_until, now + std::chrono::seconds(1)});
        const auto event = job.wait(std::max(next - now, Clock::duration::zero()), out_open ? out.read.get() : -1,
            err_open ? err.read.get() : -1);
        if (event.signal != 0 && !exited) {
            job.child().signal(event.signal);
            end.signal = event.signal;
        }
        if (event.readable || exited) {
            out_open = out_open && read_available(out.read.get(), output);
            err_open = err_open && read_available(err.read.get(), errors);
        }
        if (event.exited) {
            exited = true;
            end.exit_code = event.exit_code;
            drain_until = Clock::now() + drain_time;
        }
    }
    Collected collected = collect_answers(output, errors);
    if (collected.answers.empty() && end.exit_code == 2 && !end.timed_out) {
        throw Error(
            fmt::format("fleet: gpurun did not start the nodes' checks:\n{}", base::trim_blanks(collected.other)));
    }
    if (signal != nullptr) {
        *signal = end.signal;
    }
    std::vector<NodeOutput> outputs;
    for (std::size_t rank = 0; rank < options.hosts.size(); ++rank) {
        outputs.push_back(node_output(options.hosts[rank], static_cast<unsigned>(rank), collected, end));
        outputs.back().origin_is_host = true;
    }
    return outputs;
}

std::vector<std::string> pair_hosts(std::string_view list)
{
    std::vector<std::string> hosts;
    for (const auto host : base::launchers::split_node_list(list)) {
        hosts.emplace_back(host);
    }
    return hosts;
}

std::string measure_pair(unsigned rank, const PairLaunch& round)
{
    if (rank >= round.hosts.size() || (rank ^ 1U) >= round.hosts.size()) {
        throw Error(fmt::format("rank {} has no pair among {} hosts", rank, round.hosts.size()));
    }
    const base::Cuda cuda = base::Cuda::load();
    const base::Nccl nccl = base::Nccl::load();
    cuda.init();
    const int gpus = cuda.device_count();
    if (gpus < 1) {
        throw Error("no GPU on this node");
    }
    if (nccl.api().get_unique_id == nullptr || nccl.api().comm_init_rank == nullptr) {
        throw Error(fmt::format("{} lacks ncclGetUniqueId or ncclCommInitRank", nccl.file()));
    }
    const bool leader = rank % 2 == 0;
    const std::string leader_host = round.hosts[rank & ~1U];
    const int port = round.base_port + static_cast<int>(rank / 2);
    const std::string count = fmt::format("{:08}", gpus);
    base::JoinedComm joined;
    int peer_gpus = 0;
    std::string peer_count;
    if (leader) {
        nccl.check(nccl.api().get_unique_id(&joined.id), "ncclGetUniqueId");
        const std::string id(joined.id.internal, sizeof joined.id.internal);
        peer_count = base::meet_as_leader(port, id + count, count.size(), round.timeout);
    } else {
        const std::string got =
            base::meet_leader(leader_host, port, count, sizeof joined.id.internal + count.size(), round.timeout);
        std::memcpy(joined.id.internal, got.data(), sizeof joined.id.internal);
        peer_count = got.substr(sizeof joined.id.internal);
    }
    if (std::from_chars(peer_count.data(), peer_count.data() + peer_count.size(), peer_gpus).ptr !=
            peer_count.data() + peer_count.size() ||
        peer_gpus < 1 || peer_gpus > 4096) {
        throw Error(fmt::format("the other node sent {} as its GPU count", base::quote_input(peer_count)));
    }
    joined.ranks = gpus + peer_gpus;
    joined.first_rank = leader ? 0 : peer_gpus;
    std::vector<int> devices(static_cast<std::size_t>(gpus));
    for (int d = 0; d < gpus; ++d) {
        devices[static_cast<std::size_t>(d)] = d;
    }
    const auto result = base::measure_allreduce(cuda, nccl, devices, round.settings, &joined);
    return nlohmann::json{{"busbw_gbps", result.busbw_gbps}, {"algbw_gbps", result.algbw_gbps}, {"gpus", gpus},
        {"ranks", result.ranks}, {"peer", round.hosts[rank ^ 1U]}}
        .dump();
}

PairSearch search_node_pairs(const FleetLaunch& options, const std::vector<std::string>& hosts, double fraction,
    const PairLaunch& settings, std::vector<PairFailure>& failures)
{
    auto measure = [&](const std::vector<NodePair>& pairs) {
        FleetLaunch round = options;
        round.hosts.clear();
        for (const auto& [a, b] : pairs) {
            round.hosts.insert(round.hosts.end(), {hosts[a], hosts[b]});
        }
        round.node_args = {"--pair-hosts", fmt::format("{}", fmt::join(round.hosts, ",")), "--pair-port",
            std::to_string(settings.base_port), "--pair-timeout", fmt::format("{:g}", settings.timeout.count() / 1e3)};
        std::vector<NodeOutput> answers;
        try {
            answers = launch(round);
        } catch (const base::Error& e) {
            for (const auto& host : round.hosts) { // gpurun refused this round: every pair failed
                failures.push_back({host, e.what()});
            }
            return std::vector<double>(pairs.size(), -1.0);
        }
        auto busbw = [&](std::size_t rank) {
            const NodeOutput& a = answers[rank];
            const auto doc = nlohmann::json::parse(a.text, nullptr, false);
            if (a.answer == Answer::snapshot && doc.is_object() && doc.value("busbw_gbps", -1.0) > 0) {
                return doc.value("busbw_gbps", -1.0);
            }
            failures.push_back({a.origin, fmt::format("{}: {}", to_string(a.answer), a.text)});
            return -1.0;
        };
        std::vector<double> gbps;
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            const double a = busbw(2 * i);
            const double b = busbw(2 * i + 1);
            gbps.push_back(a < 0 || b < 0 ? -1.0 : std::min(a, b));
        }
        return gbps;
    };
    return search_pairs(hosts.size(), fraction, measure);
}

int answer_as_node(const std::function<std::string(unsigned rank)>& answer, double deadline_seconds)
{
    const char* rank_text = std::getenv("RANK");
    unsigned rank = 0;
    const std::string_view r = rank_text == nullptr ? "" : rank_text;
    if (r.empty() || std::from_chars(r.data(), r.data() + r.size(), rank).ptr != r.data() + r.size()) {
        throw Error(fmt::format("fleet {}: RANK is not a rank ({}); gpudoctor fleet starts this on every node "
                                "through gpurun",
            node_side_option, rank_text == nullptr ? "unset" : base::quote_input(r)));
    }
    base::SpawnOptions spawn;
    spawn.own_group = true; // whatever the collectors started goes with it at the deadline
    spawn.die_with_parent = true;
    std::vector<base::Child> children;
    children.push_back(base::spawn_function([&] { return answer(rank); }, spawn));
    const auto outcome = base::wait_for_children(children,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(deadline_seconds)))[0];
    std::string frames;
    if (outcome.timed_out) {
        frames = frame_answer(rank, Answer::timed_out,
            as_json_text(fmt::format("its check took longer than the deadline, {:g} s", deadline_seconds)));
    } else if (outcome.exited(0)) {
        frames = frame_answer(rank, Answer::snapshot, outcome.output);
    } else {
        frames = frame_answer(rank, Answer::crashed, as_json_text(failure_words(outcome)));
    }
    // A frame per write: each arrives in one piece through the launcher's pipes.
    for (std::size_t at = 0; at < frames.size();) {
        const std::size_t end = frames.find('\n', at) + 1;
        base::write_all(STDOUT_FILENO, std::string_view(frames).substr(at, end - at));
        at = end;
    }
    return base::exit_status_after_output(0, "gpudoctor");
}

} // namespace doctor::fleet
