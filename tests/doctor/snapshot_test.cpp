#include "base/error.hpp"
#include "doctor/engine/gpu_scope.hpp"
#include "doctor/engine/snapshot.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <future>
#include <gtest/gtest.h>

using doctor::engine::read_snapshot;
using doctor::engine::SnapshotCeilings;
using test_support::TempDir;

namespace {

/// The nvml facts of a node with `n` healthy GPUs, as `gpudoctor snapshot` writes them.
nlohmann::json nvml_with_gpus(std::size_t n)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) {
        gpus.push_back({{"index", i}, {"bus_id", fmt::format("{:04x}:{:02x}:00.0", i / 256, i % 256)},
            {"name", "NVIDIA H100 80GB HBM3"}, {"uuid", fmt::format("GPU-{}", i)}, {"memory_total", 85899345920ULL},
            {"processes", 0}, {"nvlinks", nlohmann::json::array()}});
    }
    nlohmann::json pairs = nlohmann::json::array();
    if (n == 2) {
        pairs.push_back({{"a", 0}, {"b", 1}, {"p2p_read", 0}, {"p2p_write", 0}, {"ancestor", 20}});
    }
    return {{"nvml_loaded", true}, {"driver_version", "550.54.15"}, {"driver_file", nullptr}, {"gpus", gpus},
        {"pairs", pairs}};
}

/// The facts of every collector read into a struct of its own, as `gpudoctor snapshot` writes them
/// for a node with two GPUs and an HCA.
nlohmann::json node_facts()
{
    using nlohmann::json;
    return {{"host", {{"hostname", "n01"}, {"kernel", "6.8.0"}, {"cpus_online", 32}}}, {"nvml", nvml_with_gpus(2)},
        {"topology",
            {{"source", "live"}, {"hostname", "n01"}, {"allowed_cpus", "0-31"}, {"cores", 32},
                {"numa_nodes",
                    {{{"os_index", 0}, {"cpus", "0-15"}, {"memory", 1ULL << 36}, {"gpu_memory", false}},
                        {{"os_index", 1}, {"cpus", "16-31"}, {"memory", 1ULL << 36}, {"gpu_memory", false}}}},
                {"gpus",
                    {{{"index", 0}, {"bus_id", "0000:00:00.0"}, {"name", "H100"}, {"cpus", "0-15"}, {"numa", {0}},
                         {"hca", "mlx5_0"}, {"pci_path", {"0000:00:01.0", "HostBridge"}}},
                        {{"index", 1}, {"bus_id", "0000:01:00.0"}, {"name", "H100"}, {"cpus", "16-31"}, {"numa", {1}},
                            {"pci_path", {"HostBridge"}}}}},
                {"links", {{{"a", "0000:00:00.0"}, {"b", "0000:01:00.0"}, {"link", "SYS"}}}},
                {"hcas", {{{"name", "mlx5_0"}, {"bus_id", "0000:02:00.0"}, {"cpus", "0-15"}, {"numa", {0}}}}}}},
        {"pci",
            {{"iommu", {{"groups", 2}, {"types", {{"identity", 2}}}, {"cmdline_options", {"iommu=pt"}}}},
                {"vm", {{"virtual", false}, {"sys_vendor", "Supermicro"}}},
                {"gpus",
                    {{{"bus_id", "0000:00:00.0"}, {"upstream_bridges", {"0000:00:01.0"}}, {"iommu_group", "7"},
                        {"iommu_type", "identity"}}}},
                {"bridges",
                    {{{"bus_id", "0000:00:01.0"}, {"readable", true}, {"acs", true}, {"acs_offset", 328},
                         {"acs_control", "0x0000"}, {"source_validation", false}, {"request_redirect", false},
                         {"completion_redirect", false}},
                        {{"bus_id", "0000:03:00.0"}, {"readable", false}, {"reason", "unreadable (needs root)"},
                            {"config_bytes", 64}}}}}},
        {"affinity", {{"cpus", "0-15"}, {"env", {{"LOCAL_RANK", "0"}}}}},
        {"network",
            {{"infiniband",
                 {{{"name", "mlx5_0"},
                     {"ports",
                         {{{"port", 1}, {"state", "4: ACTIVE"}, {"phys_state", "5: LinkUp"},
                             {"rate", "400 Gb/sec (4X NDR)"}, {"link_layer", "InfiniBand"}}}},
                     {"netdevs", {"ib0"}}}}},
                {"peermem",
                    {{"files", {{{"file", "/sys/module/nvidia_peermem/version"}, {"version", "1.0"}}}},
                        {"modules", nullptr}}}}},
        {"env", {{"variables", {{"NCCL_DEBUG", "WARN"}}}, {"interfaces", {"eth0", "ib0", "lo"}}}},
        {"limits",
            {{"shm",
                 {{"exists", true}, {"mounted", true}, {"bytes", 1ULL << 34}, {"source", "mount options"},
                     {"fstype", "tmpfs"}, {"options", "rw,size=16777216k"}}},
                {"memlock", {{"soft", "unlimited"}, {"hard", "unlimited"}}},
                {"nofile", {{"soft", 1048576}, {"hard", 1048576}}}}}};
}

nlohmann::json snapshot_of(const nlohmann::json& nvml)
{
    return {{"gpudoctor_snapshot", doctor::engine::snapshot_format}, {"version", "test"}, {"facts", {{"nvml", nvml}}}};
}

/// The error of reading `doc` as node.json, or "no error".
std::string error_of(const nlohmann::json& doc)
{
    try {
        read_snapshot(doc.dump(), "node.json");
    } catch (const base::Error& e) {
        return e.what();
    }
    return "no error";
}

std::string wrong_field(const std::string& collector, const std::string& why)
{
    return fmt::format("node.json: the {} facts are not as gpudoctor snapshot writes them ({}); write the snapshot "
                       "again with 'gpudoctor snapshot > node.json'",
        collector, why);
}

} // namespace

TEST(Snapshot, WhatSnapshotWritesIsReadBack)
{
    const auto doc = snapshot_of(nvml_with_gpus(2));
    EXPECT_EQ(read_snapshot(doc.dump(), "node.json").write(), doc["facts"]);
    EXPECT_EQ(error_of(snapshot_of(nvml_with_gpus(SnapshotCeilings::gpus))), "no error");
}

TEST(Snapshot, TheFactsOfEveryCollectorAreReadBackAsWritten)
{
    auto doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"] = node_facts();
    const auto facts = read_snapshot(doc.dump(), "node.json");
    EXPECT_EQ(facts.write(), doc["facts"]);
    ASSERT_NE(facts.topology().get(), nullptr);
    EXPECT_EQ(facts.topology().get()->gpus.at(1).numa, std::vector<unsigned>{1});
    EXPECT_FALSE(facts.topology().get()->gpus.at(1).hca) << "no HCA near it";
    EXPECT_FALSE(facts.pci().get()->bridges.at(1).readable);
    EXPECT_FALSE(facts.network().get()->peermem.modules) << "/proc/modules unreadable";
    EXPECT_EQ(facts.env().get()->variable("NCCL_DEBUG"), "WARN");
    EXPECT_EQ(facts.affinity().get()->variable("LOCAL_RANK"), "0");
    EXPECT_EQ(facts.limits().get()->shm.bytes, 1ULL << 34);
}

TEST(Snapshot, TheFactsOfEveryCollectorAreCheckedNamingTheField)
{
    struct Case {
        const char* collector;
        nlohmann::json::json_pointer at;
        nlohmann::json value; ///< null: the key is left out
        std::string why;
    };
    using P = nlohmann::json::json_pointer;
    const std::vector<Case> cases = {
        {"topology", P("/source"), nullptr, "source is missing"},
        {"topology", P("/gpus/1/numa/0"), -1, "gpus[1].numa[0] is -1, expected a count, 0 or more"},
        {"topology", P("/gpus/0/index"), 1024, "gpus[0].index is 1024, expected a GPU index from 0 to 1023"},
        {"topology", P("/hcas/0/bus_id"), "mlx5",
            "hcas[0].bus_id is 'mlx5', expected a PCI address such as "
            "0000:1b:00.0"},
        {"pci", P("/vm/virtual"), "yes", "vm.virtual is 'yes', expected true or false"},
        {"pci", P("/bridges/0/bus_id"), "bridge",
            "bridges[0].bus_id is 'bridge', expected a PCI address such as "
            "0000:1b:00.0"},
        {"pci", P("/iommu/types/identity"), -2, "iommu.types.identity is -2, expected a count, 0 or more"},
        {"network", P("/infiniband/0/ports/0/state"), 4, "infiniband[0].ports[0].state is 4, expected a string"},
        {"network", P("/peermem/modules"), nullptr, "peermem.modules is missing"},
        {"env", P("/variables/NCCL_DEBUG"), 1, "variables.NCCL_DEBUG is 1, expected a string"},
        {"env", P("/interfaces"), "eth0", "interfaces is 'eth0', expected a list"},
        {"affinity", P("/env"), nullptr, "env is missing"},
        {"limits", P("/shm/bytes"), -1, "shm.bytes is -1, expected a count, 0 or more"},
        {"limits", P("/nofile"), nullptr, "nofile is missing"},
    };
    for (const auto& c : cases) {
        auto doc = snapshot_of(nvml_with_gpus(2));
        doc["facts"] = node_facts();
        auto& at = doc["facts"][c.collector];
        if (c.value.is_null()) {
            at[c.at.parent_pointer()].erase(c.at.back());
        } else {
            at[c.at] = c.value;
        }
        EXPECT_EQ(error_of(doc), wrong_field(c.collector, c.why)) << c.collector << c.at.to_string();
    }
}

TEST(Snapshot, MoreGpusThanANodeHasIsBadInputNamingTheFileAndTheCeiling)
{
    EXPECT_EQ(error_of(snapshot_of(nvml_with_gpus(SnapshotCeilings::gpus + 1))),
        "node.json: the nvml facts list 1025 GPUs (gpus), more than the 1024 a snapshot of one node may hold; write "
        "the snapshot on that node with 'gpudoctor snapshot > node.json'");
    auto doc = snapshot_of(nvml_with_gpus(1));
    doc["facts"]["topology"] = {{"source", "live"}, {"gpus", nvml_with_gpus(SnapshotCeilings::gpus + 1)["gpus"]}};
    EXPECT_NE(error_of(doc).find("node.json: the topology facts list 1025 GPUs (gpus), more than the 1024 "),
        std::string::npos)
        << error_of(doc);
    doc = snapshot_of(nvml_with_gpus(1));
    doc["facts"]["nvml"]["gpus"][0]["nvlinks"] = std::vector<std::string>(19, "0000:01:00.0");
    EXPECT_NE(error_of(doc).find("node.json: the nvml facts list 19 NVLinks of one GPU (gpus[0].nvlinks), more "
                                 "than the 18 "),
        std::string::npos)
        << error_of(doc);
}

TEST(Snapshot, DeepNestingAndHugeListsAreRefusedWhileParsing)
{
    auto doc = snapshot_of(nvml_with_gpus(1));
    nlohmann::json deep = 1;
    for (int i = 0; i < 40; ++i) {
        deep = nlohmann::json::array({deep});
    }
    doc["facts"]["mpi"] = {{"ucx", deep}};
    EXPECT_EQ(error_of(doc),
        "node.json: the snapshot nests lists and objects more than 32 deep; write the snapshot again with "
        "'gpudoctor snapshot > node.json'");
    doc = snapshot_of(nvml_with_gpus(1));
    doc["facts"]["mpi"] = {{"ucx", std::vector<int>(SnapshotCeilings::array + 1, 0)}};
    EXPECT_EQ(error_of(doc),
        "node.json: a list of the snapshot holds more than the 1048576 entries it may hold; write the snapshot again "
        "with 'gpudoctor snapshot > node.json'");
}

TEST(Snapshot, ANumberBeyondADoubleIsBadInputNotACrash)
{
    // Found by fuzz_snapshot: nlohmann::json throws out_of_range (406), not parse_error, for it.
    std::string error = "no error";
    try {
        read_snapshot(R"({"gpudoctor_snapshot": 1, "facts": {"nvml": {"memory_total": 1e999}}})", "node.json");
    } catch (const base::Error& e) {
        error = e.what();
    }
    EXPECT_EQ(error,
        "node.json is not a gpudoctor snapshot: [json.exception.out_of_range.406] number overflow parsing '1e999'");
}

TEST(Snapshot, ValuesTheChecksReadAreValidatedNamingTheCollectorAndField)
{
    struct Case {
        const char* field;
        nlohmann::json value;
        std::string why;
    };
    const std::vector<Case> cases = {
        {"index", -5, "gpus[1].index is -5, expected a GPU index from 0 to 1023"},
        {"index", 1024, "gpus[1].index is 1024, expected a GPU index from 0 to 1023"},
        {"index", "1", "gpus[1].index is '1', expected a GPU index from 0 to 1023"},
        {"bus_id", "zzzz", "gpus[1].bus_id is 'zzzz', expected a PCI address such as 0000:1b:00.0"},
        {"memory_total", -1, "gpus[1].memory_total is -1, expected a count, 0 or more"},
        {"processes", 1.5, "gpus[1].processes is 1.5, expected a count, 0 or more"},
        {"name", std::string(5000, 'x'), "gpus[1].name is 5000 bytes long, more than 4096"},
        {"uuid", 7, "gpus[1].uuid is 7, expected a string"},
    };
    for (const auto& c : cases) {
        auto doc = snapshot_of(nvml_with_gpus(2));
        doc["facts"]["nvml"]["gpus"][1][c.field] = c.value;
        EXPECT_EQ(error_of(doc), wrong_field("nvml", c.why)) << c.field;
    }
    auto doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"]["nvml"]["pairs"][0]["b"] = -1;
    EXPECT_EQ(error_of(doc), wrong_field("nvml", "pairs[0].b is -1, expected a GPU index from 0 to 1023"));
    doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"]["nvml"]["driver_version"] = std::string(4097, '5');
    EXPECT_EQ(error_of(doc), wrong_field("nvml", "driver_version is 4097 bytes long, more than 4096"));
    doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"]["topology"] = {{"source", "live"}, {"gpus", nlohmann::json::array()},
        {"links", {{{"a", "0000:00:00.0"}, {"b", "gpu1"}, {"link", "SYS"}}}}};
    EXPECT_EQ(
        error_of(doc), wrong_field("topology", "links[0].b is 'gpu1', expected a PCI address such as 0000:1b:00.0"));
    doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"]["topology"] = {{"source", "live"}, {"gpus", nlohmann::json::array()},
        {"numa_nodes", {{{"os_index", 0}, {"cpus", "0-3"}, {"memory", -4096}, {"gpu_memory", false}}}}};
    EXPECT_EQ(error_of(doc), wrong_field("topology", "numa_nodes[0].memory is -4096, expected a count, 0 or more"));
}

TEST(Snapshot, CheckFromABadSnapshotIsExitTwoNamingTheFileAndField)
{
    TempDir dir;
    auto doc = snapshot_of(nvml_with_gpus(2));
    doc["facts"]["nvml"]["gpus"][0]["index"] = -5;
    const auto path = dir.path() / "node.json";
    std::ofstream(path) << doc.dump();
    auto r = test_support::run({GPUDOCTOR_PATH, "check", "--only", "gpus", "--from", path.string()});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "") << "no report of 4294967291";
    EXPECT_EQ(r.err,
        fmt::format("gpudoctor: {}: the nvml facts are not as gpudoctor snapshot writes them (gpus[0].index is -5, "
                    "expected a GPU index from 0 to 1023); write the snapshot again with 'gpudoctor snapshot > "
                    "node.json'\n",
            path.string()));
}

TEST(Snapshot, AFactARuleReadsThatIsMissingIsExitTwoNotAReadPastTheFacts)
{
    // Found by the snapshot fuzz target: nvml facts without "driver_file" (its key misspelt) made
    // the driver rule read past the end of the object.
    TempDir dir;
    const nlohmann::json doc = {{"gpudoctor_snapshot", doctor::engine::snapshot_format},
        {"facts",
            {{"host", {{"hostname", "cpu01"}}},
                {"nvml",
                    {{"dri~er_file", nullptr}, {"nvml_loaded", false},
                        {"nvml_error", "cannot load libnvidia-ml.so.1"}}}}}};
    const auto path = dir.path() / "node.json";
    std::ofstream(path) << doc.dump();
    auto r = test_support::run({GPUDOCTOR_PATH, "check", "--only", "driver", "--from", path.string()});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
        fmt::format("gpudoctor: {}: the nvml facts are not as gpudoctor snapshot writes them (driver_file is "
                    "missing); write the snapshot again with 'gpudoctor snapshot > node.json'\n",
            path.string()));
}

TEST(Snapshot, AFullSizeSnapshotIsReadInLinearTime)
{
    // The most a snapshot may hold: 1,024 GPUs and every one of their 523,776 pairs. Bounding the
    // lists while nlohmann's parser built them (its callback parser) scanned the list of pairs at
    // the end of each pair: 350 s. Read in one linear pass, it takes about a second (45 s
    // under ASan beside another job); the deadline is between the two.
    std::string pairs;
    for (std::size_t a = 0; a < SnapshotCeilings::gpus; ++a) {
        for (std::size_t b = a + 1; b < SnapshotCeilings::gpus; ++b) {
            pairs += fmt::format(
                R"({}{{"a":{},"b":{},"p2p_read":0,"p2p_write":0,"ancestor":20}})", pairs.empty() ? "" : ",", a, b);
        }
    }
    std::string text = snapshot_of(nvml_with_gpus(SnapshotCeilings::gpus)).dump();
    const std::string empty = R"("pairs":[])";
    ASSERT_NE(text.find(empty), std::string::npos);
    text.replace(text.find(empty), empty.size(), R"("pairs":[)" + pairs + "]");
    auto reading = std::async(std::launch::async, [&text] { return read_snapshot(text, "node.json"); });
    ASSERT_EQ(reading.wait_for(std::chrono::seconds(240)), std::future_status::ready) << "not read within 4 minutes";
    EXPECT_EQ(reading.get().nvml().get()->pairs->size(), SnapshotCeilings::pairs);
}

TEST(Snapshot, AGpuWithNullFactsIsScopedNotAnInternalError)
{
    // NVML may give no UUID or name; the reader lets null through, and choosing GPUs by --gpus
    // read such a GPU with json::value, which throws on null: "internal error", exit 3. Found by
    // fuzz_snapshot.
    auto nvml = nvml_with_gpus(2);
    nvml["gpus"][0]["uuid"] = nullptr;
    nvml["gpus"][0]["name"] = nullptr;
    const auto facts = read_snapshot(snapshot_of(nvml).dump(), "node.json");
    EXPECT_TRUE(doctor::engine::gpu_scope(facts, "", nullptr).all());
    EXPECT_EQ(doctor::engine::gpu_scope(facts, "GPU-1", nullptr).gpus, std::vector<unsigned>{1});
    EXPECT_EQ(doctor::engine::gpu_scope(facts, "0", nullptr).gpus, std::vector<unsigned>{0});
}
