// gpudoctor fleet's way back: the nodes' answers framed through a launcher's shared output, and
// what is said of a node that sent none.
#include "doctor/fleet/answers.hpp"
#include "doctor/fleet/launch.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

using doctor::fleet::Answer;
using doctor::fleet::collect_answers;
using doctor::fleet::frame_answer;
using doctor::fleet::LaunchEnd;
using doctor::fleet::node_output;

namespace {

/// A snapshot's compact JSON of about `bytes` bytes.
std::string snapshot_text(const std::string& host, std::size_t bytes)
{
    nlohmann::json doc = {{"gpudoctor_snapshot", 1}, {"facts", {{"host", {{"hostname", host}}}}}};
    doc["facts"]["padding"] = std::string(bytes, 'x');
    return doc.dump();
}

/// The frames' lines, each with `prefix` before it (as a launcher's tagging puts it).
std::vector<std::string> lines_of(const std::string& frames, const std::string& prefix)
{
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < frames.size();) {
        const std::size_t end = frames.find('\n', at);
        lines.push_back(prefix + frames.substr(at, end + 1 - at));
        at = end + 1;
    }
    return lines;
}

} // namespace

TEST(FleetAnswers, OneFrameForASmallAnswerSeveralForALargeOneEachUnderAKibibyte)
{
    const std::string small = snapshot_text("n01", 100);
    EXPECT_EQ(lines_of(frame_answer(0, Answer::snapshot, small), "").size(), 1U);
    const std::string large = snapshot_text("n01", 20000);
    const auto lines = lines_of(frame_answer(7, Answer::snapshot, large), "");
    EXPECT_EQ(lines.size(), (large.size() + doctor::fleet::frame_payload - 1) / doctor::fleet::frame_payload);
    for (const auto& line : lines) {
        EXPECT_LT(line.size(), 1024U) << "slurmstepd relays up to 1 KiB of a line at once";
        EXPECT_EQ(line.rfind("@gpudoctor-fleet 7 snapshot ", 0), 0U) << line.substr(0, 60);
    }
    const auto got = collect_answers(frame_answer(7, Answer::snapshot, large));
    ASSERT_EQ(got.answers.count(7), 1U);
    EXPECT_TRUE(got.answers.at(7).complete());
    EXPECT_EQ(got.answers.at(7).payload, large);
    EXPECT_EQ(got.other, "");
}

TEST(FleetAnswers, NodesInterleavedLineByLineWithLaunchersPrefixesAndMessagesBetween)
{
    std::map<unsigned, std::string> sent;
    std::vector<std::vector<std::string>> streams;
    const char* prefixes[] = {"", "[1] ", "2: ", "[1,3]<stdout>:"}; // none, gpurun, srun -l, mpirun --tag-output
    for (unsigned rank = 0; rank < 4; ++rank) {
        sent[rank] = snapshot_text(fmt::format("n{:02}", rank), 5000 + 3000 * rank);
        streams.push_back(lines_of(frame_answer(rank, Answer::snapshot, sent[rank]), prefixes[rank]));
    }
    // Lines of the four nodes in a shuffled order, each node's own order kept, with the
    // launcher's messages between them.
    std::mt19937 random(42);
    std::string output = "Warning: Permanently added 'n02' (ED25519) to the list of known hosts.\n";
    std::vector<std::size_t> next(4, 0);
    for (;;) {
        std::vector<unsigned> open;
        for (unsigned r = 0; r < 4; ++r) {
            if (next[r] < streams[r].size()) {
                open.push_back(r);
            }
        }
        if (open.empty()) {
            break;
        }
        const unsigned r = open[random() % open.size()];
        output += streams[r][next[r]++];
        if (random() % 5 == 0) {
            output += "gpurun: note: something about the plan\n";
        }
    }
    const auto got = collect_answers(output);
    ASSERT_EQ(got.answers.size(), 4U);
    for (unsigned rank = 0; rank < 4; ++rank) {
        SCOPED_TRACE(rank);
        EXPECT_TRUE(got.answers.at(rank).complete());
        EXPECT_EQ(got.answers.at(rank).payload, sent[rank]);
    }
    EXPECT_EQ(got.other.rfind("Warning: Permanently added 'n02'", 0), 0U);
    EXPECT_NE(got.other.find("gpurun: note:"), std::string::npos);
    EXPECT_EQ(got.other.find("@gpudoctor-fleet"), std::string::npos);
}

TEST(FleetAnswers, OpenMpisPiecesAreTakenApartByTheirMarksWhereverTheyCutALine)
{
    // As mpirun --tag-output relays: each rank's output in pieces of up to 4 KiB, cut anywhere,
    // its mark before each piece and after each line break in it; pieces of the ranks interleaved.
    std::mt19937 random(7);
    std::map<unsigned, std::string> sent;
    std::vector<std::vector<std::string>> pieces(3);
    for (unsigned rank = 0; rank < 3; ++rank) {
        sent[rank] = snapshot_text(fmt::format("n{:02}", rank), 20000);
        const std::string stream = frame_answer(rank, Answer::snapshot, sent[rank]) + "a line on stdout\n";
        const std::string mark = fmt::format("[1,{}]<stdout>:", rank);
        for (std::size_t at = 0; at < stream.size();) {
            const std::size_t size = std::min<std::size_t>(1 + random() % 4096, stream.size() - at);
            std::string piece = mark;
            for (std::size_t i = at; i < at + size; ++i) {
                piece += stream[i];
                if (stream[i] == '\n' && i + 1 < at + size) {
                    piece += mark;
                }
            }
            pieces[rank].push_back(piece);
            at += size;
        }
    }
    std::string output = "[1,1]<stderr>:a warning on stderr\n";
    std::vector<std::size_t> next(3, 0);
    for (bool more = true; more;) {
        more = false;
        const unsigned r = random() % 3;
        if (next[r] < pieces[r].size()) {
            output += pieces[r][next[r]++];
        }
        for (unsigned k = 0; k < 3; ++k) {
            more = more || next[k] < pieces[k].size();
        }
    }
    output += "mpirun: a message of its own\n";
    const auto got = collect_answers(output);
    for (unsigned rank = 0; rank < 3; ++rank) {
        SCOPED_TRACE(rank);
        ASSERT_EQ(got.answers.count(rank), 1U);
        EXPECT_TRUE(got.answers.at(rank).complete());
        EXPECT_EQ(got.answers.at(rank).payload, sent[rank]);
    }
    EXPECT_NE(got.other.find("mpirun: a message of its own\n"), std::string::npos);
    EXPECT_NE(got.other.find("\na warning on stderr\n"), std::string::npos) << "the mark taken off";
    EXPECT_EQ(got.other.find("<stdout>"), std::string::npos);
}

TEST(FleetAnswers, ALineCutOrMixedOnTheWayFailsItsCheckAndTheNodeIsIncomplete)
{
    const std::string text = snapshot_text("n01", 9000);
    auto lines = lines_of(frame_answer(0, Answer::snapshot, text), "");
    ASSERT_GE(lines.size(), 3U);
    const std::string other = frame_answer(1, Answer::snapshot, snapshot_text("n02", 10));
    // Another node's frame arrives in the middle of the second line (a launcher relayed 4 KiB).
    std::string mixed = lines[0] + lines[1].substr(0, 500) + other + lines[1].substr(500);
    for (std::size_t i = 2; i < lines.size(); ++i) {
        mixed += lines[i];
    }
    auto got = collect_answers(mixed);
    ASSERT_EQ(got.answers.count(0), 1U);
    EXPECT_FALSE(got.answers.at(0).complete());
    EXPECT_EQ(got.answers.at(0).parts, lines.size() - 1);
    EXPECT_EQ(got.answers.at(0).total, lines.size());
    EXPECT_TRUE(got.answers.at(1).complete()) << "the frame that came between is whole";
    const auto out = node_output("n01", 0, got, {});
    EXPECT_EQ(out.answer, Answer::garbage);
    EXPECT_EQ(out.text,
        fmt::format("{} of the {} parts of its answer arrived intact (the launcher's output was cut or mixed)",
            lines.size() - 1, lines.size()));

    // A changed byte fails the CRC; a repeated part is taken once.
    std::string flipped = lines[0];
    flipped[flipped.size() - 10] ^= 1;
    got = collect_answers(flipped + lines[0] + lines[0]);
    EXPECT_EQ(got.answers.at(0).parts, 1U);
    // Headers that are not numbers, or claim more than any node sends, are no frames.
    for (const char* bad :
        {"@gpudoctor-fleet x snapshot 0 1 2 00000000 {}\n", "@gpudoctor-fleet 0 snapshot 0 99999999 2 00000000 {}\n",
            "@gpudoctor-fleet 0 bogus 0 1 2 00000000 {}\n", "@gpudoctor-fleet 0 snapshot 0 1 900 00000000 {}\n",
            "@gpudoctor-fleet 0 snapshot 2 1 2 00000000 {}\n", "@gpudoctor-fleet\n"}) {
        EXPECT_TRUE(collect_answers(bad).answers.empty()) << bad;
    }
}

TEST(FleetAnswers, ATextThatLooksLikeOpenMpisMarkInsideAnAnswerCannotCutIt)
{
    // A snapshot may quote a launcher's output (an environment variable, a probe's message).
    const nlohmann::json doc = {{"facts", {{"note", "[1,1]<stderr>:ssh: connect to host n02"}}}};
    const std::string frames = frame_answer(0, Answer::snapshot, doc.dump());
    EXPECT_EQ(frames.find("<stderr>"), std::string::npos);
    const auto got = collect_answers("[1,0]<stdout>:" + frames);
    ASSERT_TRUE(got.answers.at(0).complete());
    EXPECT_EQ(nlohmann::json::parse(got.answers.at(0).payload), doc) << "the same JSON";
}

TEST(FleetAnswers, ANodesOwnFailureComesBackAsItsAnswer)
{
    const std::string frames = frame_answer(2, Answer::timed_out,
                                   nlohmann::json("its check took longer than the deadline, 5 s\nsecond line").dump()) +
        frame_answer(3, Answer::crashed, nlohmann::json("the check ended by signal 11 (Segmentation fault)").dump());
    const auto got = collect_answers(frames);
    auto two = node_output("n03", 2, got, {});
    EXPECT_EQ(two.answer, Answer::timed_out);
    EXPECT_EQ(two.text, "its check took longer than the deadline, 5 s\nsecond line");
    EXPECT_EQ(two.origin, "n03");
    auto three = node_output("n04", 3, got, {});
    EXPECT_EQ(three.answer, Answer::crashed);
    EXPECT_EQ(three.text, "the check ended by signal 11 (Segmentation fault)");
}

TEST(FleetAnswers, ASilentNodeIsNamedByWhatTheLauncherSaid)
{
    const std::string launcher_said =
        "gpurun: note: n1 resolves to 127.0.0.1 here\n"
        "ssh: connect to host n10 port 22: No route to host\n"
        "gpurun: rank 2 (n3, local rank 0) failed first: exit status 127 after 0.1 s; "
        "last lines of its stderr:\n"
        "  | gpurun-rank: cannot run /opt/gpukit/bin/gpudoctor: No such file or directory\n"
        "  | second line\n"
        "ORTE was unable to reliably start one or more daemons.\n";
    const auto got = collect_answers(launcher_said);
    LaunchEnd end;
    end.exit_code = 255;
    auto n10 = node_output("n10", 1, got, end);
    EXPECT_EQ(n10.answer, Answer::unreachable);
    EXPECT_EQ(n10.text, "ssh: connect to host n10 port 22: No route to host");
    auto n3 = node_output("n3", 2, got, end);
    EXPECT_EQ(n3.answer, Answer::crashed);
    EXPECT_EQ(n3.text,
        "gpurun: rank 2 (n3, local rank 0) failed first: exit status 127 after 0.1 s; last lines of its stderr: "
        "gpurun-rank: cannot run /opt/gpukit/bin/gpudoctor: No such file or directory; second line");
    // n1: only gpurun's note names it, and "n10" is another host.
    auto n1 = node_output("n1", 0, got, end);
    EXPECT_EQ(n1.answer, Answer::unreachable);
    EXPECT_EQ(n1.text,
        "no answer: the launch ended (exit status 255) before this node answered; the launcher said "
        "first: ssh: connect to host n10 port 22: No route to host");
    EXPECT_EQ(node_output("n9", 3, collect_answers(""), end).text,
        "no answer: the launch ended (exit status 255) before this node answered");
    // A host at the end of a sentence is named; one inside a longer name is not.
    EXPECT_EQ(node_output("n7", 5, collect_answers("cannot reach n7.\n"), end).text, "cannot reach n7.");
    EXPECT_EQ(node_output("n7", 5, collect_answers("cannot reach n7.ib\n"), end).answer, Answer::unreachable);
    EXPECT_NE(node_output("n7", 5, collect_answers("cannot reach n7.ib\n"), end).text, "cannot reach n7.ib");

    LaunchEnd stopped = end;
    stopped.signal = 2;
    EXPECT_EQ(node_output("n10", 1, got, stopped).text,
        "no answer: the launch was stopped by signal 2 (Interrupt) before this node answered");
    end.timed_out = true;
    end.deadline_seconds = 120;
    auto late = node_output("n10", 1, got, end);
    EXPECT_EQ(late.answer, Answer::timed_out);
    EXPECT_EQ(late.text, "no answer within 120 s; the launch was stopped");
}

TEST(FleetAnswers, ANodeThatPrintsSomethingElseIsGarbageWithItsFirstLine)
{
    const LaunchEnd end;
    // Whose line it is, by the launcher's mark: Open MPI's, srun --label's, Hydra's.
    for (const char* output : {"[1,1]<stdout>:<html>502 Bad Gateway</html>\n[1,1]<stdout>:second\n",
             "  1: <html>502 Bad Gateway</html>\n", "[1] <html>502 Bad Gateway</html>\n"}) {
        SCOPED_TRACE(output);
        const auto got = collect_answers(frame_answer(0, Answer::snapshot, "{}"), output);
        const auto one = node_output("n02", 1, got, end);
        EXPECT_EQ(one.answer, Answer::garbage);
        EXPECT_EQ(one.text, "no answer; it printed instead: '<html>502 Bad Gateway</html>'");
        EXPECT_EQ(node_output("n01", 0, got, end).answer, Answer::snapshot) << "rank 0's answer is whole";
    }
    // A line without a rank's mark is the launcher's.
    const auto got = collect_answers("", "1 warning: x\n[x] y\n");
    EXPECT_TRUE(got.said.empty());
    EXPECT_EQ(node_output("n02", 1, got, end).answer, Answer::unreachable);
}

TEST(FleetLaunch, GpurunStartsOneNodeSideOnEveryHostWithoutBindingOrAGpuOfItsOwn)
{
    doctor::fleet::FleetLaunch o;
    o.hosts = {"n01", "n02", "fe80::1"};
    o.gpurun = "/opt/gpukit/bin/gpurun";
    o.gpudoctor = "/opt/gpukit/bin/gpudoctor";
    o.launcher = "srun";
    o.launcher_args = "--partition gpu";
    o.deadline_seconds = 90;
    o.node_args = {"--only", "gpus,limits", "--timeout", "10"};
    const std::vector<std::string> expected{"/opt/gpukit/bin/gpurun", "--cpu-only", "--bind", "none", "--mem-bind",
        "none", "--nic-binding", "none", "--grace", "5", "-np", "3", "-H", "n01:1,n02:1,[fe80::1]:1", "--launcher",
        "srun", "--launcher-args", "--label --partition gpu", "--", "/opt/gpukit/bin/gpudoctor", "fleet",
        "--answer-as-node", "--deadline", "90", "--only", "gpus,limits", "--timeout", "10"};
    EXPECT_EQ(doctor::fleet::gpurun_command(o), expected) << "srun marks each line with its task (--label)";
    o.launcher = "openmpi";
    o.launcher_args.clear();
    const auto openmpi = doctor::fleet::gpurun_command(o);
    EXPECT_EQ(std::vector<std::string>(openmpi.begin() + 14, openmpi.begin() + 18),
        (std::vector<std::string>{"--launcher", "openmpi", "--launcher-args", "--tag-output"}));
    o.launcher = "local";
    const auto local = doctor::fleet::gpurun_command(o);
    EXPECT_EQ(local[16], "--") << "gpurun's own launcher, on this node alone, has nothing to mark";
    EXPECT_NE(test_support::error_of([] {
        doctor::fleet::resolve_launcher("pbs", [](const char*) { return nullptr; });
    }).find("--launcher 'pbs': expected one of auto, openmpi, mpich, srun, local"),
        std::string::npos);
    EXPECT_EQ(doctor::fleet::resolve_launcher("local", [](const char*) { return nullptr; }), "local");
}

TEST(FleetLaunch, TheNodesFromHostListHostfileOrTheSlurmAllocation)
{
    using doctor::fleet::fleet_hosts;
    std::map<std::string, std::string> env;
    auto getenv = [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    EXPECT_EQ(
        fleet_hosts("gpu[01-03]:8,cpu7", "", getenv), (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "cpu7"}));
    EXPECT_TRUE(fleet_hosts("", "", getenv).empty());
    env["SLURM_JOB_NODELIST"] = "n[08-10]";
    EXPECT_EQ(fleet_hosts("", "", getenv), (std::vector<std::string>{"n08", "n09", "n10"}));
    EXPECT_EQ(fleet_hosts("a,b", "", getenv), (std::vector<std::string>{"a", "b"})) << "-H wins over the allocation";
    test_support::TempDir dir;
    std::ofstream(dir / "hosts") << "# nodes\nn01 slots=8\nn02:4\n";
    EXPECT_EQ(fleet_hosts("", (dir / "hosts").string(), getenv), (std::vector<std::string>{"n01", "n02"}));
    std::ofstream(dir / "empty") << "# nobody\n";
    EXPECT_NE(test_support::error_of([&] {
        fleet_hosts("", (dir / "empty").string(), getenv);
    }).find("no hosts in the hostfile"),
        std::string::npos);
    EXPECT_NE(test_support::error_of([&] {
        fleet_hosts("a", (dir / "hosts").string(), getenv);
    }).find("-H and --hostfile: name the nodes one way"),
        std::string::npos);
    EXPECT_NE(test_support::error_of([&] { fleet_hosts("n[3-1]", "", getenv); }), "");
    env["SLURM_JOB_NODELIST"] = "n[1-";
    EXPECT_NE(
        test_support::error_of([&] { fleet_hosts("", "", getenv); }).find("SLURM_JOB_NODELIST"), std::string::npos);
}
