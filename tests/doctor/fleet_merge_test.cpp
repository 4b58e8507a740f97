#include "base/error.hpp"
#include "doctor/engine/policy.hpp"
#include "doctor/fleet/merge.hpp"
#include "doctor/probes/table.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

using doctor::fleet::Answer;
using doctor::fleet::NodeOutput;
using nlohmann::json;

namespace {

// A node's facts as `gpudoctor snapshot` writes them: the limits and host collectors, eight
// GPUs from NVML, the libraries, and the NCCL variables set.
json node_facts(const std::string& host)
{
    json gpus = json::array();
    for (int i = 0; i < 8; ++i) {
        gpus.push_back({{"index", i}, {"bus_id", fmt::format("0000:{:02x}:00.0", 0x18 + i)},
            {"name", "NVIDIA H100 80GB HBM3"}, {"pcie_gen", 5}, {"pcie_width", 16}});
    }
    return {{"host", {{"hostname", host}, {"kernel", "5.15.0-105-generic"}, {"machine", "x86_64"}}},
        {"limits",
            {{"shm", {{"bytes", 68719476736ULL}, {"exists", true}, {"mounted", true}, {"fstype", "tmpfs"}}},
                {"memlock", {{"soft", "unlimited"}, {"hard", "unlimited"}}},
                {"nofile", {{"soft", 1048576}, {"hard", 1048576}}}}},
        {"nvml",
            {{"driver_file", "NVRM version: 550.54.15"}, {"nvml_loaded", true}, {"driver_version", "550.54.15"},
                {"cuda_driver_version", 12040}, {"gpus", gpus}}},
        {"libraries", {{"nccl", {{"version", "2.21.5"}}}, {"cudnn", {{"version", "9.1.0"}}}}},
        {"env", {{"variables", {{"NCCL_IB_HCA", "mlx5"}}}, {"interfaces", {"ib0", "lo"}}}}};
}

NodeOutput snapshot_of(const std::string& host, const json& facts)
{
    return {host, Answer::snapshot, json{{"gpudoctor_snapshot", 1}, {"version", "0.1.0"}, {"facts", facts}}.dump()};
}

doctor::fleet::FleetReport merge(const std::vector<NodeOutput>& outputs, bool strict = false)
{
    static const auto probes = doctor::probes::select_probes("limits", "", false);
    return doctor::fleet::merge(outputs, probes, doctor::engine::Policy::defaults(), strict);
}

} // namespace

TEST(FleetMerge, EqualNodesAreAllFitWithNoDrift)
{
    const auto report = merge({snapshot_of("n01", node_facts("n01")), snapshot_of("n02", node_facts("n02"))});
    EXPECT_EQ(doctor::fleet::exit_status(report), 0);
    EXPECT_TRUE(report.drift.empty());
    EXPECT_EQ(doctor::fleet::healthy_hostfile(report), "n01 slots=8\nn02 slots=8\n");
}

TEST(FleetMerge, TheOddNodeIsNamedWithItsFindingAndLeftOutOfTheHealthyHostfile)
{
    json small = node_facts("n03");
    small["limits"]["shm"]["bytes"] = 67108864; // 64 MiB: a container's default
    small["env"]["variables"]["NCCL_P2P_DISABLE"] = "1";
    const auto report = merge({snapshot_of("n01", node_facts("n01")), snapshot_of("n02", node_facts("n02")),
        snapshot_of("n03", small), snapshot_of("n04", node_facts("n04"))});

    ASSERT_EQ(report.groups.size(), 1u);
    EXPECT_EQ(report.groups[0].code, "limits.shm_small");
    EXPECT_EQ(report.groups[0].hosts, std::vector<std::string>{"n03"});
    // Drift: the shm size and the variable set on one node only, each with the majority value.
    std::vector<std::string> facts;
    for (const auto& d : report.drift) {
        facts.push_back(d.fact);
        ASSERT_EQ(d.odd.size(), 1u) << d.fact;
        EXPECT_EQ(d.odd[0].host, "n03");
    }
    EXPECT_EQ(facts, (std::vector<std::string>{"/dev/shm bytes", "NCCL_P2P_DISABLE"}));
    EXPECT_EQ(report.drift[1].majority, "(none)");
    EXPECT_EQ(report.drift[1].odd[0].value, "1");
    // A warning fails only with strict; either way the text names the node.
    EXPECT_EQ(doctor::fleet::exit_status(report), 0);
    const auto strict = merge({snapshot_of("n01", node_facts("n01")), snapshot_of("n03", small)}, true);
    EXPECT_EQ(doctor::fleet::exit_status(strict), 1);
    EXPECT_EQ(doctor::fleet::healthy_hostfile(strict), "n01 slots=8\n");
    const std::string text = doctor::fleet::render_text(report, false);
    EXPECT_NE(text.find("limits.shm_small on n03"), std::string::npos) << text;
    EXPECT_NE(text.find("NCCL_P2P_DISABLE: (none) (most nodes); 1 on n03"), std::string::npos) << text;
}

TEST(FleetMerge, DriftNamesVersionsAndGpusThatDiffer)
{
    json old_driver = node_facts("n02");
    old_driver["nvml"]["driver_version"] = "535.161.08";
    json fewer = node_facts("n03");
    fewer["nvml"]["gpus"].erase(7); // a GPU fallen off the bus
    fewer["nvml"]["gpus"][0]["pcie_gen"] = 3;
    const auto report = merge({snapshot_of("n01", node_facts("n01")), snapshot_of("n02", old_driver),
        snapshot_of("n03", fewer), snapshot_of("n04", node_facts("n04"))});
    std::map<std::string, doctor::fleet::Drift> by_fact;
    for (const auto& d : report.drift) {
        by_fact.emplace(d.fact, d);
    }
    ASSERT_EQ(by_fact.count("driver"), 1u);
    EXPECT_EQ(by_fact["driver"].majority, "550.54.15");
    EXPECT_EQ(by_fact["driver"].odd[0].host, "n02");
    EXPECT_EQ(by_fact["driver"].odd[0].value, "535.161.08");
    ASSERT_EQ(by_fact.count("gpus"), 1u);
    EXPECT_EQ(by_fact["gpus"].majority, "8");
    EXPECT_EQ(by_fact["gpus"].odd[0].value, "7");
    EXPECT_EQ(by_fact["gpu model"].odd[0].value, "7 × NVIDIA H100 80GB HBM3");
    EXPECT_EQ(by_fact["pcie link"].majority, "8 × gen5 x16");
    EXPECT_EQ(by_fact["pcie link"].odd[0].value, "gen3 x16, 6 × gen5 x16");
    EXPECT_EQ(by_fact.count("nccl"), 0u); // the same everywhere
}

TEST(FleetMerge, NodesThatDidNotAnswerFailTheFleetAndAreNamed)
{
    const auto report = merge({snapshot_of("n01", node_facts("n01")),
        {"n02", Answer::timed_out, "no snapshot within 60 s"}, {"n03", Answer::snapshot, "Segmentation fault\n"},
        {"n04", Answer::unreachable, "ssh: connect to host n04 port 22: No route to host"}});
    EXPECT_EQ(doctor::fleet::exit_status(report), 1);
    EXPECT_EQ(report.nodes[1].answer, Answer::timed_out);
    // Garbage instead of a snapshot: that node's answer, not an error of the whole merge.
    EXPECT_EQ(report.nodes[2].answer, Answer::garbage);
    EXPECT_NE(report.nodes[2].why.find("n03"), std::string::npos) << report.nodes[2].why;
    EXPECT_EQ(doctor::fleet::healthy_hostfile(report), "n01 slots=8\n");
    const json j = doctor::fleet::render_json(report);
    EXPECT_EQ(j["summary"]["not_answering"], 3);
    EXPECT_EQ(j["summary"]["fit"], 1);
    EXPECT_EQ(j["nodes"][3]["answer"], "unreachable");
    EXPECT_TRUE(j["nodes"][3]["facts"].is_null());
    const std::string text = doctor::fleet::render_text(report, false);
    EXPECT_NE(text.find("n04: unreachable: ssh: connect"), std::string::npos) << text;
    EXPECT_NE(text.find("4 nodes: 1 fit, 0 failed, 3 did not answer"), std::string::npos) << text;
}

TEST(FleetMerge, AHostGivenTwiceIsAnInputError)
{
    EXPECT_THROW(merge({snapshot_of("n01", node_facts("n01")), snapshot_of("n01", node_facts("n01"))}), base::Error);
}

TEST(FleetMerge, AThousandNodesWithAFewOddOnes)
{
    std::vector<NodeOutput> outputs;
    for (int i = 0; i < 1024; ++i) {
        const std::string host = fmt::format("n{:04}", i);
        json facts = node_facts(host);
        if (i % 100 == 7) {
            facts["nvml"]["driver_version"] = "535.161.08";
        }
        outputs.push_back(snapshot_of(host, facts));
    }
    const auto report = merge(outputs);
    ASSERT_EQ(report.drift.size(), 1u);
    EXPECT_EQ(report.drift[0].majority, "550.54.15");
    EXPECT_EQ(report.drift[0].odd.size(), 11u);
    EXPECT_EQ(report.drift[0].odd[0].host, "n0007");
}

TEST(FleetMerge, ThePairSearchNamesTheSlowNodeAndLinkInEveryReport)
{
    std::vector<NodeOutput> outputs;
    for (const char* host : {"n01", "n02", "n03", "n04", "n05", "n06"}) {
        outputs.push_back(snapshot_of(host, node_facts(host)));
    }
    auto report = merge(outputs);
    report.pair_hosts = {"n01", "n02", "n03", "n04", "n05", "n06"};
    doctor::fleet::PairSearch search;
    search.threshold_gbps = 108;
    // n03-n04 and n05-n06 slow; beside good nodes n04 stays slow, n03, n05 and n06 do not.
    search.rounds = {
        {{{0, 1}, {2, 3}, {4, 5}}, {180, 40, 60}}, {{{2, 0}, {3, 1}}, {181, 35}}, {{{4, 0}, {5, 1}}, {179, 178}}};
    search.bad_nodes = {3};
    search.bad_links = {{4, 5}};
    search.unresolved = {};
    report.pairs = search;
    report.pair_failures = {{"n02", "crashed: the check failed (exit status 3): NCCL said no"}};
    // A warning each: the fleet passes unless --strict, which leaves n04 out of the hostfile.
    EXPECT_EQ(doctor::fleet::exit_status(report), 0);
    EXPECT_EQ(doctor::fleet::healthy_hostfile(report),
        "n01 slots=8\nn02 slots=8\nn03 slots=8\nn04 slots=8\nn05 "
        "slots=8\nn06 slots=8\n");
    const auto v = doctor::fleet::verdict(report);
    ASSERT_EQ(v.groups.back().name, "pairs");
    ASSERT_EQ(v.groups.back().findings.size(), 1U);
    EXPECT_EQ(v.groups.back().findings[0].code, "fleet.slow_link");
    EXPECT_EQ(v.groups.back().findings[0].subject, "n05 \u2194 n06");
    const json j = doctor::fleet::render_json(report);
    EXPECT_EQ(j["pairs"]["slow_nodes"], json::array({"n04"}));
    EXPECT_EQ(j["pairs"]["slow_links"], json::array({json::array({"n05", "n06"})}));
    EXPECT_EQ(j["pairs"]["rounds"][0]["pairs"][1], json::array({"n03", "n04"}));
    EXPECT_EQ(j["pairs"]["rounds"][0]["gbps"][1], 40);
    EXPECT_EQ(j["pairs"]["failed"][0]["why"], "crashed: the check failed (exit status 3): NCCL said no");
    const std::string text = doctor::fleet::render_text(report, false);
    EXPECT_NE(text.find("Node pairs (all-reduce across two nodes; slow below 108.0 GB/s): 3 rounds, 7 pairs measured"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("fleet.slow_node n04"), std::string::npos) << text;
    EXPECT_NE(text.find("fleet.slow_link n05 \u2194 n06"), std::string::npos) << text;
    EXPECT_NE(text.find("its measurement failed on n02: crashed: the check failed (exit status 3): NCCL said no"),
        std::string::npos)
        << text;
    report.strict = true;
    EXPECT_EQ(doctor::fleet::exit_status(report), 1);
    EXPECT_EQ(doctor::fleet::healthy_hostfile(report).find("n04"), std::string::npos);
    // Without the search (snapshots from files), no pairs.
    report.pairs.reset();
    EXPECT_TRUE(doctor::fleet::render_json(report)["pairs"].is_null());
}

TEST(FleetMerge, ASlowNodeAmongMeasuredOnesIsAnOutlier)
{
    // check --deep's facts: each GPU's copy medians and the node's all-reduce.
    auto measured = [](const std::string& host, double busbw, double slowest_h2d) {
        json facts = node_facts(host);
        json gpus = json::array();
        for (double h2d : {24.8, slowest_h2d}) {
            gpus.push_back({{"h2d", {{"median_gbps", h2d}}}, {"d2h", {{"median_gbps", 26.0}}}});
        }
        facts["bandwidth"] = {{"gpus", gpus}, {"peers", json::array()}};
        facts["allreduce"] = {{"busbw_gbps", busbw}, {"ranks", 8}};
        return facts;
    };
    const std::vector<std::pair<std::string, json>> nodes{{"n01", measured("n01", 180.0, 24.1)},
        {"n02", measured("n02", 176.0, 24.5)}, {"n03", measured("n03", 61.0, 24.3)},
        {"n04", measured("n04", 181.0, 9.7)}};
    std::vector<doctor::engine::Facts> read;
    for (const auto& [host, facts] : nodes) {
        read.push_back(test_support::facts_of(facts));
    }
    std::vector<std::pair<std::string, const doctor::engine::Facts*>> view;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        view.emplace_back(nodes[i].first, &read[i]);
    }
    const auto outliers = doctor::fleet::find_outliers(view, 0.6);
    ASSERT_EQ(outliers.size(), 2u);
    EXPECT_EQ(outliers[0].metric, "all-reduce busbw");
    EXPECT_EQ(outliers[0].host, "n03");
    EXPECT_DOUBLE_EQ(outliers[0].median_gbps, 178.0);
    EXPECT_EQ(outliers[1].metric, "host→device copy");
    EXPECT_EQ(outliers[1].host, "n04");
    EXPECT_DOUBLE_EQ(outliers[1].gbps, 9.7); // the node's slowest GPU
    // Just above the fraction is not an outlier; one node alone has nothing to compare with.
    EXPECT_TRUE(doctor::fleet::find_outliers(view, 0.3).empty());
    EXPECT_TRUE(doctor::fleet::find_outliers({view[2]}, 0.6).empty());

    // Through the merge: a warning, so the node stays fit unless --strict.
    std::vector<NodeOutput> outputs;
    for (const auto& [host, facts] : nodes) {
        outputs.push_back(snapshot_of(host, facts));
    }
    EXPECT_EQ(doctor::fleet::exit_status(merge(outputs)), 0);
    const auto strict = merge(outputs, true);
    EXPECT_EQ(doctor::fleet::exit_status(strict), 1);
    EXPECT_EQ(doctor::fleet::healthy_hostfile(strict), "n01 slots=8\nn02 slots=8\n");
    const std::string text = doctor::fleet::render_text(strict, false);
    EXPECT_NE(text.find("all-reduce busbw on n03: 61.0 GB/s, median 178.0 GB/s"), std::string::npos) << text;
    EXPECT_EQ(doctor::fleet::render_json(strict)["outliers"][1]["host"], "n04");
}

namespace {

// The real gpudoctor fleet on snapshot files written here.
class FleetCli : public ::testing::Test {
protected:
    std::string write(const std::string& name, const std::string& text)
    {
        const auto path = m_dir / name;
        std::ofstream(path) << text;
        return path.string();
    }
    std::string snapshot(const std::string& host, const json& facts)
    {
        return write(host + ".json", snapshot_of(host, facts).text);
    }
    test_support::Finished gpudoctor(std::vector<std::string> args)
    {
        args.insert(args.begin(), {GPUDOCTOR_PATH, "fleet"});
        return test_support::run(args, {{"NO_COLOR", "1"}}, std::chrono::seconds(30));
    }
    test_support::TempDir m_dir;
};

} // namespace

TEST_F(FleetCli, NamesTheOddNodeAndWritesTheHealthyHostfile)
{
    json small = node_facts("n02");
    small["limits"]["shm"]["bytes"] = 67108864;
    const std::string hosts = (m_dir / "healthy").string();
    const auto r = gpudoctor({"--only", "limits", "--strict", "--from", snapshot("n01", node_facts("n01")), "--from",
        snapshot("n02", small), "--from", snapshot("n03", node_facts("n03")), "--healthy-hostfile", hosts, "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["summary"]["failed"], 1);
    EXPECT_EQ(j["groups"][0]["code"], "limits.shm_small");
    EXPECT_EQ(j["groups"][0]["hosts"], json({"n02"}));
    EXPECT_EQ(j["drift"][0]["fact"], "/dev/shm bytes");
    EXPECT_EQ(test_support::file_text(hosts), "n01 slots=8\nn03 slots=8\n");
    // Without --strict the warning does not fail the fleet.
    const auto lenient = gpudoctor(
        {"--only", "limits", "--from", (m_dir / "n01.json").string(), "--from", (m_dir / "n02.json").string()});
    EXPECT_EQ(lenient.exit_code, 0) << lenient.err;
    EXPECT_NE(lenient.out.find("WARN  limits.shm_small on n02"), std::string::npos) << lenient.out;
}

TEST_F(FleetCli, AFileThatIsNoSnapshotIsANodeThatDidNotAnswer)
{
    const auto r = gpudoctor({"--only", "limits", "--from", snapshot("n01", node_facts("n01")), "--from",
        write("n02.json", "gpudoctor: cannot run\n")});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.out.find("1 did not answer"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("n02.json: garbage: "), std::string::npos) << r.out;
}

TEST_F(FleetCli, JunitAndPrometheusCarryTheFleetsVerdict)
{
    json odd = node_facts("n03");
    odd["env"]["variables"]["NCCL_P2P_DISABLE"] = "1";
    const std::string junit = (m_dir / "fleet.xml").string();
    const std::string prom = (m_dir / "fleet.prom").string();
    const auto r = gpudoctor({"--only", "limits", "--from", snapshot("n01", node_facts("n01")), "--from",
        write("n02.json", "ssh: connect to host n02 port 22: No route to host\n"), "--from", snapshot("n03", odd),
        "--junit", junit, "--prometheus", prom});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const std::string xml = test_support::file_text(junit);
    EXPECT_NE(xml.find("fleet.no_answer"), std::string::npos) << xml;
    EXPECT_NE(xml.find("No route to host"), std::string::npos) << xml;
    EXPECT_NE(xml.find("fleet.drift"), std::string::npos) << xml;
    EXPECT_NE(xml.find("n01: fleet.node_fit (n01)"), std::string::npos) << xml; // every fit node a test case
    EXPECT_NE(xml.find("n03: fleet.node_fit (n03)"), std::string::npos) << xml; // drift alone is no failure
    EXPECT_EQ(xml.find("n02: fleet.node_fit"), std::string::npos) << xml;
    const std::string metrics = test_support::file_text(prom);
    EXPECT_NE(metrics.find("subcommand=\"fleet\""), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("code=\"fleet.no_answer\""), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("gpudoctor_exit_code{subcommand=\"fleet\"} 1"), std::string::npos) << metrics;
}

TEST_F(FleetCli, ADirectoryIsEveryJsonInItAndAHostnameTakenTwiceIsNamedByItsFile)
{
    std::filesystem::create_directory(m_dir / "snapshots");
    for (const char* host : {"n01", "n02"}) {
        write(std::string("snapshots/") + host + ".json", snapshot_of(host, node_facts(host)).text);
    }
    // Two containers that both call themselves "localhost".
    write("snapshots/c1.json", snapshot_of("localhost", node_facts("localhost")).text);
    write("snapshots/c2.json", snapshot_of("localhost", node_facts("localhost")).text);
    write("snapshots/README", "not a snapshot, not *.json: left alone\n");
    const auto r = gpudoctor({"--only", "limits", "--json", "--from", (m_dir / "snapshots").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 4u);
    EXPECT_EQ(j["nodes"][0]["host"], "localhost"); // c1.json, in name order
    EXPECT_EQ(j["nodes"][1]["host"], (m_dir / "snapshots/c2.json").string());
    EXPECT_EQ(j["nodes"][2]["host"], "n01");
}

TEST_F(FleetCli, BadInputIsExitTwo)
{
    const auto none = gpudoctor({});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("name the nodes: -H LIST, --hostfile FILE, or run inside a Slurm allocation; or judge "
                            "snapshots already collected with --from FILE"),
        std::string::npos)
        << none.err;
    const auto missing = gpudoctor({"--from", (m_dir / "absent.json").string()});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("absent.json"), std::string::npos) << missing.err;
    const std::string n01 = snapshot("n01", node_facts("n01"));
    const auto twice = gpudoctor({"--from", n01, "--from", n01});
    EXPECT_EQ(twice.exit_code, 2);
    EXPECT_NE(twice.err.find("n01.json': given twice"), std::string::npos) << twice.err;
    std::filesystem::create_directory(m_dir / "empty");
    const auto empty = gpudoctor({"--from", (m_dir / "empty").string()});
    EXPECT_EQ(empty.exit_code, 2);
    EXPECT_NE(empty.err.find("no *.json snapshots in this directory"), std::string::npos) << empty.err;
    // A check option that fleet does not take: each node reads its own /sys.
    const auto unknown = gpudoctor({"--sysroot", "/", "--from", n01});
    EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
    EXPECT_NE(unknown.err.find("fleet: unknown option --sysroot"), std::string::npos) << unknown.err;
    const auto both = gpudoctor({"-H", "n01", "--from", n01});
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("--from and -H/--hostfile"), std::string::npos) << both.err;
    const auto port = gpudoctor({"-H", "n01", "--deep", "--pair-port", "70000"});
    EXPECT_EQ(port.exit_code, 2);
    EXPECT_NE(port.err.find("--pair-port 70000: expected a TCP port, 1 to 65535"), std::string::npos) << port.err;
    const auto deadline = gpudoctor({"-H", "n01", "--deadline", "0"});
    EXPECT_EQ(deadline.exit_code, 2);
    EXPECT_NE(deadline.err.find("--deadline 0: expected seconds"), std::string::npos) << deadline.err;
}
