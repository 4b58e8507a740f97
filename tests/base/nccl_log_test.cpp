// The NCCL_DEBUG=INFO log analyzer against a corpus written here: every format generation from
// NCCL 2.3 to 2.30, the wrappers launchers and log collectors put around the lines, one case per
// finding code (with near-misses that must stay quiet), and the input layer (files, gzip, very
// long lines). Each case asserts its important values and keeps its JSON report as a golden file
// under tests/base/golden/nccl/ (UPDATE_GOLDEN=1 rewrites them).

#include "base/error.hpp"
#include "base/nccl/log.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <thread>
#include <vector>
#include <zlib.h>

namespace nccl = base::nccl;
using nccl::Analysis;
using nccl::Transport;
using test_support::TempDir;

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

Analysis analyze(std::string_view text, const std::string& name)
{
    nccl::Analyzer analyzer;
    analyzer.read_text(text, name);
    return analyzer.analysis();
}

std::uint64_t count(const Analysis& a, Transport t)
{
    return a.counts[static_cast<std::size_t>(t)];
}

std::uint64_t count(const nccl::HostPair& pair, Transport t)
{
    return pair.counts[static_cast<std::size_t>(t)];
}

/// The finding codes in report order.
std::vector<std::string> codes(const Analysis& a)
{
    std::vector<std::string> out;
    for (const auto& f : a.findings) {
        out.push_back(f.code);
    }
    return out;
}

const nccl::Finding* finding(const Analysis& a, std::string_view code)
{
    for (const auto& f : a.findings) {
        if (f.code == code) {
            return &f;
        }
    }
    return nullptr;
}

bool has(const Analysis& a, std::string_view code)
{
    return finding(a, code) != nullptr;
}

const nccl::HostPair* link(const nccl::Communicator& c, std::string_view from, std::string_view to)
{
    for (const auto& l : c.links) {
        if (l.from == from && l.to == to) {
            return &l;
        }
    }
    return nullptr;
}

const nccl::Communicator* comm(const Analysis& a, std::string_view id)
{
    for (const auto& c : a.communicators) {
        if (c.id == id) {
            return &c;
        }
    }
    return nullptr;
}

std::vector<std::string> rank_hosts(const nccl::Communicator& c)
{
    std::vector<std::string> out;
    for (const auto& r : c.ranks) {
        out.push_back(r.host);
    }
    return out;
}

std::vector<int> rank_numbers(const nccl::Communicator& c)
{
    std::vector<int> out;
    for (const auto& r : c.ranks) {
        out.push_back(r.rank);
    }
    return out;
}

using Strings = std::vector<std::string>;

/// The JSON report without what depends on where the text sits (input names, line numbers), so
/// that a wrapped or compressed log can be compared with the plain one.
nlohmann::json normalized(nlohmann::json j)
{
    std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& node) {
        if (node.is_object()) {
            node.erase("where");
            for (auto& [key, value] : node.items()) {
                strip(value);
            }
        } else if (node.is_array()) {
            for (auto& value : node) {
                strip(value);
            }
        }
    };
    j.erase("inputs");
    j["summary"].erase("lines");
    for (auto& job : j["jobs"]) {
        job.erase("inputs");
        job["summary"].erase("records");
    }
    strip(j);
    // Finding messages name the first line ("(case:12)"): keep only the text before it.
    for (auto& f : j["findings"]) {
        std::string message = f["message"];
        f["message"] = message.substr(0, message.find(" ("));
    }
    return j;
}

/// Compares the JSON report with tests/base/golden/nccl/<name>.txt.
void expect_json_golden(const std::string& name, const Analysis& a)
{
    test_support::expect_golden(
        std::filesystem::path(GPUKIT_SOURCE_DIR) / "tests/base/golden/nccl", name, nccl::render_json(a).dump(2) + "\n");
}

std::string read_binary(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_binary(const std::filesystem::path& path, std::string_view data)
{
    std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// Writes `text` as one gzip member with zlib's gzip file writer.
void write_gzip(const std::filesystem::path& path, std::string_view text)
{
    gzFile gz = gzopen(path.c_str(), "wb9");
    ASSERT_NE(gz, nullptr) << path;
    ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
}

/// Every line of `text` passed through `wrap`, which is told the line's number (0-based).
std::string wrap_lines(std::string_view text, const std::function<std::string(std::string_view, int)>& wrap)
{
    std::string out;
    int n = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) {
            nl = text.size();
        }
        out += wrap(text.substr(pos, nl - pos), n++) + "\n";
        pos = nl + 1;
    }
    return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The corpus: format generations

// NCCL 2.3.7, 2 nodes x 2 GPUs, one process per GPU. The banner is a bare stdout line; init lines
// carry no stage; NET lines name bare ranks and only the receiving side logs them; the prefix and
// the message were written by separate calls, so one message landed on the line after its prefix.
constexpr std::string_view v2_3_log = R"(NCCL version 2.3.7+cuda10.0
nodeA:1001:1001 [0] NCCL INFO NET : Using interface ib0:10.0.0.1<0>
nodeA:1001:1001 [0] NCCL INFO NET/IB : Using interface ib0 for sideband communication
nodeA:1001:1001 [0] NCCL INFO NET/IB: [0] mlx5_0:1/IB
nodeA:1001:1001 [0] NCCL INFO Using internal Network IB
nodeA:1001:1001 [0] NCCL INFO comm 0x7f3a48001e80 rank 0 nranks 4
nodeA:1002:1002 [1] NCCL INFO comm 0x7f9c5c001e80 rank 1 nranks 4
nodeB:2001:2001 [0] NCCL INFO comm 0x7f12b0001e80 rank 2 nranks 4
nodeB:2002:2002 [1] NCCL INFO comm 0x7fd6e4001e80 rank 3 nranks 4
nodeA:1001:1001 [0] NCCL INFO CUDA Dev 0, IB Ports : mlx5_0/1(SOC)
nodeA:1001:1001 [0] NCCL INFO Using 256 threads
nodeA:1001:1001 [0] NCCL INFO Min Comp Cap 7
nodeA:1001:1001 [0] NCCL INFO NCCL_SINGLE_RING_THRESHOLD=262144
nodeA:1001:1001 [0] NCCL INFO Ring 00 :    0   1   2   3
nodeA:1001:1001 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC
nodeA:1001:1001 [0] NCCL INFO Ring 00 : 3 -> 0 via NET/IB/0/GDRDMA
nodeB:2001:2001 [0] NCCL INFO Ring 00 : 2[0] -> 3[1] via P2P/IPC
nodeB:2001:2001 [0] NCCL INFO 
Ring 00 : 1 -> 2 via NET/IB/0/GDRDMA
nodeA:1001:1001 [0] NCCL INFO Launch mode Parallel
)";

TEST(NcclLogFormats, V2_3RingLinesBareRanksAndSplitRecord)
{
    const Analysis a = analyze(v2_3_log, "v2_3_ring");
    EXPECT_EQ(a.nccl_versions, Strings{"2.3.7+cuda10.0"});
    EXPECT_EQ(a.lines, 20U);
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.processes, 4U);
    EXPECT_EQ(a.processes_init_complete, 4U) << "2.3 prints no stage: the init line ends the init";
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 2U) << "the NET line whose message followed its prefix counts";
    EXPECT_EQ(a.connections, 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.nranks, 4);
    EXPECT_EQ(c.versions, Strings{"2.3.7+cuda10.0"});
    EXPECT_EQ(rank_hosts(c), (Strings{"nodeA", "nodeA", "nodeB", "nodeB"}));
    EXPECT_EQ(c.ranks[3].pid, 2002);
    EXPECT_EQ(c.ranks[3].where.str(), "v2_3_ring:9");
    EXPECT_TRUE(c.ranks[3].init_complete);
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(count(*link(c, "nodeA", "nodeB"), Transport::net_ib_gdr), 1U) << "1 -> 2, logged by rank 2";
    ASSERT_NE(link(c, "nodeB", "nodeA"), nullptr);
    EXPECT_EQ(count(*link(c, "nodeB", "nodeA"), Transport::net_ib_gdr), 1U) << "3 -> 0, logged by rank 0";
    ASSERT_NE(link(c, "nodeA", "nodeA"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeA")->paths.at("P2P/IPC"), 1U);
    ASSERT_NE(link(c, "nodeB", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeB", "nodeB")->paths.at("P2P/IPC"), 1U);
    EXPECT_EQ(codes(a), Strings{}) << "the ring 0 1 2 3 leaves each node once";
    expect_json_golden("v2_3_ring", a);
}

// NCCL 2.3 prefixes written by two processes at once: rank 1's prefix, then rank 0's whole record,
// then rank 1's message alone on the next line.
TEST(NcclLogFormats, V2_3PrefixInterleavedWithAnotherRecord)
{
    constexpr std::string_view log = R"(NCCL version 2.3.7+cuda10.0
node1:3001:3001 [0] NCCL INFO comm 0x7f0000001e80 rank 0 nranks 2
node1:3002:3002 [1] NCCL INFO comm 0x7f0000002e80 rank 1 nranks 2
node1:3002:3002 [1] NCCL INFO node1:3001:3001 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC
Ring 00 : 1[1] -> 0[0] via P2P/IPC
)";
    const Analysis a = analyze(log, "v2_3_interleaved");
    EXPECT_EQ(count(a, Transport::p2p), 2U) << "rank 1's message belongs to its prefix on the line before";
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto* l = link(a.communicators[0], "node1", "node1");
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->paths.at("P2P/IPC"), 2U);
    EXPECT_EQ(a.records, 4U);
    expect_json_golden("v2_3_interleaved", a);

    TempDir dir;
    write_binary(dir / "interleaved.log", log);
    nccl::Analyzer from_file;
    from_file.read_file((dir / "interleaved.log").string());
    EXPECT_EQ(count(from_file.analysis(), Transport::p2p), 2U) << "the same when read from a file";
}

// NCCL 2.4.8, 2 nodes x 2 GPUs: P2P names NVML indexes, NET lines bare ranks with [send] and
// [receive]; init ends with "cudaDev %d nvmlDev %d - Init COMPLETE".
constexpr std::string_view v2_4_log = R"(nodeA:3001:3001 [0] NCCL INFO Bootstrap : Using [0]eth0:10.1.0.1<0>
nodeA:3001:3001 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).
nodeA:3001:3001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.1<0>
NCCL version 2.4.8+cuda10.1
nodeA:3002:3002 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.1<0>
nodeB:4001:4001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.2<0>
nodeB:4002:4002 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.2<0>
nodeA:3001:3040 [0] NCCL INFO Setting affinity for GPU 0 to 0fff,ff000fff
nodeA:3001:3040 [0] NCCL INFO CUDA Dev 0[0], IB NIC distance :  PHB
nodeA:3001:3040 [0] NCCL INFO Channel 00 :    0   1   2   3
nodeA:3001:3040 [0] NCCL INFO Ring 00 : 3 -> 0 [receive] via NET/IB/0/GDRDMA
nodeA:3001:3040 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC
nodeA:3002:3041 [1] NCCL INFO Ring 00 : 1 -> 2 [send] via NET/IB/0/GDRDMA
nodeB:4001:4042 [0] NCCL INFO Ring 00 : 1 -> 2 [receive] via NET/IB/0/GDRDMA
nodeB:4001:4042 [0] NCCL INFO Ring 00 : 2[0] -> 3[1] via P2P/IPC
nodeB:4002:4043 [1] NCCL INFO Ring 00 : 3 -> 0 [send] via NET/IB/0/GDRDMA
nodeA:3001:3040 [0] NCCL INFO Using 256 threads, Min Comp Cap 7, Trees disabled
nodeA:3001:3040 [0] NCCL INFO comm 0x7f0a3c001b30 rank 0 nranks 4 cudaDev 0 nvmlDev 0 - Init COMPLETE
nodeA:3002:3041 [1] NCCL INFO comm 0x7f5e10001b30 rank 1 nranks 4 cudaDev 1 nvmlDev 1 - Init COMPLETE
nodeB:4001:4042 [0] NCCL INFO comm 0x7f77d8001b30 rank 2 nranks 4 cudaDev 0 nvmlDev 0 - Init COMPLETE
nodeB:4002:4043 [1] NCCL INFO comm 0x7fa1c4001b30 rank 3 nranks 4 cudaDev 1 nvmlDev 1 - Init COMPLETE
nodeA:3001:3001 [0] NCCL INFO Launch mode Parallel
)";

TEST(NcclLogFormats, V2_4RingSendReceiveAndInitComplete)
{
    const Analysis a = analyze(v2_4_log, "v2_4_ring");
    EXPECT_EQ(a.nccl_versions, Strings{"2.4.8+cuda10.1"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(a.processes_init_complete, 4U);
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 4U) << "both the send and the receive side log NET lines";
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.id, "#1");
    EXPECT_EQ(c.connections, 6U);
    EXPECT_EQ(rank_hosts(c), (Strings{"nodeA", "nodeA", "nodeB", "nodeB"}));
    EXPECT_EQ(c.ranks[1].cuda_dev, 1);
    EXPECT_EQ(c.ranks[1].nvml_dev, 1);
    EXPECT_EQ(c.ranks[1].bus_id, "");
    EXPECT_EQ(c.ranks[2].where.str(), "v2_4_ring:20");
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/0/GDRDMA"), 2U);
    ASSERT_NE(link(c, "nodeB", "nodeA"), nullptr);
    EXPECT_EQ(link(c, "nodeB", "nodeA")->paths.at("NET/IB/0/GDRDMA"), 2U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("v2_4_ring", a);
}

// NCCL 2.6.4, one node with 4 GPUs over two PCIe root complexes: ring lines name PCI bus ids in
// hex, and between the halves NCCL falls back to "direct shared memory". No NIC: "Using network
// Socket" on a single node is harmless.
constexpr std::string_view v2_6_log = R"(NCCL version 2.6.4+cuda10.2
gpu01:5101:5101 [0] NCCL INFO Bootstrap : Using [0]eth0:192.168.1.11<0>
gpu01:5101:5101 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
gpu01:5101:5101 [0] NCCL INFO NET/IB : No device found.
gpu01:5101:5101 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.1.11<0>
gpu01:5101:5101 [0] NCCL INFO Using network Socket
gpu01:5102:5151 [1] NCCL INFO Could not enable P2P between dev 1(=3d000) and dev 2(=89000)
gpu01:5104:5153 [3] NCCL INFO Could not enable P2P between dev 3(=b1000) and dev 0(=1b000)
gpu01:5101:5150 [0] NCCL INFO Channel 00/02 :    0   1   2   3
gpu01:5101:5150 [0] NCCL INFO Channel 01/02 :    0   1   2   3
gpu01:5101:5150 [0] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64
gpu01:5101:5150 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1|-1->0->1/-1/-1 [1] 1/-1/-1->0->-1|-1->0->1/-1/-1
gpu01:5101:5150 [0] NCCL INFO Ring 00 : 0[1b000] -> 1[3d000] via P2P/IPC
gpu01:5102:5151 [1] NCCL INFO Ring 00 : 1[3d000] -> 2[89000] via direct shared memory
gpu01:5103:5152 [2] NCCL INFO Ring 00 : 2[89000] -> 3[b1000] via P2P/IPC
gpu01:5104:5153 [3] NCCL INFO Ring 00 : 3[b1000] -> 0[1b000] via direct shared memory
gpu01:5101:5150 [0] NCCL INFO Ring 01 : 0[1b000] -> 1[3d000] via P2P/IPC
gpu01:5102:5151 [1] NCCL INFO Ring 01 : 1[3d000] -> 2[89000] via direct shared memory
gpu01:5103:5152 [2] NCCL INFO Ring 01 : 2[89000] -> 3[b1000] via P2P/IPC
gpu01:5104:5153 [3] NCCL INFO Ring 01 : 3[b1000] -> 0[1b000] via direct shared memory
gpu01:5101:5150 [0] NCCL INFO comm 0x55d1c8a3e0f0 rank 0 nranks 4 cudaDev 0 busId 1b000 - Init COMPLETE
gpu01:5102:5151 [1] NCCL INFO comm 0x5612fe0a1b20 rank 1 nranks 4 cudaDev 1 busId 3d000 - Init COMPLETE
gpu01:5103:5152 [2] NCCL INFO comm 0x55b7a0c4d330 rank 2 nranks 4 cudaDev 2 busId 89000 - Init COMPLETE
gpu01:5104:5153 [3] NCCL INFO comm 0x563e2d9f7a40 rank 3 nranks 4 cudaDev 3 busId b1000 - Init COMPLETE
gpu01:5101:5101 [0] NCCL INFO Launch mode Parallel
)";

TEST(NcclLogFormats, V2_6RingBusIdsAndDirectSharedMemory)
{
    const Analysis a = analyze(v2_6_log, "v2_6_ring_busid_shm");
    EXPECT_EQ(a.nccl_versions, Strings{"2.6.4+cuda10.2"});
    EXPECT_EQ(a.hosts, 1U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(count(a, Transport::p2p), 4U);
    EXPECT_EQ(count(a, Transport::shm), 4U);
    EXPECT_EQ(count(a, Transport::net_socket), 0U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.hosts, Strings{"gpu01"});
    EXPECT_EQ(c.ranks[3].bus_id, "b1000");
    EXPECT_EQ(c.ranks[3].cuda_dev, 3);
    EXPECT_EQ(c.ranks[3].nvml_dev, -1);
    ASSERT_NE(link(c, "gpu01", "gpu01"), nullptr);
    EXPECT_EQ(link(c, "gpu01", "gpu01")->paths.at("direct shared memory"), 4U);
    EXPECT_EQ(codes(a), Strings{"nccl.shm_not_p2p"}) << "single node: Using network Socket is harmless";
    const auto* shm = finding(a, "nccl.shm_not_p2p");
    ASSERT_NE(shm, nullptr);
    EXPECT_EQ(shm->count, 4U);
    EXPECT_EQ(shm->where.str(), "v2_6_ring_busid_shm:14");
    EXPECT_NE(shm->message.find("NCCL could not enable P2P (v2_6_ring_busid_shm:7)"), std::string::npos)
        << shm->message;
    expect_json_golden("v2_6_ring_busid_shm", a);
}

// NCCL 2.10.3, 2 nodes x 2 A100 over RoCE: "Channel 00 :" lines with hex bus ids, "P2P/IPC/read",
// and after init the shared p2p NET connections ("/Shared", no connIndex before 2.12).
constexpr std::string_view v2_10_log = R"(nodeA:6001:6001 [0] NCCL INFO Bootstrap : Using eth0:10.2.0.1<0>
nodeA:6001:6001 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
nodeA:6001:6001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.2.0.1<0>
nodeA:6001:6001 [0] NCCL INFO Using network IB
NCCL version 2.10.3+cuda11.4
nodeA:6002:6002 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.2.0.1<0>
nodeB:7001:7001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.2.0.2<0>
nodeB:7002:7002 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.2.0.2<0>
nodeA:6001:6050 [0] NCCL INFO Channel 00/02 :    0   1   2   3
nodeA:6001:6050 [0] NCCL INFO Channel 01/02 :    0   1   2   3
nodeA:6001:6050 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
nodeA:6001:6050 [0] NCCL INFO Setting affinity for GPU 0 to ffff,0000ffff
nodeA:6001:6050 [0] NCCL INFO Channel 00 : 3[1c000] -> 0[1b000] [receive] via NET/IB/0/GDRDMA
nodeA:6001:6050 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via P2P/IPC/read
nodeA:6002:6051 [1] NCCL INFO Channel 00 : 1[1c000] -> 2[1b000] [send] via NET/IB/0/GDRDMA
nodeB:7001:7052 [0] NCCL INFO Channel 00 : 1[1c000] -> 2[1b000] [receive] via NET/IB/0/GDRDMA
nodeB:7001:7052 [0] NCCL INFO Channel 00 : 2[1b000] -> 3[1c000] via P2P/IPC/read
nodeB:7002:7053 [1] NCCL INFO Channel 00 : 3[1c000] -> 0[1b000] [send] via NET/IB/0/GDRDMA
nodeA:6001:6050 [0] NCCL INFO Connected all rings
nodeA:6001:6050 [0] NCCL INFO Connected all trees
nodeA:6001:6050 [0] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/512
nodeA:6001:6050 [0] NCCL INFO 2 coll channels, 2 p2p channels, 2 p2p channels per peer
nodeA:6001:6050 [0] NCCL INFO comm 0x7f4b6c002f60 rank 0 nranks 4 cudaDev 0 busId 1b000 - Init COMPLETE
nodeA:6002:6051 [1] NCCL INFO comm 0x7f1d24002f60 rank 1 nranks 4 cudaDev 1 busId 1c000 - Init COMPLETE
nodeB:7001:7052 [0] NCCL INFO comm 0x7f8e58002f60 rank 2 nranks 4 cudaDev 0 busId 1b000 - Init COMPLETE
nodeB:7002:7053 [1] NCCL INFO comm 0x7fc0a0002f60 rank 3 nranks 4 cudaDev 1 busId 1c000 - Init COMPLETE
nodeA:6001:6001 [0] NCCL INFO Launch mode Parallel
nodeA:6002:6002 [1] NCCL INFO Channel 02 : 1[1c000] -> 2[1b000] [send] via NET/IB/0/GDRDMA/Shared
nodeB:7001:7001 [0] NCCL INFO Channel 02 : 1[1c000] -> 2[1b000] [receive] via NET/IB/0/GDRDMA/Shared
)";

TEST(NcclLogFormats, V2_10ChannelBusIdsReadAndShared)
{
    const Analysis a = analyze(v2_10_log, "v2_10_channel_busid");
    EXPECT_EQ(a.nccl_versions, Strings{"2.10.3+cuda11.4"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 6U);
    ASSERT_EQ(a.communicators.size(), 1U) << "the shared connections after init belong to the communicator";
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.connections, 8U);
    EXPECT_EQ(c.ranks[1].bus_id, "1c000");
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/0/GDRDMA/Shared"), 2U);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/0/GDRDMA"), 2U);
    ASSERT_NE(link(c, "nodeB", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeB", "nodeB")->paths.at("P2P/IPC/read"), 1U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("v2_10_channel_busid", a);
}

// NCCL 2.17.1, 2 nodes x 2 GPUs with NCCL_P2P_DISABLE=1 (logged as P2P level LOC from 2.7 to
// 2.22): "Channel 00/0" with connIndex, commId on the init line, "via SHM/direct/direct", and a
// lazily made connIndex 1 connection from another thread after init.
constexpr std::string_view v2_17_log = R"(nodeA:8001:8001 [0] NCCL INFO Bootstrap : Using eth0:10.3.0.1<0>
nodeA:8001:8001 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory
nodeA:8001:8001 [0] NCCL INFO NET/Plugin : No plugin found, using internal implementation
nodeA:8001:8001 [0] NCCL INFO cudaDriverVersion 12020
NCCL version 2.17.1+cuda12.1
nodeA:8001:8001 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
nodeA:8001:8001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.3.0.1<0>
nodeA:8001:8001 [0] NCCL INFO Using network IB
nodeA:8002:8002 [1] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
nodeB:9001:9001 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
nodeB:9002:9002 [1] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
nodeA:8001:8060 [0] NCCL INFO NVLS multicast support is not available on dev 0
nodeA:8001:8060 [0] NCCL INFO Channel 00/02 :    0   1   2   3
nodeA:8001:8060 [0] NCCL INFO Channel 01/02 :    0   1   2   3
nodeA:8001:8060 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
nodeA:8001:8060 [0] NCCL INFO P2P Chunksize set to 131072
nodeA:8001:8060 [0] NCCL INFO Channel 00/0 : 3[1c000] -> 0[1b000] [receive] via NET/IB/0/GDRDMA
nodeA:8001:8060 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via SHM/direct/direct
nodeA:8002:8061 [1] NCCL INFO Channel 00/0 : 1[1c000] -> 2[1b000] [send] via NET/IB/0/GDRDMA
nodeB:9001:9062 [0] NCCL INFO Channel 00/0 : 1[1c000] -> 2[1b000] [receive] via NET/IB/0/GDRDMA
nodeB:9001:9062 [0] NCCL INFO Channel 00 : 2[1b000] -> 3[1c000] via SHM/direct/direct
nodeB:9002:9063 [1] NCCL INFO Channel 00/0 : 3[1c000] -> 0[1b000] [send] via NET/IB/0/GDRDMA
nodeA:8001:8060 [0] NCCL INFO Connected all rings
nodeA:8001:8060 [0] NCCL INFO Connected all trees
nodeA:8001:8060 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
nodeA:8001:8060 [0] NCCL INFO comm 0x55e0c1a4b2c0 rank 0 nranks 4 cudaDev 0 busId 1b000 commId 0x9f1e2d3c4b5a6978 - Init COMPLETE
nodeA:8002:8061 [1] NCCL INFO comm 0x55d2f08c17a0 rank 1 nranks 4 cudaDev 1 busId 1c000 commId 0x9f1e2d3c4b5a6978 - Init COMPLETE
nodeB:9001:9062 [0] NCCL INFO comm 0x5627a1e3c9b0 rank 2 nranks 4 cudaDev 0 busId 1b000 commId 0x9f1e2d3c4b5a6978 - Init COMPLETE
nodeB:9002:9063 [1] NCCL INFO comm 0x55f9b34e0d10 rank 3 nranks 4 cudaDev 1 busId 1c000 commId 0x9f1e2d3c4b5a6978 - Init COMPLETE
nodeA:8002:8095 [1] NCCL INFO Channel 00/1 : 1[1c000] -> 2[1b000] [send] via NET/IB/1/GDRDMA/Shared
nodeB:9001:9096 [0] NCCL INFO Channel 00/1 : 1[1c000] -> 2[1b000] [receive] via NET/IB/1/GDRDMA/Shared
)";

TEST(NcclLogFormats, V2_17ConnIndexCommIdAndShm)
{
    const Analysis a = analyze(v2_17_log, "v2_17_connindex_shm");
    EXPECT_EQ(a.nccl_versions, Strings{"2.17.1+cuda12.1"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(count(a, Transport::shm), 2U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 6U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.id, "0x9f1e2d3c4b5a6978");
    EXPECT_EQ(c.connections, 8U) << "connIndex 1 lines from other threads join the communicator";
    EXPECT_EQ(c.nvls_channels, 0U);
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/1/GDRDMA/Shared"), 2U);
    ASSERT_NE(link(c, "nodeA", "nodeA"), nullptr);
    EXPECT_EQ(count(*link(c, "nodeA", "nodeA"), Transport::shm), 1U);
    EXPECT_EQ(codes(a), (Strings{"nccl.shm_not_p2p", "nccl.env_disables_transport"}));
    const auto* shm = finding(a, "nccl.shm_not_p2p");
    ASSERT_NE(shm, nullptr);
    EXPECT_EQ(shm->count, 2U);
    EXPECT_NE(shm->message.find("NCCL_P2P_LEVEL=LOC is set (v2_17_connindex_shm:6)"), std::string::npos)
        << shm->message;
    const auto* env = finding(a, "nccl.env_disables_transport");
    ASSERT_NE(env, nullptr);
    EXPECT_EQ(env->count, 4U);
    EXPECT_EQ(env->where.str(), "v2_17_connindex_shm:6");
    expect_json_golden("v2_17_connindex_shm", a);
}

// NCCL 2.19.3, 2 nodes x 2 GPUs: NVML indexes in "rank[dev]", Init START and COMPLETE with nvmlDev,
// "P2P/CUMEM/read", and PXN ("NET/IB/0(0)/GDRDMA": rank 1 sends through rank 0's NIC).
constexpr std::string_view v2_19_log = R"(NCCL version 2.19.3+cuda12.3
nodeA:11001:11001 [0] NCCL INFO Bootstrap : Using eth0:10.4.0.1<0>
nodeA:11001:11001 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation
nodeA:11001:11001 [0] NCCL INFO cudaDriverVersion 12030
nodeA:11001:11080 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.0.1<0>
nodeA:11001:11080 [0] NCCL INFO Using network IB
nodeA:11001:11080 [0] NCCL INFO comm 0x5581e2f0c9a0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x4a5b6c7d8e9f0a1b - Init START
nodeA:11002:11081 [1] NCCL INFO comm 0x55c3a81d2e40 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x4a5b6c7d8e9f0a1b - Init START
nodeB:12001:12082 [0] NCCL INFO comm 0x562fd0b7a1c0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x4a5b6c7d8e9f0a1b - Init START
nodeB:12002:12083 [1] NCCL INFO comm 0x55ab9e34f870 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x4a5b6c7d8e9f0a1b - Init START
nodeA:11001:11080 [0] NCCL INFO Setting affinity for GPU 0 to ffffffff,00000000,ffffffff
nodeA:11001:11080 [0] NCCL INFO NVLS multicast support is not available on dev 0
nodeA:11001:11080 [0] NCCL INFO Channel 00/02 :    0   1   2   3
nodeA:11001:11080 [0] NCCL INFO Channel 01/02 :    0   1   2   3
nodeA:11001:11080 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
nodeA:11001:11080 [0] NCCL INFO P2P Chunksize set to 131072
nodeA:11001:11080 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
nodeA:11001:11080 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/IB/1/GDRDMA
nodeA:11001:11080 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:11001:11080 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:11002:11081 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0(0)/GDRDMA
nodeA:11002:11081 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA
nodeB:12001:12082 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA
nodeB:12001:12082 [0] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [receive] via NET/IB/1/GDRDMA
nodeB:12001:12082 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read
nodeB:12001:12082 [0] NCCL INFO Channel 01/0 : 2[0] -> 3[1] via P2P/CUMEM/read
nodeB:12002:12083 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0(2)/GDRDMA
nodeB:12002:12083 [1] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA
nodeA:11001:11080 [0] NCCL INFO Connected all rings
nodeA:11001:11080 [0] NCCL INFO Connected all trees
nodeA:11001:11080 [0] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 512 | 512
nodeA:11001:11080 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
nodeA:11001:11080 [0] NCCL INFO comm 0x5581e2f0c9a0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x4a5b6c7d8e9f0a1b - Init COMPLETE
nodeA:11002:11081 [1] NCCL INFO comm 0x55c3a81d2e40 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x4a5b6c7d8e9f0a1b - Init COMPLETE
nodeB:12001:12082 [0] NCCL INFO comm 0x562fd0b7a1c0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x4a5b6c7d8e9f0a1b - Init COMPLETE
nodeB:12002:12083 [1] NCCL INFO comm 0x55ab9e34f870 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x4a5b6c7d8e9f0a1b - Init COMPLETE
)";

// A log read in pieces cut anywhere (as gpurun --nccl-check reads logs that ranks still write)
// reads as the whole text does: the analyzer keeps the start of a line until its newline comes.
TEST(NcclLogFormats, PiecesCutAnywhereReadAsTheWholeText)
{
    const std::string text = std::string(v2_17_log) + "nodeA:8001:8001 [0] NCCL INFO no newline at the end";
    const auto whole = nccl::render_json(analyze(text, "log"));
    for (const std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
        nccl::Analyzer analyzer;
        const std::uint32_t input = analyzer.add_input("log");
        for (std::size_t at = 0; at < text.size(); at += step) {
            analyzer.read_more(input, std::string_view(text).substr(at, step));
        }
        analyzer.read_more(input, {}, true);
        EXPECT_EQ(nccl::render_json(analyzer.analysis()), whole) << "pieces of " << step << " bytes";
    }
}

TEST(NcclLogFormats, V2_19NvmlIndexCumemAndPxn)
{
    const Analysis a = analyze(v2_19_log, "v2_19_cumem_pxn");
    EXPECT_EQ(a.nccl_versions, Strings{"2.19.3+cuda12.3"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(a.processes_init_complete, 4U);
    EXPECT_EQ(count(a, Transport::p2p), 4U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 8U) << "PXN lines are IB with GPUDirect RDMA too";
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.id, "0x4a5b6c7d8e9f0a1b");
    EXPECT_EQ(c.versions, Strings{"2.19.3+cuda12.3"});
    EXPECT_EQ(rank_hosts(c), (Strings{"nodeA", "nodeA", "nodeB", "nodeB"}));
    EXPECT_EQ(c.ranks[3].cuda_dev, 1);
    EXPECT_EQ(c.ranks[3].nvml_dev, 1);
    EXPECT_EQ(c.ranks[3].bus_id, "2a000");
    EXPECT_TRUE(c.ranks[3].init_complete);
    EXPECT_EQ(c.ranks[3].where.str(), "v2_19_cumem_pxn:10") << "a rank is first seen at its Init START";
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/0(0)/GDRDMA"), 1U);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IB/0/GDRDMA"), 1U);
    ASSERT_NE(link(c, "nodeB", "nodeA"), nullptr);
    EXPECT_EQ(link(c, "nodeB", "nodeA")->paths.at("NET/IB/0(2)/GDRDMA"), 1U);
    ASSERT_NE(link(c, "nodeA", "nodeA"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeA")->paths.at("P2P/CUMEM/read"), 2U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("v2_19_cumem_pxn", a);
}

// NCCL 2.27.5 on Grace (C2C) nodes, 2 nodes x 2 GPUs: the version as an INFO record in every
// process, "ncclCommInitRankConfig", GPUDirect over PCI ("/GDRDMA(PCI)"), a per-node split with
// "key %d- Init START" (no commId), and a WARN with the default timestamp before its prefix.
constexpr std::string_view v2_27_log = R"(nodeA:21001:21001 [0] NCCL INFO NCCL version 2.27.5+cuda12.9
nodeA:21001:21001 [0] NCCL INFO Bootstrap: Using eth0:10.5.0.1<0>
nodeA:21001:21001 [0] NCCL INFO cudaDriverVersion 12090
nodeA:21001:21001 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
nodeA:21001:21001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.5.0.1<0>
nodeA:21001:21001 [0] NCCL INFO Using network IB
nodeA:21002:21002 [1] NCCL INFO NCCL version 2.27.5+cuda12.9
nodeB:22001:22001 [0] NCCL INFO NCCL version 2.27.5+cuda12.9
nodeB:22002:22002 [1] NCCL INFO NCCL version 2.27.5+cuda12.9
nodeA:21001:21001 [0] NCCL INFO ncclCommInitRankConfig comm 0x3a2b1c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 901000 commId 0x1122334455667788 - Init START
nodeA:21002:21002 [1] NCCL INFO ncclCommInitRankConfig comm 0x3a2b1e0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1901000 commId 0x1122334455667788 - Init START
nodeB:22001:22001 [0] NCCL INFO ncclCommInitRankConfig comm 0x4c5d6e0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 901000 commId 0x1122334455667788 - Init START
nodeB:22002:22002 [1] NCCL INFO ncclCommInitRankConfig comm 0x4c5d700 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 1901000 commId 0x1122334455667788 - Init START
nodeA:21001:21001 [0] NCCL INFO comm 0x3a2b1c0 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
nodeA:21001:21001 [0] NCCL INFO Channel 00/02 : 0 1 2 3
nodeA:21001:21001 [0] NCCL INFO Channel 01/02 : 0 1 2 3
nodeA:21001:21001 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
nodeA:21001:21001 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA(PCI)
nodeA:21001:21001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:21002:21002 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA(PCI)
nodeB:22001:22001 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA(PCI)
nodeB:22001:22001 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read
nodeB:22002:22002 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA(PCI)
nodeA:21001:21001 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
nodeA:21001:21001 [0] NCCL INFO Connected all trees
nodeA:21001:21001 [0] NCCL INFO 2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
nodeA:21001:21001 [0] NCCL INFO ncclCommInitRankConfig comm 0x3a2b1c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 901000 commId 0x1122334455667788 - Init COMPLETE
nodeA:21002:21002 [1] NCCL INFO ncclCommInitRankConfig comm 0x3a2b1e0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1901000 commId 0x1122334455667788 - Init COMPLETE
nodeB:22001:22001 [0] NCCL INFO ncclCommInitRankConfig comm 0x4c5d6e0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 901000 commId 0x1122334455667788 - Init COMPLETE
nodeB:22002:22002 [1] NCCL INFO ncclCommInitRankConfig comm 0x4c5d700 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 1901000 commId 0x1122334455667788 - Init COMPLETE
nodeA:21001:21001 [0] NCCL INFO ncclCommSplit comm 0x5e6f700 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 901000 parent 0x3a2b1c0 splitCount 1 color 0 key 0- Init START
nodeA:21002:21002 [1] NCCL INFO ncclCommSplit comm 0x5e6f720 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1901000 parent 0x3a2b1e0 splitCount 1 color 0 key 1- Init START
nodeB:22001:22001 [0] NCCL INFO ncclCommSplit comm 0x6a7b800 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 901000 parent 0x4c5d6e0 splitCount 1 color 1 key 2- Init START
nodeB:22002:22002 [1] NCCL INFO ncclCommSplit comm 0x6a7b820 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1901000 parent 0x4c5d700 splitCount 1 color 1 key 3- Init START
nodeA:21001:21001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:21002:21002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
nodeB:22001:22001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeB:22002:22002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
nodeA:21001:21001 [0] NCCL INFO ncclCommSplit comm 0x5e6f700 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 901000 parent 0x3a2b1c0 splitCount 1 color 0 key 0 - Init COMPLETE
nodeA:21002:21002 [1] NCCL INFO ncclCommSplit comm 0x5e6f720 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1901000 parent 0x3a2b1e0 splitCount 1 color 0 key 1 - Init COMPLETE
nodeB:22001:22001 [0] NCCL INFO ncclCommSplit comm 0x6a7b800 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 901000 parent 0x4c5d6e0 splitCount 1 color 1 key 2 - Init COMPLETE
nodeB:22002:22002 [1] NCCL INFO ncclCommSplit comm 0x6a7b820 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1901000 parent 0x4c5d700 splitCount 1 color 1 key 3 - Init COMPLETE

[2025-07-21 19:05:29] nodeB:22002:22090 [1] transport/net_ib.cc:2233 NCCL WARN NET/IB: Got completion from peer 10.5.0.1<41235> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.5.0.2 remoteGid ::ffff:10.5.0.1 hca mlx5_1
nodeB:22002:22090 [1] NCCL INFO transport/net.cc:1287 -> 6
)";

TEST(NcclLogFormats, V2_27SplitCommGdrOverPciAndTimestampedWarn)
{
    const Analysis a = analyze(v2_27_log, "v2_27_split_pci_warn");
    EXPECT_EQ(a.nccl_versions, Strings{"2.27.5+cuda12.9"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 4U);
    EXPECT_EQ(a.processes_init_complete, 4U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 4U) << "GDRDMA(PCI) is GPUDirect RDMA";
    EXPECT_EQ(count(a, Transport::net_ib), 0U);
    EXPECT_EQ(count(a, Transport::p2p), 6U);
    ASSERT_EQ(a.communicators.size(), 3U) << "the world and one split per node";
    const auto* world = comm(a, "0x1122334455667788");
    ASSERT_NE(world, nullptr);
    EXPECT_EQ(world->nranks, 4);
    EXPECT_EQ(world->connections, 6U);
    ASSERT_NE(link(*world, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(*world, "nodeA", "nodeB")->paths.at("NET/IB/0/GDRDMA(PCI)"), 1U);
    EXPECT_EQ(link(*world, "nodeA", "nodeB")->paths.at("NET/IB/1/GDRDMA(PCI)"), 1U);
    std::vector<std::string> split_hosts;
    for (const auto& c : a.communicators) {
        if (&c == world) {
            continue;
        }
        EXPECT_EQ(c.nranks, 2);
        EXPECT_EQ(rank_numbers(c), (std::vector<int>{0, 1}));
        ASSERT_EQ(c.hosts.size(), 1U) << "a split per node stays on its node";
        split_hosts.push_back(c.hosts[0]);
        EXPECT_EQ(c.connections, 2U);
        EXPECT_TRUE(c.ranks[0].init_complete && c.ranks[1].init_complete);
        ASSERT_NE(link(c, c.hosts[0], c.hosts[0]), nullptr);
        EXPECT_EQ(link(c, c.hosts[0], c.hosts[0])->paths.at("P2P/CUMEM/read"), 2U);
    }
    std::sort(split_hosts.begin(), split_hosts.end());
    EXPECT_EQ(split_hosts, (Strings{"nodeA", "nodeB"}));
    ASSERT_EQ(a.warnings.size(), 1U);
    EXPECT_EQ(a.warnings[0].kind, "NET/IB completion error");
    EXPECT_EQ(a.warnings[0].count, 1U);
    EXPECT_EQ(a.warnings[0].where.str(), "v2_27_split_pci_warn:44");
    EXPECT_EQ(a.warnings[0].example.rfind("NET/IB: Got completion from peer 10.5.0.1<41235>", 0), 0U)
        << a.warnings[0].example;
    EXPECT_EQ(codes(a), Strings{"nccl.warn"});
    expect_json_golden("v2_27_split_pci_warn", a);
}

// NCCL 2.30.7, one node with 2 GPUs and NCCL_P2P_DISABLE=1: "[Rank N] ncclCommInitRank" on Init
// START, "SHM/direct", no NIC (2.24+ still prints "NET/IB : Using [RO]; OOB ..." with no device),
// and a WARN with "file.cc:LINE (function)" after a timestamp.
constexpr std::string_view v2_30_log = R"(gpu7:31001:31001 [0] NCCL INFO NCCL version 2.30.7+cuda13.0
gpu7:31001:31001 [0] NCCL INFO NCCL git version master 3f9c2a1
gpu7:31001:31001 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
gpu7:31001:31001 [0] NCCL INFO Bootstrap: Using eth0:10.6.0.7<0>
gpu7:31001:31001 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
gpu7:31001:31001 [0] NCCL INFO NET/IB : No device found.
gpu7:31001:31001 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:10.6.0.7<0>
gpu7:31001:31001 [0] NCCL INFO NET/Socket : Using [0]eth0:10.6.0.7<0>
gpu7:31001:31001 [0] NCCL INFO Using network Socket
gpu7:31002:31002 [1] NCCL INFO NCCL version 2.30.7+cuda13.0
gpu7:31002:31002 [1] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
gpu7:31001:31001 [0] NCCL INFO [Rank 0] ncclCommInitRank comm 0x55a0c0e41230 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6e5d4c3b2a190807 - Init START
gpu7:31002:31002 [1] NCCL INFO [Rank 1] ncclCommInitRank comm 0x55f1d2e3a450 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x6e5d4c3b2a190807 - Init START
gpu7:31001:31001 [0] NCCL INFO comm 0x55a0c0e41230 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
gpu7:31001:31001 [0] NCCL INFO Channel 00/02 : 0 1
gpu7:31001:31001 [0] NCCL INFO Channel 01/02 : 0 1
gpu7:31001:31001 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
gpu7:31001:31001 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct
gpu7:31001:31001 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct
gpu7:31002:31002 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct
gpu7:31002:31002 [1] NCCL INFO Channel 01 : 1[1] -> 0[0] via SHM/direct
gpu7:31001:31001 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0
gpu7:31001:31001 [0] NCCL INFO Connected all trees
gpu7:31001:31001 [0] NCCL INFO 2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
gpu7:31001:31001 [0] NCCL INFO ncclCommInitRank comm 0x55a0c0e41230 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6e5d4c3b2a190807 - Init COMPLETE
gpu7:31001:31001 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 0.52 (kernels 0.20, alloc 0.01, bootstrap 0.02, allgathers 0.00, topo 0.10, graphs 0.00, connections 0.08, rest 0.11)
gpu7:31002:31002 [1] NCCL INFO ncclCommInitRank comm 0x55f1d2e3a450 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x6e5d4c3b2a190807 - Init COMPLETE

[2026-01-15 08:12:44] gpu7:31002:31090 [1] misc/socket.cc:731 (ncclSocketConnect) NCCL WARN ncclOsSocketPollConnect to 10.6.0.7<43125> failed with error Connection refused
gpu7:31002:31090 [1] NCCL INFO misc/socket.cc:802 (ncclSocketConnect) -> 6
)";

TEST(NcclLogFormats, V2_30RankTaggedInitShmDirectAndWarnFunction)
{
    const Analysis a = analyze(v2_30_log, "v2_30_shm_direct");
    EXPECT_EQ(a.nccl_versions, Strings{"2.30.7+cuda13.0"});
    EXPECT_EQ(a.hosts, 1U);
    EXPECT_EQ(a.ranks, 2U);
    EXPECT_EQ(a.processes_init_complete, 2U);
    EXPECT_EQ(count(a, Transport::shm), 4U);
    EXPECT_EQ(a.connections, 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.id, "0x6e5d4c3b2a190807");
    EXPECT_EQ(c.nranks, 2);
    EXPECT_EQ(rank_hosts(c), (Strings{"gpu7", "gpu7"}));
    EXPECT_EQ(c.ranks[1].bus_id, "2a000");
    EXPECT_EQ(c.ranks[1].where.str(), "v2_30_shm_direct:13");
    ASSERT_NE(link(c, "gpu7", "gpu7"), nullptr);
    EXPECT_EQ(link(c, "gpu7", "gpu7")->paths.at("SHM/direct"), 4U);
    ASSERT_EQ(a.warnings.size(), 1U);
    EXPECT_EQ(a.warnings[0].kind, "socket connect failed");
    EXPECT_EQ(a.warnings[0].where.str(), "v2_30_shm_direct:29");
    EXPECT_EQ(a.warnings[0].example, "ncclOsSocketPollConnect to 10.6.0.7<43125> failed with error Connection refused");
    EXPECT_EQ(codes(a), (Strings{"nccl.shm_not_p2p", "nccl.env_disables_transport", "nccl.warn"}))
        << "no socket finding: one node, no NET connection line";
    const auto* shm = finding(a, "nccl.shm_not_p2p");
    ASSERT_NE(shm, nullptr);
    EXPECT_NE(shm->message.find("NCCL_P2P_DISABLE=1 is set (v2_30_shm_direct:3)"), std::string::npos) << shm->message;
    EXPECT_EQ(finding(a, "nccl.env_disables_transport")->count, 2U);
    expect_json_golden("v2_30_shm_direct", a);
}

// NCCL 2.20.5 with the HPC-X SHARP plugin, 2 nodes x 2 GPUs: CollNet lines name only the local
// rank (one head per node), and the channel summary counts collnet channels.
constexpr std::string_view collnet_log = R"(nodeA:41001:41001 [0] NCCL INFO NCCL_COLLNET_ENABLE set by environment to 1.
nodeA:41001:41001 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
nodeA:41001:41001 [0] NCCL INFO P2P plugin IBext
nodeA:41001:41001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP ; OOB ib0:10.7.0.1<0>
nodeA:41001:41001 [0] NCCL INFO NET/Plugin: Loaded net plugin IBext (v7)
nodeA:41001:41001 [0] NCCL INFO NET/Plugin: Loaded coll plugin SHARP (v7)
nodeA:41001:41001 [0] NCCL INFO Using network IBext
NCCL version 2.20.5+cuda12.4
nodeA:41001:41060 [0] NCCL INFO comm 0x55d0a1b2c3d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x0badc0ffee123456 - Init START
nodeA:41002:41061 [1] NCCL INFO comm 0x55d0a1b2c3e0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x0badc0ffee123456 - Init START
nodeB:42001:42062 [0] NCCL INFO comm 0x55e1b2c3d4f0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x0badc0ffee123456 - Init START
nodeB:42002:42063 [1] NCCL INFO comm 0x55e1b2c3d500 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x0badc0ffee123456 - Init START
nodeA:41001:41060 [0] NCCL INFO Channel 00/02 :    0   1   2   3
nodeA:41001:41060 [0] NCCL INFO Channel 01/02 :    0   1   2   3
nodeA:41001:41060 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] 1/-1/-1->0->2
nodeA:41001:41060 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IBext/0/GDRDMA
nodeA:41001:41060 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:41002:41061 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IBext/1/GDRDMA
nodeB:42001:42062 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IBext/0/GDRDMA
nodeB:42001:42062 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read
nodeB:42002:42063 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IBext/1/GDRDMA
nodeA:41001:41060 [0] NCCL INFO Connected all rings
nodeA:41001:41060 [0] NCCL INFO Connected all trees
nodeA:41001:41060 [0] NCCL INFO CollNet 00/0 : 0 [receive] via COLLNET/SHARP/0/GDRDMA
nodeA:41001:41060 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA
nodeB:42001:42062 [0] NCCL INFO CollNet 00/0 : 2 [receive] via COLLNET/SHARP/0/GDRDMA
nodeB:42001:42062 [0] NCCL INFO CollNet 00/0 : 2 [send] via COLLNET/SHARP/0/GDRDMA
nodeA:41001:41060 [0] NCCL INFO Connected collnet + chain
nodeA:41001:41060 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
nodeA:41001:41060 [0] NCCL INFO comm 0x55d0a1b2c3d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x0badc0ffee123456 - Init COMPLETE
nodeA:41002:41061 [1] NCCL INFO comm 0x55d0a1b2c3e0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x0badc0ffee123456 - Init COMPLETE
nodeB:42001:42062 [0] NCCL INFO comm 0x55e1b2c3d4f0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x0badc0ffee123456 - Init COMPLETE
nodeB:42002:42063 [1] NCCL INFO comm 0x55e1b2c3d500 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x0badc0ffee123456 - Init COMPLETE
)";

TEST(NcclLogFormats, CollNetSharp)
{
    const Analysis a = analyze(collnet_log, "collnet_sharp");
    EXPECT_EQ(count(a, Transport::collnet), 4U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 4U) << "IBext is an InfiniBand net plugin";
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.collnet_channels, 2U);
    EXPECT_EQ(c.nvls_channels, 0U);
    EXPECT_EQ(c.connections, 10U);
    ASSERT_NE(link(c, "nodeA", "(collnet)"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "(collnet)")->paths.at("COLLNET/SHARP/0/GDRDMA"), 2U);
    ASSERT_NE(link(c, "nodeB", "(collnet)"), nullptr);
    EXPECT_EQ(count(*link(c, "nodeB", "(collnet)"), Transport::collnet), 2U);
    ASSERT_NE(link(c, "nodeA", "nodeB"), nullptr);
    EXPECT_EQ(link(c, "nodeA", "nodeB")->paths.at("NET/IBext/1/GDRDMA"), 1U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("collnet_sharp", a);
}

// The older CollNet forms: "Coll %02d : %d [send] via COLLNET/..." (2.6 - 2.8) and
// "CollNet %02d : ..." without connIndex (2.9 - 2.13).
TEST(NcclLogFormats, CollNetOlderForms)
{
    constexpr std::string_view log = R"(NCCL version 2.7.8+cuda11.0
nodeA:43001:43050 [0] NCCL INFO Coll 00 : 0 [receive] via COLLNET/SHARP/0
nodeA:43001:43050 [0] NCCL INFO Coll 00 : 0 [send] via COLLNET/SHARP/0
nodeB:44001:44051 [0] NCCL INFO Coll 00 : 1 [receive] via COLLNET/SHARP/0
nodeB:44001:44051 [0] NCCL INFO Coll 00 : 1 [send] via COLLNET/SHARP/0
nodeA:43001:43050 [0] NCCL INFO comm 0x7f00aa001b30 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
nodeB:44001:44051 [0] NCCL INFO comm 0x7f00bb001b30 rank 1 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
)";
    const Analysis a = analyze(log, "collnet_2_7");
    EXPECT_EQ(count(a, Transport::collnet), 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    ASSERT_NE(link(a.communicators[0], "nodeA", "(collnet)"), nullptr);
    EXPECT_EQ(link(a.communicators[0], "nodeA", "(collnet)")->paths.at("COLLNET/SHARP/0"), 2U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("collnet_2_7", a);

    constexpr std::string_view log_2_12 = R"(NCCL version 2.12.12+cuda11.7
nodeA:45001:45050 [0] NCCL INFO CollNet 00 : 0 [receive] via COLLNET/SHARP/0/GDRDMA
nodeA:45001:45050 [0] NCCL INFO CollNet 00 : 0 [send] via COLLNET/SHARP/0/GDRDMA
nodeA:45001:45050 [0] NCCL INFO comm 0x7f00cc001b30 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
)";
    const Analysis b = analyze(log_2_12, "collnet_2_12");
    EXPECT_EQ(count(b, Transport::collnet), 2U);
    ASSERT_EQ(b.communicators.size(), 1U);
    EXPECT_EQ(b.communicators[0].connections, 2U);
    expect_json_golden("collnet_2_12", b);
}

// NCCL 2.20.3, one H100 node with 4 GPUs on NVSwitch: no "via NVLS" line exists; NVLS shows as
// "nvls channels" > 0 in the channel summary and one "Connected NVLS tree" per rank.
constexpr std::string_view nvls_log = R"(NCCL version 2.20.3+cuda12.3
h100:61001:61001 [0] NCCL INFO cudaDriverVersion 12030
h100:61001:61001 [0] NCCL INFO Bootstrap : Using eth0:10.8.0.5<0>
h100:61001:61001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [RO]; OOB eth0:10.8.0.5<0>
h100:61001:61001 [0] NCCL INFO Using network IB
h100:61001:61040 [0] NCCL INFO comm 0x5610aa000010 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x77aa55cc33ee1100 - Init START
h100:61002:61041 [1] NCCL INFO comm 0x5610aa000020 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x77aa55cc33ee1100 - Init START
h100:61003:61042 [2] NCCL INFO comm 0x5610aa000030 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId 3a000 commId 0x77aa55cc33ee1100 - Init START
h100:61004:61043 [3] NCCL INFO comm 0x5610aa000040 rank 3 nranks 4 cudaDev 3 nvmlDev 3 busId 5d000 commId 0x77aa55cc33ee1100 - Init START
h100:61001:61040 [0] NCCL INFO NVLS multicast support is available on dev 0
h100:61001:61040 [0] NCCL INFO comm 0x5610aa000010 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0
h100:61001:61040 [0] NCCL INFO Channel 00/24 :    0   1   2   3
h100:61001:61040 [0] NCCL INFO Channel 01/24 :    0   1   2   3
h100:61001:61040 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
h100:61001:61040 [0] NCCL INFO P2P Chunksize set to 524288
h100:61001:61040 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h100:61002:61041 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM/read
h100:61003:61042 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM/read
h100:61004:61043 [3] NCCL INFO Channel 00/0 : 3[3] -> 0[0] via P2P/CUMEM/read
h100:61001:61040 [0] NCCL INFO Connected all rings
h100:61001:61040 [0] NCCL INFO NVLS comm 0x5610aa000010 headRank 0 nHeads 1 buffSize 1048576 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 201326592
h100:61001:61040 [0] NCCL INFO Connected NVLS tree
h100:61002:61041 [1] NCCL INFO Connected NVLS tree
h100:61003:61042 [2] NCCL INFO Connected NVLS tree
h100:61004:61043 [3] NCCL INFO Connected NVLS tree
h100:61001:61040 [0] NCCL INFO Connected all trees
h100:61001:61040 [0] NCCL INFO 24 coll channels, 0 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer
h100:61001:61040 [0] NCCL INFO comm 0x5610aa000010 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x77aa55cc33ee1100 - Init COMPLETE
h100:61002:61041 [1] NCCL INFO comm 0x5610aa000020 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x77aa55cc33ee1100 - Init COMPLETE
h100:61003:61042 [2] NCCL INFO comm 0x5610aa000030 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId 3a000 commId 0x77aa55cc33ee1100 - Init COMPLETE
h100:61004:61043 [3] NCCL INFO comm 0x5610aa000040 rank 3 nranks 4 cudaDev 3 nvmlDev 3 busId 5d000 commId 0x77aa55cc33ee1100 - Init COMPLETE
)";

TEST(NcclLogFormats, NvlsChannelsAndConnectedTree)
{
    const Analysis a = analyze(nvls_log, "nvls_h100");
    EXPECT_EQ(count(a, Transport::nvls), 4U);
    EXPECT_EQ(count(a, Transport::p2p), 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.nvls_channels, 16U);
    EXPECT_EQ(c.collnet_channels, 0U);
    EXPECT_EQ(c.connections, 8U);
    ASSERT_NE(link(c, "h100", "h100"), nullptr);
    EXPECT_EQ(count(*link(c, "h100", "h100"), Transport::nvls), 4U);
    EXPECT_EQ(count(*link(c, "h100", "h100"), Transport::p2p), 4U);
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("nvls_h100", a);
}

// NCCL 2.18.5 on AWS p4d with the aws-ofi-nccl plugin: the net name holds a space
// ("NET/AWS Libfabric/1/GDRDMA"), a net that is neither IB nor Socket.
constexpr std::string_view aws_log =
    R"(ip-10-0-1-2:51001:51001 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.7.4-aws
ip-10-0-1-2:51001:51001 [0] NCCL INFO NET/OFI Using Libfabric version 1.19
ip-10-0-1-2:51001:51001 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
ip-10-0-1-2:51001:51001 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v7)
ip-10-0-1-2:51001:51001 [0] NCCL INFO Using network AWS Libfabric
NCCL version 2.18.5+cuda12.2
ip-10-0-1-2:51001:51060 [0] NCCL INFO comm 0x5599aa001000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 101c0 commId 0x5eed5eed5eed5eed - Init START
ip-10-0-1-2:51002:51061 [1] NCCL INFO comm 0x5599aa002000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 101d0 commId 0x5eed5eed5eed5eed - Init START
ip-10-0-1-3:52001:52062 [0] NCCL INFO comm 0x5599bb001000 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 101c0 commId 0x5eed5eed5eed5eed - Init START
ip-10-0-1-3:52002:52063 [1] NCCL INFO comm 0x5599bb002000 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 101d0 commId 0x5eed5eed5eed5eed - Init START
ip-10-0-1-2:51001:51060 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA
ip-10-0-1-2:51001:51060 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
ip-10-0-1-2:51002:51061 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/AWS Libfabric/1/GDRDMA
ip-10-0-1-3:52001:52062 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/AWS Libfabric/0/GDRDMA
ip-10-0-1-3:52001:52062 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/IPC/read
ip-10-0-1-3:52002:52063 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/AWS Libfabric/1/GDRDMA
ip-10-0-1-2:51001:51060 [0] NCCL INFO comm 0x5599aa001000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 101c0 commId 0x5eed5eed5eed5eed - Init COMPLETE
ip-10-0-1-2:51002:51061 [1] NCCL INFO comm 0x5599aa002000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 101d0 commId 0x5eed5eed5eed5eed - Init COMPLETE
ip-10-0-1-3:52001:52062 [0] NCCL INFO comm 0x5599bb001000 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 101c0 commId 0x5eed5eed5eed5eed - Init COMPLETE
ip-10-0-1-3:52002:52063 [1] NCCL INFO comm 0x5599bb002000 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 101d0 commId 0x5eed5eed5eed5eed - Init COMPLETE
)";

TEST(NcclLogFormats, AwsLibfabricIsAnotherNet)
{
    const Analysis a = analyze(aws_log, "net_aws_libfabric");
    EXPECT_EQ(count(a, Transport::net_other), 4U);
    EXPECT_EQ(count(a, Transport::net_socket), 0U);
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.hosts, (Strings{"ip-10-0-1-2", "ip-10-0-1-3"}));
    ASSERT_NE(link(c, "ip-10-0-1-2", "ip-10-0-1-3"), nullptr);
    EXPECT_EQ(link(c, "ip-10-0-1-2", "ip-10-0-1-3")->paths.at("NET/AWS Libfabric/1/GDRDMA"), 1U);
    EXPECT_EQ(link(c, "ip-10-0-1-2", "ip-10-0-1-3")->paths.at("NET/AWS Libfabric/0/GDRDMA"), 1U);
    EXPECT_EQ(codes(a), Strings{}) << "EFA is neither a socket nor IB without GDR";
    expect_json_golden("net_aws_libfabric", a);
}

// NCCL 2.24.3 with the HPC-X IBext_v8 plugin and no GPUDirect RDMA (nvidia-peermem not loaded).
constexpr std::string_view ibext_log = R"(gpu-a01:71001:71001 [0] NCCL INFO NCCL version 2.24.3+cuda12.6
gpu-a01:71001:71001 [0] NCCL INFO Bootstrap: Using ib0:10.9.0.1<0>
gpu-a01:71001:71001 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
gpu-a01:71001:71001 [0] NCCL INFO P2P plugin v8 IBext_v8
gpu-a01:71001:71001 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
gpu-a01:71001:71001 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.9.0.1<0>
gpu-a01:71001:71001 [0] NCCL INFO Using network IBext_v8
gpu-a02:72001:72001 [0] NCCL INFO NCCL version 2.24.3+cuda12.6
gpu-a01:71001:71001 [0] NCCL INFO ncclCommInitRank comm 0x55aa11110000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xfeedface00c0ffee - Init START
gpu-a02:72001:72001 [0] NCCL INFO ncclCommInitRank comm 0x55bb22220000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xfeedface00c0ffee - Init START
gpu-a01:71001:71001 [0] NCCL INFO Channel 00/02 : 0 1
gpu-a01:71001:71001 [0] NCCL INFO Channel 01/02 : 0 1
gpu-a01:71001:71001 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IBext_v8/0
gpu-a01:71001:71001 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IBext_v8/0
gpu-a01:71001:71001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IBext_v8/0
gpu-a01:71001:71001 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IBext_v8/0
gpu-a02:72001:72001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IBext_v8/0
gpu-a02:72001:72001 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [receive] via NET/IBext_v8/0
gpu-a02:72001:72001 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IBext_v8/0
gpu-a02:72001:72001 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [send] via NET/IBext_v8/0
gpu-a01:71001:71001 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0
gpu-a01:71001:71001 [0] NCCL INFO ncclCommInitRank comm 0x55aa11110000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xfeedface00c0ffee - Init COMPLETE
gpu-a02:72001:72001 [0] NCCL INFO ncclCommInitRank comm 0x55bb22220000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xfeedface00c0ffee - Init COMPLETE
)";

TEST(NcclLogFormats, IbextV8WithoutGpuDirect)
{
    const Analysis a = analyze(ibext_log, "net_ibext_v8");
    EXPECT_EQ(a.nccl_versions, Strings{"2.24.3+cuda12.6"});
    EXPECT_EQ(count(a, Transport::net_ib), 8U) << "IBext_v8 is InfiniBand";
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 0U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.hosts, (Strings{"gpu-a01", "gpu-a02"}));
    ASSERT_NE(link(c, "gpu-a01", "gpu-a02"), nullptr);
    EXPECT_EQ(link(c, "gpu-a01", "gpu-a02")->paths.at("NET/IBext_v8/0"), 4U);
    EXPECT_EQ(codes(a), Strings{"nccl.ib_without_gdr"});
    const auto* f = finding(a, "nccl.ib_without_gdr");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->count, 8U);
    EXPECT_EQ(f->where.str(), "net_ibext_v8:13");
    EXPECT_NE(f->message.find("GPU Direct RDMA Disabled (net_ibext_v8:5)"), std::string::npos) << f->message;
    expect_json_golden("net_ibext_v8", a);
}

// ---------------------------------------------------------------------------------------------
// The corpus: wrappers. One plain log (NCCL 2.23.4, 2 nodes x 1 GPU over IB with a WARN at the
// end) seen through each launcher or collector; the report must be the one of the plain log.

constexpr std::string_view plain_log = R"(n1:101:101 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
n1:101:101 [0] NCCL INFO Bootstrap : Using ib0:10.8.0.1<0>
n1:101:101 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.8.0.1<0>
n1:101:101 [0] NCCL INFO Using network IB
n2:202:202 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
n1:101:101 [0] NCCL INFO ncclCommInitRank comm 0x5600aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init START
n2:202:202 [0] NCCL INFO ncclCommInitRank comm 0x5600bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init START
n1:101:101 [0] NCCL INFO Channel 00/02 : 0 1
n1:101:101 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
n1:101:101 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
n2:202:202 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA
n2:202:202 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA
n1:101:101 [0] NCCL INFO ncclCommInitRank comm 0x5600aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init COMPLETE
n2:202:202 [0] NCCL INFO ncclCommInitRank comm 0x5600bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init COMPLETE

n2:202:260 [0] transport/net_ib.cc:2105 NCCL WARN NET/IB: Got completion from peer 10.8.0.1<33012> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.8.0.2 remoteGid ::ffff:10.8.0.1 hca mlx5_0
n2:202:260 [0] NCCL INFO transport/net.cc:1321 -> 6
)";

namespace {

/// The process (0 on n1, 1 on n2) that wrote a line of plain_log; -1 for the blank line.
int writer(std::string_view line)
{
    return line.starts_with("n1:") ? 0 : line.starts_with("n2:") ? 1 : -1;
}

/// Checks what every wrapped form of plain_log must give, and that the whole report equals the
/// plain one apart from line numbers.
void expect_plain_report(const Analysis& a, const std::string& name, std::uint64_t extra_records = 0)
{
    SCOPED_TRACE(name);
    EXPECT_EQ(a.nccl_versions, Strings{"2.23.4+cuda12.6"});
    EXPECT_EQ(a.hosts, 2U);
    EXPECT_EQ(a.ranks, 2U);
    EXPECT_EQ(a.processes, 2U);
    EXPECT_EQ(a.processes_init_complete, 2U);
    EXPECT_EQ(a.records, 16U + extra_records);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 4U);
    EXPECT_EQ(a.connections, 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    EXPECT_EQ(c.id, "0xc0ffee0011223344");
    EXPECT_EQ(rank_hosts(c), (Strings{"n1", "n2"}));
    EXPECT_EQ(c.ranks[0].pid, 101);
    EXPECT_EQ(c.ranks[1].pid, 202);
    ASSERT_NE(link(c, "n1", "n2"), nullptr);
    EXPECT_EQ(count(*link(c, "n1", "n2"), Transport::net_ib_gdr), 2U);
    ASSERT_EQ(a.warnings.size(), 1U);
    EXPECT_EQ(a.warnings[0].kind, "NET/IB completion error");
    EXPECT_EQ(codes(a), Strings{"nccl.warn"});
    nlohmann::json expected = normalized(nccl::render_json(analyze(plain_log, "plain")));
    expected["summary"]["records"] = 16U + extra_records;
    EXPECT_EQ(normalized(nccl::render_json(a)), expected);
}

} // namespace

TEST(NcclLogWrappers, PlainLog)
{
    const Analysis a = analyze(plain_log, "wrap_plain");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "plain"));
    EXPECT_EQ(a.lines, 17U);
    EXPECT_EQ(a.warnings[0].where.str(), "wrap_plain:16");
    EXPECT_EQ(a.communicators[0].ranks[1].where.str(), "wrap_plain:7");
    expect_json_golden("wrap_plain", a);
}

TEST(NcclLogWrappers, OpenMpiTagOutput)
{
    // mpirun --tag-output: "[jobid,rank]<stream>:"; WARN goes to stderr; blank lines are tagged too.
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int) {
        const int rank = std::max(writer(line), 1);
        const char* stream = line.find("NCCL WARN") != std::string_view::npos || line.empty() ? "stderr" : "stdout";
        return "[1," + std::to_string(rank) + "]<" + stream + ">:" + std::string(line);
    });
    const Analysis a = analyze(text, "wrap_openmpi");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "openmpi"));
    EXPECT_EQ(a.warnings[0].where.str(), "wrap_openmpi:16");
    expect_json_golden("wrap_openmpi", a);
}

TEST(NcclLogWrappers, RankTag)
{
    // A launcher that tags each line with the rank: "[3] host:pid:tid [dev] NCCL INFO".
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int) {
        return line.empty() ? std::string() : "[" + std::to_string(writer(line) * 3) + "] " + std::string(line);
    });
    const Analysis a = analyze(text, "wrap_rank_tag");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "rank tag"));
    expect_json_golden("wrap_rank_tag", a);
}

TEST(NcclLogWrappers, PdshHostTag)
{
    const std::string text = wrap_lines(plain_log,
        [](std::string_view line, int) { return (writer(line) == 0 ? "n1: " : "n2: ") + std::string(line); });
    const Analysis a = analyze(text, "wrap_pdsh");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "pdsh"));
    expect_json_golden("wrap_pdsh", a);
}

TEST(NcclLogWrappers, RayWorkerPrefixWithColours)
{
    // Ray prints the worker tag in colour: ESC[36m(WorkerDict pid=N, ip=...)ESC[0m.
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int) {
        const std::string tag = writer(line) == 0 ? "(WorkerDict pid=101)" : "(WorkerDict pid=202, ip=10.8.0.2)";
        return "\x1b[36m" + tag + "\x1b[0m " + std::string(line);
    });
    const Analysis a = analyze(text, "wrap_ray");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "ray"));
    expect_json_golden("wrap_ray", a);
}

TEST(NcclLogWrappers, QuotedRayLog)
{
    // The same Ray log pasted into an e-mail reply three levels deep.
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int) {
        return "> > > (RayWorkerWrapper pid=" + std::string(writer(line) == 0 ? "101" : "202") + ") " +
            std::string(line);
    });
    const Analysis a = analyze(text, "wrap_quoted");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "quoted"));
    expect_json_golden("wrap_quoted", a);
}

TEST(NcclLogWrappers, PythonLogging)
{
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int n) {
        const std::string ms = std::to_string(100 + n * 7);
        return "2025-11-12 20:41:43," + ms + " - INFO - " + std::string(line);
    });
    const Analysis a = analyze(text, "wrap_python_logging");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "python logging"));
    expect_json_golden("wrap_python_logging", a);
}

TEST(NcclLogWrappers, Timestamps)
{
    // CloudWatch puts a bare timestamp line before each record; other collectors put one in front
    // of the line, with or without a "|" column.
    const std::string cloudwatch = wrap_lines(plain_log, [](std::string_view line, int n) {
        return "2024-12-04T05:27:45." + std::to_string(100 + n) + "Z\n" + std::string(line);
    });
    const Analysis a = analyze(cloudwatch, "wrap_cloudwatch");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "cloudwatch"));
    EXPECT_EQ(a.lines, 34U);
    EXPECT_EQ(a.warnings[0].where.str(), "wrap_cloudwatch:32");
    expect_json_golden("wrap_cloudwatch", a);

    const std::string collector =
        wrap_lines(plain_log, [](std::string_view line, int) { return " 2025-02-18 12:54 " + std::string(line); });
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(analyze(collector, "wrap_collector"), "collector"));

    const std::string columns = wrap_lines(plain_log, [](std::string_view line, int n) {
        return "  | 2024-11-28T07:42:11." + std::to_string(500 + n) + "Z | " + std::string(line);
    });
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(analyze(columns, "wrap_columns"), "columns"));
}

TEST(NcclLogWrappers, NcclTestsBannersAndGdbLines)
{
    std::string text =
        R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid    101 on         n1 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid    202 on         n2 device  0 [0x18] NVIDIA H100 80GB HBM3
)";
    text += wrap_lines(plain_log, [](std::string_view line, int n) {
        std::string out(line);
        if (n % 4 == 3) {
            out += "\n[New Thread 0x7ffe64ffd000 (LWP 7638)]\n[Thread 0x7ffe64ffd000 (LWP 7638) exited]";
        }
        return out;
    });
    text += R"(#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    24.95    0.00    0.00      0    24.61    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.000102
#
)";
    const Analysis a = analyze(text, "wrap_nccl_tests_gdb");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "nccl-tests"));
    EXPECT_EQ(a.lines, 5U + 17U + 8U + 8U);
    EXPECT_EQ(a.warnings[0].where.str(), "wrap_nccl_tests_gdb:27");
    expect_json_golden("wrap_nccl_tests_gdb", a);
}

TEST(NcclLogWrappers, SeveralRecordsOnOnePhysicalLine)
{
    // A terminal-wrapped paste: pairs of records joined by a blank.
    std::string text;
    std::size_t pos = 0;
    int n = 0;
    while (pos < plain_log.size()) {
        const std::size_t nl = plain_log.find('\n', pos);
        text += plain_log.substr(pos, nl - pos);
        text += ++n % 2 == 0 ? "\n" : " ";
        pos = nl + 1;
    }
    text += "\n";
    const Analysis a = analyze(text, "wrap_joined");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "joined"));
    EXPECT_EQ(a.lines, 9U);
    expect_json_golden("wrap_joined", a);
}

TEST(NcclLogWrappers, CrlfLineEnds)
{
    const std::string text = wrap_lines(plain_log, [](std::string_view line, int) { return std::string(line) + "\r"; });
    const Analysis a = analyze(text, "wrap_crlf");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "crlf"));
    EXPECT_EQ(a.communicators[0].ranks[0].bus_id, "18000") << "no carriage return left in values";
    expect_json_golden("wrap_crlf", a);
}

TEST(NcclLogWrappers, NulBytesAndBinaryJunk)
{
    // A log file that was preallocated with NULs, with a core dump fragment and stray bytes.
    constexpr char core[] = "\x7f"
                            "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\x01\0\0\0\xff\xfe\xfd\x80\x81";
    const std::string junk(core, sizeof core - 1);
    const std::string text = wrap_lines(plain_log, [&](std::string_view line, int n) {
        if (n == 2) {
            return std::string(64, '\0') + std::string(line);
        }
        if (n == 8) {
            return junk + "\n" + std::string(line) + std::string("\0\0\0", 3);
        }
        if (n == 11) {
            return std::string(line.substr(0, 10)) + std::string("\0", 1) + std::string(line.substr(10));
        }
        return std::string(line);
    });
    const Analysis a = analyze(text, "wrap_nul_junk");
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "nul and junk"));
    EXPECT_EQ(a.lines, 18U);
    expect_json_golden("wrap_nul_junk", a);
}

TEST(NcclLogWrappers, TruncatedLines)
{
    // Lines cut by a collector: inside a message, inside a prefix, inside a NET path and inside a
    // WARN. What was cut must not count as a connection of another kind.
    constexpr std::string_view log = R"(n1:101:101 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
n1:101:101 [0] NCCL INFO ncclCommInitRank comm 0x5600aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init START
n2:202:202 [0] NCCL INFO ncclCommInitRank comm 0x5600bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init START
n1:101:101 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
n1:101:101 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [se
n2:202:2
n2:202:202 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDR
n1:101:101 [0] NCCL INFO ncclCommInitRank comm 0x5600aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init COMPLETE
n2:202:202 [0] NCCL INFO ncclCommInitRank comm 0x5600bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xc0ffee0011223344 - Init COMPLETE

n2:202:260 [0] transport/net_ib.cc:2105 NCCL WARN NET/IB: Got completion from peer 10.8.0.1<33012> with sta)";
    const Analysis a = analyze(log, "wrap_truncated");
    EXPECT_EQ(a.lines, 11U);
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 1U);
    EXPECT_EQ(count(a, Transport::net_ib), 0U) << "'NET/IB/0/GDR' is a cut path, not IB without GPUDirect";
    EXPECT_EQ(a.connections, 1U) << "the lines cut inside their path or before it are no connections";
    EXPECT_EQ(a.processes_init_complete, 2U);
    ASSERT_EQ(a.warnings.size(), 1U);
    EXPECT_EQ(a.warnings[0].kind, "NET/IB completion error");
    EXPECT_EQ(a.warnings[0].where.str(), "wrap_truncated:11");
    EXPECT_EQ(codes(a), Strings{"nccl.warn"});
    expect_json_golden("wrap_truncated", a);
}

TEST(NcclLogWrappers, IdenticalHostnamesOnDifferentNodes)
{
    // Two nodes both called "ubuntu": only the pids tell the processes apart.
    constexpr std::string_view log = R"(ubuntu:4101:4101 [0] NCCL INFO NCCL version 2.22.3+cuda12.4
ubuntu:4101:4101 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB enp1s0:192.168.0.10<0>
ubuntu:4101:4101 [0] NCCL INFO Using network IB
ubuntu:4102:4102 [1] NCCL INFO NCCL version 2.22.3+cuda12.4
ubuntu:9201:9201 [0] NCCL INFO NCCL version 2.22.3+cuda12.4
ubuntu:9202:9202 [1] NCCL INFO NCCL version 2.22.3+cuda12.4
ubuntu:4101:4101 [0] NCCL INFO ncclCommInitRank comm 0x55aa00000100 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1234abcd5678ef90 - Init START
ubuntu:4102:4102 [1] NCCL INFO ncclCommInitRank comm 0x55aa00000200 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2000 commId 0x1234abcd5678ef90 - Init START
ubuntu:9201:9201 [0] NCCL INFO ncclCommInitRank comm 0x55aa00000100 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1234abcd5678ef90 - Init START
ubuntu:9202:9202 [1] NCCL INFO ncclCommInitRank comm 0x55aa00000200 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2000 commId 0x1234abcd5678ef90 - Init START
ubuntu:4101:4101 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
ubuntu:4101:4101 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
ubuntu:4102:4102 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
ubuntu:9201:9201 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA
ubuntu:9201:9201 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/IPC/read
ubuntu:9202:9202 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0/GDRDMA
ubuntu:4101:4101 [0] NCCL INFO ncclCommInitRank comm 0x55aa00000100 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1234abcd5678ef90 - Init COMPLETE
ubuntu:4102:4102 [1] NCCL INFO ncclCommInitRank comm 0x55aa00000200 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2000 commId 0x1234abcd5678ef90 - Init COMPLETE
ubuntu:9201:9201 [0] NCCL INFO ncclCommInitRank comm 0x55aa00000100 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1234abcd5678ef90 - Init COMPLETE
ubuntu:9202:9202 [1] NCCL INFO ncclCommInitRank comm 0x55aa00000200 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2000 commId 0x1234abcd5678ef90 - Init COMPLETE
)";
    const Analysis a = analyze(log, "same_hostname");
    EXPECT_EQ(a.processes, 4U);
    EXPECT_EQ(a.processes_init_complete, 4U);
    EXPECT_EQ(a.ranks, 4U) << "cudaDev 0 twice on 'ubuntu', in two processes";
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 4U);
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    ASSERT_EQ(a.communicators.size(), 1U);
    const auto& c = a.communicators[0];
    ASSERT_EQ(c.ranks.size(), 4U) << "every rank kept, none taken for another's";
    EXPECT_EQ(c.ranks[0].pid, 4101);
    EXPECT_EQ(c.ranks[1].pid, 4102);
    EXPECT_EQ(c.ranks[2].pid, 9201);
    EXPECT_EQ(c.ranks[3].pid, 9202);
    EXPECT_EQ(c.ranks[2].cuda_dev, 0);
    EXPECT_FALSE(has(a, "nccl.shm_not_p2p"));
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("same_hostname", a);
}

TEST(NcclLogWrappers, PrefixStrippedByTheUser)
{
    // Pasted with the host:pid:tid part cut away (NCCL 2.5.7, RoCE without GPUDirect), and with
    // only "NCCL INFO" left (NCCL 2.24.3): transports still count, hosts stay unknown.
    constexpr std::string_view log = R"(NCCL version 2.5.7+cuda10.1
[0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.12.0.1<0>
[0] NCCL INFO Ring 00 : 3[1c000] -> 0[1b000] [receive] via NET/IB/0
[0] NCCL INFO Ring 00 : 0[1b000] -> 1[1c000] via direct shared memory
[1] NCCL INFO Ring 00 : 1[1c000] -> 2[1b000] [send] via NET/IB/0
NCCL INFO Channel 09/0 : 33[1] -> 41[1] [send] via NET/IBext_v8/4
)";
    const Analysis a = analyze(log, "prefix_stripped");
    EXPECT_EQ(a.records, 5U);
    EXPECT_EQ(a.hosts, 0U);
    EXPECT_EQ(count(a, Transport::net_ib), 3U);
    EXPECT_EQ(count(a, Transport::shm), 1U);
    EXPECT_EQ(codes(a), (Strings{"nccl.shm_not_p2p", "nccl.ib_without_gdr"}));
    EXPECT_EQ(finding(a, "nccl.ib_without_gdr")->count, 3U);
    EXPECT_EQ(finding(a, "nccl.shm_not_p2p")->where.str(), "prefix_stripped:4");
    expect_json_golden("prefix_stripped", a);
}

TEST(NcclLogWrappers, EmptyOrRedactedHostIsOneHostWithItsPids)
{
    // NCCL's prefix is "%s:%d:%d " of the host name cut at its first dot, pid and tid
    // (src/debug.cc, getHostName in src/misc/utils.cc): a container whose host name is empty or
    // starts with a dot gives ":pid:tid". One unnamed host whose processes keep their pids.
    constexpr std::string_view unnamed = R"(:5202:5202 [0] NCCL INFO NCCL version 2.18.5+cuda12.1
:5202:5683 [0] NCCL INFO comm 0x9b2c6a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x6d1e0a4c2b6fb1a3 - Init START
:5203:5684 [1] NCCL INFO comm 0x8c1a5d0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x6d1e0a4c2b6fb1a3 - Init START
:5202:5683 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
:5203:5684 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
:5202:5683 [0] NCCL INFO comm 0x9b2c6a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x6d1e0a4c2b6fb1a3 - Init COMPLETE
:5203:5684 [1] NCCL INFO comm 0x8c1a5d0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x6d1e0a4c2b6fb1a3 - Init COMPLETE
)";
    const Analysis a = analyze(unnamed, "unnamed");
    EXPECT_EQ(a.hosts, 1U);
    EXPECT_EQ(a.processes, 2U);
    EXPECT_EQ(a.processes_init_complete, 2U);
    EXPECT_EQ(a.ranks, 2U);
    ASSERT_EQ(a.communicators.size(), 1U);
    EXPECT_EQ(rank_hosts(a.communicators[0]), (Strings{"(unnamed)", "(unnamed)"}));
    EXPECT_EQ(a.communicators[0].ranks[0].pid, 5202);
    EXPECT_EQ(a.communicators[0].ranks[1].pid, 5203);
    ASSERT_NE(link(a.communicators[0], "(unnamed)", "(unnamed)"), nullptr);
    EXPECT_EQ(codes(a), Strings{});

    // A poster replaced host and numbers by words (NVIDIA/nccl#1466, a vLLM run with TP=4): one
    // host, one process of unknown pid, records from four devices.
    constexpr std::string_view redacted =
        R"(pod-id:num:num [3] NCCL INFO Setting affinity for GPU 3 to ffffffff,00000000,ffffffff,00000000
pod-id:num:num [3] NCCL INFO NVLS multicast support is not available on dev 3
pod-id:num:num [1] NCCL INFO Setting affinity for GPU 1 to ffffffff,00000000,ffffffff
pod-id:num:num [1] NCCL INFO NVLS multicast support is not available on dev 1
pod-id:num:num [2] NCCL INFO Setting affinity for GPU 2 to ffffffff,00000000,ffffffff,00000000
pod-id:num:num [2] NCCL INFO NVLS multicast support is not available on dev 2
pod-id:num:num [0] NCCL INFO Setting affinity for GPU 0 to ffffffff,00000000,ffffffff
pod-id:num:num [0] NCCL INFO NVLS multicast support is not available on dev 0
pod-id:num:num [3] NCCL INFO comm 0x56300ffd3cf0 rank 3 nRanks 4 nNodes 1 localRanks 4 localRank 3 MNNVL 0
pod-id:num:num [3] NCCL INFO Trees [0] -1/-1/-1->3->2 [1] -1/-1/-1->3->2
)";
    const Analysis b = analyze(redacted, "redacted");
    EXPECT_EQ(b.records, 10U);
    EXPECT_EQ(b.hosts, 1U);
    EXPECT_EQ(b.processes, 1U);
    EXPECT_EQ(b.ranks, 4U) << "records from devices 0 to 3";
}

// ---------------------------------------------------------------------------------------------
// The corpus: one case per finding code, and near-misses that must stay quiet.

TEST(NcclLogFindings, SocketWhereInfinibandIsDisabled)
{
    // NCCL 2.18.3 with NCCL_IB_DISABLE=1 on nodes whose socket interface is IP over InfiniBand.
    constexpr std::string_view log = R"(nodeA:81001:81001 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
nodeA:81001:81001 [0] NCCL INFO NET/Socket : Using [0]ib0:10.10.0.1<0> [1]eth0:192.168.10.1<0>
nodeA:81001:81001 [0] NCCL INFO Using network Socket
NCCL version 2.18.3+cuda12.2
nodeB:82001:82001 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
nodeB:82001:82001 [0] NCCL INFO NET/Socket : Using [0]ib0:10.10.0.2<0> [1]eth0:192.168.10.2<0>
nodeA:81001:81050 [0] NCCL INFO comm 0x55f0aa001000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x2222333344445555 - Init START
nodeB:82001:82050 [0] NCCL INFO comm 0x55f0bb001000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x2222333344445555 - Init START
nodeA:81001:81050 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
nodeA:81001:81050 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/Socket/1
nodeA:81001:81050 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
nodeA:81001:81050 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/1
nodeB:82001:82050 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0
nodeB:82001:82050 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [receive] via NET/Socket/1
nodeB:82001:82050 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0
nodeB:82001:82050 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [send] via NET/Socket/1
nodeA:81001:81050 [0] NCCL INFO comm 0x55f0aa001000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x2222333344445555 - Init COMPLETE
nodeB:82001:82050 [0] NCCL INFO comm 0x55f0bb001000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x2222333344445555 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_socket_not_ib");
    EXPECT_EQ(count(a, Transport::net_socket), 8U);
    EXPECT_EQ(codes(a), (Strings{"nccl.socket_not_ib", "nccl.env_disables_transport"}));
    const auto* f = finding(a, "nccl.socket_not_ib");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::warn);
    EXPECT_EQ(f->count, 8U);
    EXPECT_EQ(f->where.str(), "finding_socket_not_ib:9");
    EXPECT_NE(f->message.find("NCCL_IB_DISABLE=1 is set (finding_socket_not_ib:1)"), std::string::npos) << f->message;
    const auto* env = finding(a, "nccl.env_disables_transport");
    ASSERT_NE(env, nullptr);
    EXPECT_EQ(env->count, 2U);
    EXPECT_NE(env->message.find("NCCL_IB_DISABLE=1"), std::string::npos) << env->message;
    expect_json_golden("finding_socket_not_ib", a);
}

TEST(NcclLogFindings, SocketWithoutAnyInfinibandIsOnlyNoted)
{
    // NCCL 2.24.3 on Ethernet-only nodes: after "No device found." NCCL still prints
    // "NET/IB : Using [RO]; OOB ..." with no device, which is no sign of InfiniBand.
    constexpr std::string_view log = R"(eth1:83001:83001 [0] NCCL INFO NCCL version 2.24.3+cuda12.6
eth1:83001:83001 [0] NCCL INFO NET/IB : No device found.
eth1:83001:83001 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:172.16.0.1<0>
eth1:83001:83001 [0] NCCL INFO NET/Socket : Using [0]eth0:172.16.0.1<0>
eth1:83001:83001 [0] NCCL INFO Using network Socket
eth2:84001:84001 [0] NCCL INFO NCCL version 2.24.3+cuda12.6
eth2:84001:84001 [0] NCCL INFO NET/IB : No device found.
eth2:84001:84001 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:172.16.0.2<0>
eth1:83001:83001 [0] NCCL INFO ncclCommInitRank comm 0x5611aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9988776655443322 - Init START
eth2:84001:84001 [0] NCCL INFO ncclCommInitRank comm 0x5611bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9988776655443322 - Init START
eth1:83001:83001 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
eth1:83001:83001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
eth2:84001:84001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0
eth2:84001:84001 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0
eth1:83001:83001 [0] NCCL INFO ncclCommInitRank comm 0x5611aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9988776655443322 - Init COMPLETE
eth2:84001:84001 [0] NCCL INFO ncclCommInitRank comm 0x5611bb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9988776655443322 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_net_socket");
    EXPECT_EQ(count(a, Transport::net_socket), 4U);
    EXPECT_EQ(codes(a), Strings{"nccl.net_socket"});
    const auto* f = finding(a, "nccl.net_socket");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::info);
    EXPECT_EQ(f->count, 4U);
    EXPECT_EQ(f->where.str(), "finding_net_socket:11");
    expect_json_golden("finding_net_socket", a);
}

TEST(NcclLogFindings, SocketNetworkOnOneNodeIsHarmless)
{
    // NCCL 2.21.5 on one node: "Using network Socket" but every connection is P2P.
    constexpr std::string_view log = R"(NCCL version 2.21.5+cuda12.4
box:85001:85001 [0] NCCL INFO NET/IB : No device found.
box:85001:85001 [0] NCCL INFO NET/Socket : Using [0]eno1:10.0.0.171<0>
box:85001:85001 [0] NCCL INFO Using network Socket
box:85001:85001 [0] NCCL INFO ncclCommInitRank comm 0x5633aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x0101010102020202 - Init START
box:85002:85002 [1] NCCL INFO ncclCommInitRank comm 0x5633bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x0101010102020202 - Init START
box:85001:85001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
box:85002:85002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM
box:85001:85001 [0] NCCL INFO ncclCommInitRank comm 0x5633aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x0101010102020202 - Init COMPLETE
box:85002:85002 [1] NCCL INFO ncclCommInitRank comm 0x5633bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x0101010102020202 - Init COMPLETE
)";
    const Analysis a = analyze(log, "near_miss_single_node_socket");
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    EXPECT_FALSE(has(a, "nccl.net_socket"));
    EXPECT_FALSE(has(a, "nccl.socket_not_ib"));
    EXPECT_EQ(codes(a), Strings{});
    expect_json_golden("near_miss_single_node_socket", a);
}

TEST(NcclLogFindings, InfinibandWithGpuDirectIsQuiet)
{
    const Analysis a = analyze(v2_19_log, "near_miss_gdr");
    EXPECT_GT(count(a, Transport::net_ib_gdr), 0U);
    EXPECT_FALSE(has(a, "nccl.ib_without_gdr"));
    const Analysis b = analyze(ibext_log, "ib_no_gdr");
    EXPECT_TRUE(has(b, "nccl.ib_without_gdr"));
}

TEST(NcclLogFindings, P2pIndirect)
{
    // NCCL 2.19.3 on a hybrid cube-mesh: GPUs 0 and 2 have no NVLink, so the p2p (send/recv)
    // connections made after init relay through GPU 1 and GPU 3.
    constexpr std::string_view log = R"(NCCL version 2.19.3+cuda12.3
dgx1:91001:91001 [0] NCCL INFO comm 0x55c0aa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 6000 commId 0x3141592653589793 - Init START
dgx1:91002:91002 [1] NCCL INFO comm 0x55c0bb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 7000 commId 0x3141592653589793 - Init START
dgx1:91003:91003 [2] NCCL INFO comm 0x55c0cc000000 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId a000 commId 0x3141592653589793 - Init START
dgx1:91004:91004 [3] NCCL INFO comm 0x55c0dd000000 rank 3 nranks 4 cudaDev 3 nvmlDev 3 busId b000 commId 0x3141592653589793 - Init START
dgx1:91001:91001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
dgx1:91002:91002 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/IPC/read
dgx1:91003:91003 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/IPC/read
dgx1:91004:91004 [3] NCCL INFO Channel 00/0 : 3[3] -> 0[0] via P2P/IPC/read
dgx1:91001:91001 [0] NCCL INFO comm 0x55c0aa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 6000 commId 0x3141592653589793 - Init COMPLETE
dgx1:91002:91002 [1] NCCL INFO comm 0x55c0bb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 7000 commId 0x3141592653589793 - Init COMPLETE
dgx1:91003:91003 [2] NCCL INFO comm 0x55c0cc000000 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId a000 commId 0x3141592653589793 - Init COMPLETE
dgx1:91004:91004 [3] NCCL INFO comm 0x55c0dd000000 rank 3 nranks 4 cudaDev 3 nvmlDev 3 busId b000 commId 0x3141592653589793 - Init COMPLETE
dgx1:91001:91120 [0] NCCL INFO Channel 00/1 : 0[0] -> 2[2] via P2P/indirect/1[1]
dgx1:91003:91122 [2] NCCL INFO Channel 00/1 : 2[2] -> 0[0] via P2P/indirect/3[3]
)";
    const Analysis a = analyze(log, "finding_p2p_indirect");
    EXPECT_EQ(count(a, Transport::p2p), 6U);
    ASSERT_EQ(a.communicators.size(), 1U);
    ASSERT_NE(link(a.communicators[0], "dgx1", "dgx1"), nullptr);
    EXPECT_EQ(link(a.communicators[0], "dgx1", "dgx1")->paths.at("P2P/indirect/1[1]"), 1U);
    EXPECT_EQ(codes(a), Strings{"nccl.p2p_indirect"});
    const auto* f = finding(a, "nccl.p2p_indirect");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::info);
    EXPECT_EQ(f->count, 2U);
    EXPECT_EQ(f->where.str(), "finding_p2p_indirect:14");
    expect_json_golden("finding_p2p_indirect", a);
}

TEST(NcclLogFindings, EnvironmentThatTurnsTransportsOff)
{
    // NCCL 2.21.5: NVLS and SHM turned off; P2P level NVL and IB_DISABLE=0 turn nothing off.
    constexpr std::string_view log = R"(NCCL version 2.21.5+cuda12.4
h1:86001:86001 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.
h1:86001:86001 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.
h1:86001:86001 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL
h1:86001:86001 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.
h1:86001:86001 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
h1:86001:86001 [0] NCCL INFO ncclCommInitRank comm 0x5644aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x0a0b0c0d0e0f1011 - Init START
h1:86002:86002 [1] NCCL INFO ncclCommInitRank comm 0x5644bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x0a0b0c0d0e0f1011 - Init START
h1:86001:86001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h1:86002:86002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
h1:86001:86001 [0] NCCL INFO ncclCommInitRank comm 0x5644aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x0a0b0c0d0e0f1011 - Init COMPLETE
h1:86002:86002 [1] NCCL INFO ncclCommInitRank comm 0x5644bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x0a0b0c0d0e0f1011 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_env_disables");
    EXPECT_EQ(codes(a), (Strings{"nccl.env_disables_transport", "nccl.env_disables_transport"}));
    ASSERT_EQ(a.findings.size(), 2U);
    EXPECT_NE(a.findings[0].message.find("NCCL_NVLS_ENABLE=0"), std::string::npos) << a.findings[0].message;
    EXPECT_EQ(a.findings[0].where.str(), "finding_env_disables:2");
    EXPECT_NE(a.findings[1].message.find("NCCL_SHM_DISABLE=1"), std::string::npos) << a.findings[1].message;
    EXPECT_EQ(a.findings[1].where.str(), "finding_env_disables:3");
    expect_json_golden("finding_env_disables", a);
}

TEST(NcclLogFindings, WarnRecordsGroupedByKind)
{
    // NCCL 2.18.3 on one node running out of memory, with a plugin WARN of its own location form.
    constexpr std::string_view log = R"(NCCL version 2.18.3+cuda12.2
node1:5001:5001 [0] NCCL INFO comm 0x5655aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x4444555566667777 - Init START
node1:5002:5002 [1] NCCL INFO comm 0x5655bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x4444555566667777 - Init START
node1:5001:5001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
node1:5002:5002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC
node1:5001:5001 [0] NCCL INFO comm 0x5655aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x4444555566667777 - Init COMPLETE
node1:5002:5002 [1] NCCL INFO comm 0x5655bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x4444555566667777 - Init COMPLETE

node1:5001:5001 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'
node1:5001:5001 [0] NCCL INFO include/alloc.h:56 -> 1

node1:5002:5002 [1] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'

node1:5001:5040 [0] transport/net_ib.cc:444 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory

node1:5002:5060 [1] proxy.cc:1519 NCCL WARN [Proxy Service 1] Failed to execute operation Connect from rank 1, retcode 3

node1:5001:5070 [0] process_err_completion:1723 NCCL WARN NET/OFI Operation with NULL context completed with error
)";
    const Analysis a = analyze(log, "finding_warn_groups");
    ASSERT_EQ(a.warnings.size(), 4U);
    EXPECT_EQ(a.warnings[0].kind, "Cuda failure 'out of memory'");
    EXPECT_EQ(a.warnings[0].count, 2U);
    EXPECT_EQ(a.warnings[0].where.str(), "finding_warn_groups:9");
    EXPECT_EQ(a.warnings[1].kind, "Call to ibv_reg_mr failed");
    EXPECT_EQ(a.warnings[1].where.str(), "finding_warn_groups:14");
    EXPECT_EQ(a.warnings[2].count, 1U);
    EXPECT_EQ(a.warnings[2].where.str(), "finding_warn_groups:16");
    EXPECT_EQ(a.warnings[3].kind, "NET/OFI error");
    EXPECT_EQ(a.warnings[3].where.str(), "finding_warn_groups:18");
    EXPECT_EQ(codes(a), (Strings{"nccl.warn", "nccl.warn", "nccl.warn", "nccl.warn"}));
    EXPECT_EQ(a.findings[0].count, 2U);
    EXPECT_EQ(a.findings[0].where.str(), "finding_warn_groups:9");
    expect_json_golden("finding_warn_groups", a);
}

/// A short healthy 2.21.5 init of two ranks on one node, for cases about what comes after it.
constexpr std::string_view healthy_init = R"(NCCL version 2.21.5+cuda12.4
trn1:7001:7001 [0] NCCL INFO ncclCommInitRank comm 0x5677aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5555666677778888 - Init START
trn1:7002:7002 [1] NCCL INFO ncclCommInitRank comm 0x5677bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x5555666677778888 - Init START
trn1:7001:7001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
trn1:7002:7002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
trn1:7001:7001 [0] NCCL INFO ncclCommInitRank comm 0x5677aa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5555666677778888 - Init COMPLETE
trn1:7002:7002 [1] NCCL INFO ncclCommInitRank comm 0x5677bb000000 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x5555666677778888 - Init COMPLETE
)";

TEST(NcclLogFindings, HealthyInitIsQuiet)
{
    const Analysis a = analyze(healthy_init, "near_miss_healthy");
    EXPECT_EQ(count(a, Transport::p2p), 2U);
    EXPECT_EQ(codes(a), Strings{}) << "no init_incomplete, no version_mismatch, no no_connections";
}

TEST(NcclLogFindings, WatchdogTimeout)
{
    // PyTorch 2.4+: "[rankN]:[E... ProcessGroupNCCL.cpp:607] [Rank N] Watchdog caught ...".
    std::string log(healthy_init);
    log +=
        R"([rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.
[rank1]:[E321 02:07:08.409122051 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600051 milliseconds before timing out.
[rank0]:[E321 02:07:08.410000000 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
[rank0]:[E321 02:07:08.410100000 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
)";
    const Analysis a = analyze(log, "finding_watchdog");
    EXPECT_EQ(codes(a), Strings{"nccl.watchdog_timeout"});
    const auto* f = finding(a, "nccl.watchdog_timeout");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::fail);
    EXPECT_EQ(f->count, 2U);
    EXPECT_EQ(f->where.str(), "finding_watchdog:8");
    EXPECT_NE(
        f->message.find("ALLREDUCE (SeqNum 1580) after 600043 ms (timeout 600000 ms) on 2 ranks"), std::string::npos)
        << f->message;
    expect_json_golden("finding_watchdog", a);

    // PyTorch <= 1.13 (no rank tag, no Numel fields), and a viewer's line numbers in front.
    std::string old(healthy_init);
    old +=
        R"([E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1806794 milliseconds before timing out.
[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=4, NumelOut=4, Timeout(ms)=1800000) ran for 1806800 milliseconds before timing out.
)";
    const Analysis b = analyze(old, "finding_watchdog_old");
    const auto* g = finding(b, "nccl.watchdog_timeout");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->count, 2U);
    EXPECT_NE(
        g->message.find("BROADCAST (SeqNum 3) after 1806794 ms (timeout 1800000 ms) on 2 ranks"), std::string::npos)
        << g->message;
}

TEST(NcclLogFindings, CommError)
{
    std::string log(healthy_init);
    log += R"(Traceback (most recent call last):
  File "train.py", line 42, in <module>
    dist.all_reduce(t)
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
socketStartConnect: Connect to 10.0.0.2<45231> failed : Software caused connection abort
)";
    const Analysis a = analyze(log, "finding_comm_error");
    EXPECT_EQ(codes(a), Strings{"nccl.comm_error"});
    const auto* f = finding(a, "nccl.comm_error");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::fail);
    EXPECT_EQ(f->count, 1U);
    EXPECT_EQ(f->where.str(), "finding_comm_error:11");
    EXPECT_NE(f->message.find("unhandled system error (run with NCCL_DEBUG=INFO for details)"), std::string::npos)
        << f->message;
    EXPECT_EQ(f->message.find("NCCL version"), std::string::npos) << f->message;
    expect_json_golden("finding_comm_error", a);
}

TEST(NcclLogFindings, InitIncomplete)
{
    // NCCL 2.19.3: the ranks on nodeB start but never complete (their bootstrap connect fails).
    constexpr std::string_view log = R"(NCCL version 2.19.3+cuda12.3
nodeA:17001:17001 [0] NCCL INFO comm 0x5688aa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6666777788889999 - Init START
nodeA:17002:17002 [1] NCCL INFO comm 0x5688bb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x6666777788889999 - Init START
nodeB:18001:18001 [0] NCCL INFO comm 0x5699aa000000 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6666777788889999 - Init START
nodeB:18002:18002 [1] NCCL INFO comm 0x5699bb000000 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x6666777788889999 - Init START
nodeA:17001:17001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
nodeA:17002:17002 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read

nodeB:18001:18001 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.11.0.1<51234> failed : Connection timed out
nodeB:18001:18001 [0] NCCL INFO misc/socket.cc:567 -> 2
nodeA:17001:17001 [0] NCCL INFO comm 0x5688aa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6666777788889999 - Init COMPLETE
nodeA:17002:17002 [1] NCCL INFO comm 0x5688bb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x6666777788889999 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_init_incomplete");
    EXPECT_EQ(a.processes, 4U);
    EXPECT_EQ(a.processes_init_complete, 2U);
    EXPECT_EQ(codes(a), (Strings{"nccl.init_incomplete", "nccl.warn"}));
    const auto* f = finding(a, "nccl.init_incomplete");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->count, 2U);
    EXPECT_EQ(f->where.str(), "finding_init_incomplete:4");
    EXPECT_NE(f->message.find("rank 2 (nodeB:18001), rank 3 (nodeB:18002)"), std::string::npos) << f->message;
    ASSERT_EQ(a.communicators.size(), 1U);
    EXPECT_FALSE(a.communicators[0].ranks[2].init_complete);
    EXPECT_TRUE(a.communicators[0].ranks[1].init_complete);
    EXPECT_EQ(a.warnings[0].kind, "socket connect failed");
    expect_json_golden("finding_init_incomplete", a);
}

TEST(NcclLogFindings, VersionMismatch)
{
    // One communicator (same commId) whose two processes load different NCCL builds.
    constexpr std::string_view log = R"(nodeA:19001:19001 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
nodeB:19501:19501 [0] NCCL INFO NCCL version 2.22.3+cuda12.4
nodeA:19001:19001 [0] NCCL INFO ncclCommInitRank comm 0x56aaaa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x7777888899990000 - Init START
nodeB:19501:19501 [0] NCCL INFO ncclCommInitRank comm 0x56aabb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x7777888899990000 - Init START
nodeA:19001:19001 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
nodeB:19501:19501 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA
nodeA:19001:19001 [0] NCCL INFO ncclCommInitRank comm 0x56aaaa000000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x7777888899990000 - Init COMPLETE
nodeB:19501:19501 [0] NCCL INFO ncclCommInitRank comm 0x56aabb000000 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x7777888899990000 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_version_mismatch");
    EXPECT_EQ(a.nccl_versions, (Strings{"2.22.3+cuda12.4", "2.23.4+cuda12.6"}));
    ASSERT_EQ(a.communicators.size(), 1U);
    EXPECT_EQ(a.communicators[0].versions, (Strings{"2.22.3+cuda12.4", "2.23.4+cuda12.6"}));
    EXPECT_EQ(codes(a), Strings{"nccl.version_mismatch"});
    const auto* f = finding(a, "nccl.version_mismatch");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, nccl::Severity::fail);
    EXPECT_EQ(f->where.str(), "finding_version_mismatch:3");
    EXPECT_EQ(f->message, "communicator 0x7777888899990000 mixes NCCL 2.22.3+cuda12.4, 2.23.4+cuda12.6");
    expect_json_golden("finding_version_mismatch", a);
}

TEST(NcclLogFindings, TwoJobsWithTwoVersionsAreNoMismatch)
{
    // Logs of two separate jobs read together: each communicator runs one version.
    nccl::Analyzer analyzer;
    analyzer.read_text(healthy_init, "job1.log");
    analyzer.read_text(plain_log, "job2.log");
    const Analysis a = analyzer.analysis();
    EXPECT_EQ(a.nccl_versions, (Strings{"2.21.5+cuda12.4", "2.23.4+cuda12.6"}));
    ASSERT_EQ(a.communicators.size(), 2U);
    EXPECT_LE(a.communicators[0].versions.size(), 1U);
    EXPECT_EQ(a.communicators[1].versions, Strings{"2.23.4+cuda12.6"});
    EXPECT_FALSE(has(a, "nccl.version_mismatch"));
}

TEST(NcclLogFindings, RingCrossesNodes)
{
    // NCCL 2.18.3, 2 nodes x 2 GPUs with a ring forced through NCCL_GRAPH_FILE: 0 2 1 3 leaves and
    // re-enters each node twice.
    constexpr std::string_view log = R"(NCCL version 2.18.3+cuda12.2
nodeA:23001:23001 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /etc/nccl/graph.xml
nodeA:23001:23001 [0] NCCL INFO comm 0x56bbaa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1212343456567878 - Init START
nodeA:23002:23002 [1] NCCL INFO comm 0x56bbbb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x1212343456567878 - Init START
nodeB:24001:24001 [0] NCCL INFO comm 0x56ccaa000000 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1212343456567878 - Init START
nodeB:24002:24002 [1] NCCL INFO comm 0x56ccbb000000 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x1212343456567878 - Init START
nodeA:23001:23001 [0] NCCL INFO Channel 00/01 :    0   2   1   3
nodeA:23001:23001 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
nodeA:23001:23001 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0/GDRDMA
nodeA:23002:23002 [1] NCCL INFO Channel 00/0 : 2[0] -> 1[1] [receive] via NET/IB/1/GDRDMA
nodeA:23002:23002 [1] NCCL INFO Channel 00/0 : 1[1] -> 3[1] [send] via NET/IB/1/GDRDMA
nodeB:24001:24001 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [receive] via NET/IB/0/GDRDMA
nodeB:24001:24001 [0] NCCL INFO Channel 00/0 : 2[0] -> 1[1] [send] via NET/IB/0/GDRDMA
nodeB:24002:24002 [1] NCCL INFO Channel 00/0 : 1[1] -> 3[1] [receive] via NET/IB/1/GDRDMA
nodeB:24002:24002 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/1/GDRDMA
nodeA:23001:23001 [0] NCCL INFO comm 0x56bbaa000000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1212343456567878 - Init COMPLETE
nodeA:23002:23002 [1] NCCL INFO comm 0x56bbbb000000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x1212343456567878 - Init COMPLETE
nodeB:24001:24001 [0] NCCL INFO comm 0x56ccaa000000 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1212343456567878 - Init COMPLETE
nodeB:24002:24002 [1] NCCL INFO comm 0x56ccbb000000 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x1212343456567878 - Init COMPLETE
)";
    const Analysis a = analyze(log, "finding_ring_crosses");
    EXPECT_EQ(count(a, Transport::net_ib_gdr), 8U);
    EXPECT_EQ(codes(a), Strings{"nccl.ring_crosses_nodes"});
    const auto* f = finding(a, "nccl.ring_crosses_nodes");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->where.str(), "finding_ring_crosses:7");
    EXPECT_NE(f->message.find("crosses between its 2 hosts 4 times (the least is 2)"), std::string::npos) << f->message;
    expect_json_golden("finding_ring_crosses", a);

    // The same nodes with the ring 0 1 2 3 cross twice, the least there is.
    const Analysis b = analyze(v2_19_log, "near_miss_ring");
    EXPECT_FALSE(has(b, "nccl.ring_crosses_nodes"));
}

TEST(NcclLogFindings, NoConnections)
{
    constexpr std::string_view app_only = R"(Epoch 1/10
loss: 2.3025 - accuracy: 0.1013
Epoch 2/10
)";
    const Analysis a = analyze(app_only, "finding_no_records");
    EXPECT_EQ(a.records, 0U);
    EXPECT_EQ(codes(a), Strings{"nccl.no_connections"});
    EXPECT_EQ(a.findings[0].message, "no NCCL records in finding_no_records (3 lines)");
    EXPECT_FALSE(a.findings[0].where.known());
    expect_json_golden("finding_no_records", a);

    // NCCL_DEBUG_SUBSYS=COLL: records, but no connection lines.
    constexpr std::string_view coll_only = R"(NCCL version 2.21.5+cuda12.4
trn1:7001:7001 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f5a40000000 recvbuff 0x7f5a40000000 count 1 datatype 7 op 0 root 0 comm 0x5677aa000000 [nranks=2] stream 0x5677cc000000
trn1:7002:7002 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f1b80000000 recvbuff 0x7f1b80000000 count 1 datatype 7 op 0 root 0 comm 0x5677bb000000 [nranks=2] stream 0x5677dd000000
)";
    const Analysis b = analyze(coll_only, "finding_no_connections");
    EXPECT_EQ(b.records, 2U);
    EXPECT_EQ(codes(b), Strings{"nccl.no_connections"});
    EXPECT_NE(b.findings[0].message.find("2 NCCL records but no connection lines"), std::string::npos)
        << b.findings[0].message;
    expect_json_golden("finding_no_connections", b);
}

// ---------------------------------------------------------------------------------------------
// Input handling: files, gzip, very long lines, positions.

TEST(NcclLogInput, MissingFileThrows)
{
    TempDir dir;
    nccl::Analyzer analyzer;
    EXPECT_THROW(analyzer.read_file((dir / "missing.log").string()), base::Error);
    try {
        analyzer.read_file((dir / "missing.log").string());
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("missing.log"), std::string::npos) << e.what();
    }
}

TEST(NcclLogInput, FilesOfADirectoryAreLogsByNameOrContent)
{
    TempDir dir;
    const std::string record = "n1:10:10 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n";
    const auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir / name, std::ios::binary) << text;
        return (dir / name).string();
    };
    // By name, whatever they hold.
    for (const char* name : {"rank0.log", "slurm-42.out", "rank0.err", "nccl.txt", "ALL.LOG", "train.log.1", "a.gz"}) {
        EXPECT_TRUE(nccl::looks_like_log(write(name, "epoch 1\n"))) << name;
    }
    // Documents and data are not, even when they quote NCCL lines.
    for (const char* name : {"README.md", "README", "readme.txt", "LICENSE", "report.json", "slurm.yaml", "run.py"}) {
        EXPECT_FALSE(nccl::looks_like_log(write(name, record))) << name;
    }
    // A name that tells nothing: an NCCL record in the first 64 KiB, or gzip data.
    EXPECT_TRUE(nccl::looks_like_log(write("nccl.n1.10", "training starts\n" + record)));
    EXPECT_TRUE(nccl::looks_like_log(write("job.1234", std::string("\x1f\x8b\x08\x00", 4))));
    EXPECT_FALSE(nccl::looks_like_log(write("notes", "rerun after the driver update\n")));
    EXPECT_FALSE(nccl::looks_like_log(write("late", std::string(70 << 10, 'x') + "\n" + record)))
        << "only the first 64 KiB are looked at";
}

TEST(NcclLogInput, FileReadsLikeText)
{
    TempDir dir;
    write_binary(dir / "plain.log", plain_log);
    nccl::Analyzer analyzer;
    analyzer.read_file((dir / "plain.log").string());
    const Analysis a = analyzer.analysis();
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "file"));
    EXPECT_EQ(a.inputs, Strings{(dir / "plain.log").string()});
    EXPECT_EQ(a.lines, 17U);
    EXPECT_EQ(a.warnings[0].where.str(), (dir / "plain.log").string() + ":16");
}

TEST(NcclLogInput, GzipReadsLikeThePlainFile)
{
    TempDir dir;
    const auto gz = dir / "nccl.log.gz";
    write_gzip(gz, plain_log);
    nccl::Analyzer analyzer;
    analyzer.read_file(gz.string());
    const Analysis a = analyzer.analysis();
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "gzip"));
    EXPECT_EQ(a.lines, 17U);
    EXPECT_EQ(a.warnings[0].where.str(), gz.string() + ":16");
    EXPECT_EQ(a.communicators[0].ranks[1].where.str(), gz.string() + ":7");
}

TEST(NcclLogInput, ConcatenatedGzipMembers)
{
    // `cat part1.gz part2.gz`, split in the middle of a line.
    TempDir dir;
    const std::size_t cut = plain_log.find("Channel 00/0 : 0[0] -> 1[0] [send]") + 10;
    write_gzip(dir / "part1.gz", plain_log.substr(0, cut));
    write_gzip(dir / "part2.gz", plain_log.substr(cut));
    const auto both = dir / "both.log.gz";
    write_binary(both, read_binary(dir / "part1.gz") + read_binary(dir / "part2.gz"));
    nccl::Analyzer analyzer;
    analyzer.read_file(both.string());
    const Analysis a = analyzer.analysis();
    ASSERT_NO_FATAL_FAILURE(expect_plain_report(a, "two members"));
    EXPECT_EQ(a.lines, 17U);
    EXPECT_EQ(a.warnings[0].where.str(), both.string() + ":16");
}

TEST(NcclLogInput, CorruptOrTruncatedGzipThrows)
{
    TempDir dir;
    // Enough text that the compressed stream is long.
    std::string text;
    for (int i = 0; i < 200; ++i) {
        text += plain_log;
    }
    write_gzip(dir / "good.gz", text);
    const std::string good = read_binary(dir / "good.gz");
    ASSERT_GT(good.size(), 200U);

    std::string corrupt = good;
    for (std::size_t i = good.size() / 3; i < good.size() / 3 + 16; ++i) {
        corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    }
    write_binary(dir / "corrupt.gz", corrupt);
    write_binary(dir / "truncated.gz", std::string_view(good).substr(0, good.size() / 2));
    std::string bad_crc = good;
    bad_crc[bad_crc.size() - 6] = static_cast<char>(bad_crc[bad_crc.size() - 6] ^ 0xff);
    write_binary(dir / "bad_crc.gz", bad_crc);

    for (const char* name : {"corrupt.gz", "truncated.gz", "bad_crc.gz"}) {
        nccl::Analyzer analyzer;
        EXPECT_THROW(analyzer.read_file((dir / name).string()), base::Error) << name;
    }
}

namespace {

/// plain_log with a line of `size` bytes after its third line; `nccl_prefix` starts that line with
/// an NCCL record.
std::string with_long_line(std::size_t size, bool nccl_prefix)
{
    std::string line = nccl_prefix ? "n1:101:101 [0] NCCL INFO Dumping topology: " : "garbage: ";
    line.resize(size, 'x');
    const std::size_t third = plain_log.find('\n', plain_log.find('\n', plain_log.find('\n') + 1) + 1) + 1;
    return std::string(plain_log.substr(0, third)) + line + "\n" + std::string(plain_log.substr(third));
}

} // namespace

TEST(NcclLogInput, LineLongerThanOneMebibyteDoesNotBreakTheLinesAfterIt)
{
    TempDir dir;
    for (const bool nccl_prefix : {false, true}) {
        for (const std::size_t size : {std::size_t{3} << 20, (std::size_t{1} << 20) + 1, std::size_t{1} << 20}) {
            SCOPED_TRACE(std::to_string(size) + (nccl_prefix ? " with NCCL prefix" : ""));
            const std::string text = with_long_line(size, nccl_prefix);
            const Analysis a = analyze(text, "long");
            expect_plain_report(a, "text", nccl_prefix ? 1 : 0);
            EXPECT_EQ(a.lines, 18U);
            EXPECT_EQ(a.warnings[0].where.str(), "long:17");

            const auto file = dir / "long.log";
            write_binary(file, text);
            nccl::Analyzer analyzer;
            analyzer.read_file(file.string());
            const Analysis b = analyzer.analysis();
            expect_plain_report(b, "file", nccl_prefix ? 1 : 0);
            EXPECT_EQ(b.lines, 18U);
            EXPECT_EQ(b.warnings[0].where.str(), file.string() + ":17");
        }
    }
}

TEST(NcclLogInput, AMappedFileReadsLikeAPipe)
{
    // Several blocks, with a line longer than a block (cut) and lines across block ends: a
    // regular file is read through mapped windows, a FIFO with read(); the analyses are the same.
    std::string text;
    while (text.size() < (std::size_t{9} << 20)) {
        text += text.size() == 0 ? with_long_line(std::size_t{5} << 20, true) : std::string(plain_log);
        text += "epoch done " + std::to_string(text.size()) + "\n";
    }
    TempDir dir;
    write_binary(dir / "nccl.log", text);
    const auto fifo = dir / "fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] { write_binary(fifo, text); });
    nccl::Analyzer piped;
    piped.read_file(fifo.string(), "nccl.log");
    writer.join();
    nccl::Analyzer mapped;
    mapped.read_file((dir / "nccl.log").string(), "nccl.log");
    const Analysis a = mapped.analysis();
    EXPECT_EQ(a.lines, static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n')));
    EXPECT_GT(a.records, 100U);
    EXPECT_EQ(nccl::render_json(a), nccl::render_json(piped.analysis()));
}

TEST(NcclLogInput, WhereNamesTheInputAndItsLine)
{
    nccl::Analyzer analyzer;
    analyzer.read_text(healthy_init, "rank0.log");
    analyzer.read_text(
        "\n\nnode1:5001:5001 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\n", "rank1.log");
    const Analysis a = analyzer.analysis();
    EXPECT_EQ(a.inputs, (Strings{"rank0.log", "rank1.log"}));
    EXPECT_EQ(a.lines, 10U);
    ASSERT_EQ(a.warnings.size(), 1U);
    EXPECT_EQ(a.warnings[0].where.str(), "rank1.log:3");
    EXPECT_EQ(a.communicators[0].first.str(), "rank0.log:2");
    EXPECT_EQ(a.communicators[0].ranks[1].where.str(), "rank0.log:3");
    const auto* warn = finding(a, "nccl.warn");
    ASSERT_NE(warn, nullptr);
    EXPECT_EQ(warn->where.file, "rank1.log");
    EXPECT_EQ(warn->where.line, 3U);
}

// ---------------------------------------------------------------------------------------------
// Limits: what one analysis keeps is bounded; past a limit, lines are left out, counted and said.

namespace {

std::string version_line(const std::string& host, long pid)
{
    return fmt::format("{}:{}:{} [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n", host, pid, pid);
}

std::string init_line(long pid, int rank, int nranks, const std::string& comm_id)
{
    return fmt::format("n01:{}:{} [0] NCCL INFO ncclCommInitRank comm 0x5555aaaa0000 rank {} nranks {} cudaDev 0 "
                       "nvmlDev 0 busId 10000{} - Init COMPLETE\n",
        pid, pid, rank, nranks, comm_id.empty() ? "" : " commId " + comm_id);
}

// 20000 as "20,000".
std::string grouped(std::size_t n)
{
    std::string digits = std::to_string(n);
    for (std::size_t at = digits.size(); at > 3; at -= 3) {
        digits.insert(at - 3, ",");
    }
    return digits;
}

Analysis analyze_within(std::string_view text, const nccl::Limits& limits)
{
    nccl::Analyzer analyzer(limits);
    analyzer.read_text(text, "big.log");
    return analyzer.analysis();
}

} // namespace

TEST(NcclLogLimits, HostsPastTheLimitAreLeftOutAndSaid)
{
    std::string log;
    for (int i = 0; i < 6; ++i) {
        log += version_line(fmt::format("h{}", i), 100);
    }
    nccl::Limits limits;
    limits.hosts = 3;
    const Analysis a = analyze_within(log, limits);
    EXPECT_EQ(a.hosts, 3U);
    EXPECT_EQ(a.records, 6U);
    EXPECT_EQ(a.records_left_out, 3U);
    const auto* f = finding(a, "nccl.truncated");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, base::Severity::warn);
    EXPECT_EQ(f->message,
        "the analysis is incomplete: 3 lines past its limits were left out (3 records from hosts past the first 3)");
    EXPECT_EQ(f->facts, (nlohmann::json{{"hosts", {{"left_out", 3}, {"limit", 3}}}}));
    EXPECT_EQ(f->count, 3U);
    const auto json = nccl::render_json(a);
    EXPECT_EQ(json["findings"][0]["code"], "nccl.truncated") << "a warning, first of the warnings";
    EXPECT_NE(nccl::render_text(a).find("[nccl.truncated]"), std::string::npos);
    EXPECT_NE(nccl::render_verdict(a).find("[nccl.truncated]"), std::string::npos);

    EXPECT_FALSE(has(analyze_within(log, nccl::Limits()), "nccl.truncated")) << "within the default limits";
}

TEST(NcclLogLimits, ProcessesThreadsAndRanksPastTheLimits)
{
    std::string log;
    for (long pid = 1; pid <= 5; ++pid) {
        log += version_line("n01", pid);
    }
    nccl::Limits processes;
    processes.processes = 2;
    Analysis a = analyze_within(log, processes);
    EXPECT_EQ(a.processes, 2U);
    EXPECT_EQ(a.records_left_out, 3U);

    // One process, many threads.
    std::string threads_log;
    for (int tid = 1; tid <= 5; ++tid) {
        threads_log += fmt::format("n01:7:{} [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n", tid);
    }
    nccl::Limits threads;
    threads.threads = 4;
    a = analyze_within(threads_log, threads);
    EXPECT_EQ(a.records_left_out, 1U);
    EXPECT_EQ(finding(a, "nccl.truncated")->facts, (nlohmann::json{{"threads", {{"left_out", 1}, {"limit", 4}}}}));

    // Ranks: (host, pid, cudaDev) of Init lines, and the ranks of all communicators together.
    std::string inits;
    for (int rank = 0; rank < 6; ++rank) {
        inits += init_line(100 + rank, rank, 6, "0xabc");
    }
    nccl::Limits ranks;
    ranks.ranks = 4;
    a = analyze_within(inits, ranks);
    EXPECT_EQ(a.ranks, 4U);
    ASSERT_EQ(a.communicators.size(), 1U);
    EXPECT_EQ(a.communicators[0].ranks.size(), 4U);
    EXPECT_EQ(finding(a, "nccl.truncated")->facts, (nlohmann::json{{"ranks", {{"left_out", 2}, {"limit", 4}}}}));
    nccl::Limits comm_ranks;
    comm_ranks.communicator_ranks = 5;
    a = analyze_within(inits, comm_ranks);
    EXPECT_EQ(a.communicators[0].ranks.size(), 5U);
    EXPECT_EQ(finding(a, "nccl.truncated")->message,
        "the analysis is incomplete: 1 line past its limits was left out (1 Init line past 5 ranks in all "
        "communicators)");
}

TEST(NcclLogLimits, CommunicatorsPastTheLimitWithAndWithoutCommId)
{
    std::string with_id;
    std::string without_id;
    for (int c = 0; c < 5; ++c) {
        with_id += init_line(100, 0, 2, fmt::format("0x{:x}", 1000 + c));
        without_id += init_line(100, 0, 2 + c, "");
    }
    nccl::Limits limits;
    limits.communicators = 2;
    for (const std::string& log : {with_id, without_id}) {
        const Analysis a = analyze_within(log, limits);
        EXPECT_EQ(a.communicators.size(), 2U) << log;
        EXPECT_EQ(a.records_left_out, 3U);
        EXPECT_EQ(
            finding(a, "nccl.truncated")->facts, (nlohmann::json{{"communicators", {{"left_out", 3}, {"limit", 2}}}}));
    }
}

TEST(NcclLogLimits, ConnectionsAndRingsPastTheLimits)
{
    std::string log = init_line(100, 0, 8, "0xabc");
    log.replace(log.find("Init COMPLETE"), 13, "Init START");
    for (int peer = 1; peer < 5; ++peer) {
        log += fmt::format("n01:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> {}[{}] via P2P/CUMEM/read\n", peer, peer);
    }
    log += "n01:100:100 [0] NCCL INFO Channel 00/02 : 0 1 2 3 4 5 6 7\n";
    log += "n01:100:100 [0] NCCL INFO Channel 01/02 : 0 2 1 3 4 5 6 7\n";
    nccl::Limits limits;
    limits.connections = 2;
    limits.ring_ranks = 10;
    const Analysis a = analyze_within(log, limits);
    EXPECT_EQ(a.connections, 2U) << "lines left out are not counted";
    EXPECT_EQ(a.communicators.at(0).connections, 2U);
    EXPECT_EQ(finding(a, "nccl.truncated")->facts,
        (nlohmann::json{
            {"connections", {{"left_out", 2}, {"limit", 2}}}, {"ring_ranks", {{"left_out", 1}, {"limit", 10}}}}));
    EXPECT_EQ(analyze_within(log, nccl::Limits()).connections, 4U);
}

TEST(NcclLogLimits, TheDefaultLimitsHoldOnAGeneratedLog)
{
    // 10,001 communicators on host n01, then 20,000 hosts more, written without a small limit.
    const nccl::Limits defaults;
    std::string log;
    for (std::size_t c = 0; c <= defaults.communicators; ++c) {
        log += init_line(100, 0, 2, fmt::format("0x{:x}", 4096 + c));
    }
    for (std::size_t i = 1; i <= defaults.hosts; ++i) {
        log += version_line(fmt::format("node{}", i), 1);
    }
    const Analysis a = analyze(log, "big.log");
    EXPECT_EQ(a.hosts, 20000U);
    EXPECT_EQ(a.communicators.size(), 10000U);
    EXPECT_EQ(a.records_left_out, 2U);
    EXPECT_EQ(finding(a, "nccl.truncated")->message,
        "the analysis is incomplete: 2 lines past its limits were left out (1 record from hosts past the first "
        "20000; 1 Init line of communicators past the first 10000)");

    // The explanation states the defaults.
    const auto& codes = nccl::finding_codes();
    const auto row = std::find_if(
        codes.begin(), codes.end(), [](const base::FindingCode& c) { return std::string(c.code) == "nccl.truncated"; });
    ASSERT_NE(row, codes.end());
    const std::string explanation = row->explanation;
    for (const std::string& said :
        {grouped(defaults.hosts) + " hosts", grouped(defaults.processes) + " processes and ranks",
            grouped(defaults.threads) + " threads", grouped(defaults.communicators) + " communicators",
            grouped(defaults.communicator_ranks) + " ranks of all communicators",
            grouped(defaults.connections) + " distinct connections",
            grouped(defaults.ring_ranks) + " ranks of ring orders"}) {
        EXPECT_NE(explanation.find(said), std::string::npos) << said;
    }
    EXPECT_EQ(defaults.ranks, defaults.processes);
}

// TensorFlow's bundled NCCL 2.4 prints its banner with the CUDA version left unexpanded.
// ---------------------------------------------------------------------------------------------
// Logs of unrelated jobs read together: each job its own communicators, host pairs and findings.

namespace {

// A 4-GPU DistributedDataParallel run on one node (NCCL 2.7.8, no commId; P2P/IPC and direct
// shared memory), from https://github.com/HongxinXiang/pytorch-multi-GPU-training-tutorial
// (RUN.md at 64b8a9a8, "Run with single-machine-and-multi-GPU-DistributedDataParallel-mp.py").
constexpr std::string_view tesla_log =
    R"log(tesla-106:13395:13395 [0] NCCL INFO Bootstrap : Using [0]eno2:192.168.1.106<0>
tesla-106:13395:13395 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation

tesla-106:13395:13395 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
tesla-106:13395:13395 [0] NCCL INFO NET/Socket : Using [0]eno2:192.168.1.106<0>
tesla-106:13395:13395 [0] NCCL INFO Using network Socket
tesla-106:13398:13398 [3] NCCL INFO Bootstrap : Using [0]eno2:192.168.1.106<0>
tesla-106:13397:13397 [2] NCCL INFO Bootstrap : Using [0]eno2:192.168.1.106<0>
tesla-106:13397:13397 [2] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation

tesla-106:13397:13397 [2] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
tesla-106:13397:13397 [2] NCCL INFO NET/Socket : Using [0]eno2:192.168.1.106<0>
tesla-106:13398:13398 [3] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation

tesla-106:13397:13397 [2] NCCL INFO Using network Socket
tesla-106:13398:13398 [3] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
tesla-106:13398:13398 [3] NCCL INFO NET/Socket : Using [0]eno2:192.168.1.106<0>
tesla-106:13398:13398 [3] NCCL INFO Using network Socket
NCCL version 2.7.8+cuda10.1
tesla-106:13396:13396 [1] NCCL INFO Bootstrap : Using [0]eno2:192.168.1.106<0>
tesla-106:13396:13396 [1] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation

tesla-106:13396:13396 [1] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
tesla-106:13396:13396 [1] NCCL INFO NET/Socket : Using [0]eno2:192.168.1.106<0>
tesla-106:13396:13396 [1] NCCL INFO Using network Socket
tesla-106:13395:14211 [0] NCCL INFO Channel 00/04 :    0   1   2   3
tesla-106:13395:14211 [0] NCCL INFO Channel 01/04 :    0   3   2   1
tesla-106:13395:14211 [0] NCCL INFO Channel 02/04 :    0   1   2   3
tesla-106:13395:14211 [0] NCCL INFO Channel 03/04 :    0   3   2   1
tesla-106:13395:14211 [0] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64
tesla-106:13395:14211 [0] NCCL INFO Trees [0] 2/-1/-1->0->-1|-1->0->2/-1/-1 [1] 2/-1/-1->0->1|1->0->2/-1/-1 [2] 2/-1/-1->0->-1|-1->0->2/-1/-1 [3] 2/-1/-1->0->1|1->0->2/-1/-1
tesla-106:13395:14211 [0] NCCL INFO Setting affinity for GPU 0 to 3ff003ff
tesla-106:13398:14208 [3] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64
tesla-106:13398:14208 [3] NCCL INFO Trees [0] 1/-1/-1->3->2|2->3->1/-1/-1 [1] 1/-1/-1->3->-1|-1->3->1/-1/-1 [2] 1/-1/-1->3->2|2->3->1/-1/-1 [3] 1/-1/-1->3->-1|-1->3->1/-1/-1
tesla-106:13398:14208 [3] NCCL INFO Setting affinity for GPU 3 to ff,c00ffc00
tesla-106:13397:14207 [2] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64
tesla-106:13397:14207 [2] NCCL INFO Trees [0] 3/-1/-1->2->0|0->2->3/-1/-1 [1] -1/-1/-1->2->0|0->2->-1/-1/-1 [2] 3/-1/-1->2->0|0->2->3/-1/-1 [3] -1/-1/-1->2->0|0->2->-1/-1/-1
tesla-106:13397:14207 [2] NCCL INFO Setting affinity for GPU 2 to ff,c00ffc00
tesla-106:13396:14213 [1] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64
tesla-106:13398:14208 [3] NCCL INFO Channel 00 : 3[b1000] -> 0[18000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 00 : 2[af000] -> 3[b1000] via P2P/IPC
tesla-106:13396:14213 [1] NCCL INFO Trees [0] -1/-1/-1->1->3|3->1->-1/-1/-1 [1] 0/-1/-1->1->3|3->1->0/-1/-1 [2] -1/-1/-1->1->3|3->1->-1/-1/-1 [3] 0/-1/-1->1->3|3->1->0/-1/-1
tesla-106:13396:14213 [1] NCCL INFO Setting affinity for GPU 1 to 3ff003ff
tesla-106:13396:14213 [1] NCCL INFO Channel 00 : 1[1a000] -> 2[af000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 00 : 2[af000] -> 0[18000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 00 : 0[18000] -> 1[1a000] via P2P/IPC
tesla-106:13396:14213 [1] NCCL INFO Channel 00 : 1[1a000] -> 3[b1000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 00 : 3[b1000] -> 2[af000] via P2P/IPC
tesla-106:13398:14208 [3] NCCL INFO Channel 00 : 3[b1000] -> 1[1a000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 01 : 3[b1000] -> 2[af000] via P2P/IPC
tesla-106:13396:14213 [1] NCCL INFO Channel 01 : 1[1a000] -> 0[18000] via P2P/IPC
tesla-106:13395:14211 [0] NCCL INFO Channel 00 : 0[18000] -> 2[af000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 01 : 2[af000] -> 1[1a000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 01 : 2[af000] -> 0[18000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 01 : 0[18000] -> 3[b1000] via direct shared memory
tesla-106:13396:14213 [1] NCCL INFO Channel 01 : 1[1a000] -> 3[b1000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 01 : 3[b1000] -> 1[1a000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 01 : 0[18000] -> 1[1a000] via P2P/IPC
tesla-106:13395:14211 [0] NCCL INFO Channel 01 : 0[18000] -> 2[af000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 02 : 3[b1000] -> 0[18000] via direct shared memory
tesla-106:13396:14213 [1] NCCL INFO Channel 02 : 1[1a000] -> 2[af000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 02 : 0[18000] -> 1[1a000] via P2P/IPC
tesla-106:13397:14207 [2] NCCL INFO Channel 02 : 2[af000] -> 3[b1000] via P2P/IPC
tesla-106:13396:14213 [1] NCCL INFO Channel 02 : 1[1a000] -> 3[b1000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 02 : 2[af000] -> 0[18000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 02 : 3[b1000] -> 2[af000] via P2P/IPC
tesla-106:13398:14208 [3] NCCL INFO Channel 02 : 3[b1000] -> 1[1a000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 02 : 0[18000] -> 2[af000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 03 : 3[b1000] -> 2[af000] via P2P/IPC
tesla-106:13395:14211 [0] NCCL INFO Channel 03 : 0[18000] -> 3[b1000] via direct shared memory
tesla-106:13397:14207 [2] NCCL INFO Channel 03 : 2[af000] -> 1[1a000] via direct shared memory
tesla-106:13396:14213 [1] NCCL INFO Channel 03 : 1[1a000] -> 0[18000] via P2P/IPC
tesla-106:13397:14207 [2] NCCL INFO Channel 03 : 2[af000] -> 0[18000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO Channel 03 : 0[18000] -> 1[1a000] via P2P/IPC
tesla-106:13395:14211 [0] NCCL INFO Channel 03 : 0[18000] -> 2[af000] via direct shared memory
tesla-106:13396:14213 [1] NCCL INFO Channel 03 : 1[1a000] -> 3[b1000] via direct shared memory
tesla-106:13398:14208 [3] NCCL INFO Channel 03 : 3[b1000] -> 1[1a000] via direct shared memory
tesla-106:13395:14211 [0] NCCL INFO 4 coll channels, 4 p2p channels, 2 p2p channels per peer
tesla-106:13395:14211 [0] NCCL INFO comm 0x7fdc40001060 rank 0 nranks 4 cudaDev 0 busId 18000 - Init COMPLETE
tesla-106:13395:13395 [0] NCCL INFO Launch mode Parallel
DistributedDataParallel(
  (module): NeuralNetwork(
    (flatten): Flatten(start_dim=1, end_dim=-1)
    (linear_relu_stack): Sequential(
      (0): Linear(in_features=784, out_features=512, bias=True)
      (1): ReLU()
      (2): Linear(in_features=512, out_features=512, bias=True)
      (3): ReLU()
      (4): Linear(in_features=512, out_features=10, bias=True)
    )
  )
)
Epoch 1
-------------------------------
tesla-106:13397:14207 [2] NCCL INFO 4 coll channels, 4 p2p channels, 2 p2p channels per peer
tesla-106:13397:14207 [2] NCCL INFO comm 0x7f04c8001060 rank 2 nranks 4 cudaDev 2 busId af000 - Init COMPLETE
tesla-106:13396:14213 [1] NCCL INFO 4 coll channels, 4 p2p channels, 2 p2p channels per peer
tesla-106:13398:14208 [3] NCCL INFO 4 coll channels, 4 p2p channels, 2 p2p channels per peer
tesla-106:13398:14208 [3] NCCL INFO comm 0x7fd174001060 rank 3 nranks 4 cudaDev 3 busId b1000 - Init COMPLETE
tesla-106:13396:14213 [1] NCCL INFO comm 0x7f3330001060 rank 1 nranks 4 cudaDev 1 busId 1a000 - Init COMPLETE
)log";

// nccl-tests with -g 2 on one node (NCCL 2.15.5, one process, P2P/direct pointer, a stub CUDA
// driver), from https://github.com/NVIDIA/nccl-tests/issues/124.
constexpr std::string_view archlinux_log =
    R"log(# nThread 1 nGpus 2 minBytes 33554432 maxBytes 33554432 step: 1048576(bytes) warmup iters: 20 iters: 100 agg iters: 1 validation: 0 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6482 on    ArchLinux device  0 [0x01] NVIDIA GeForce RTX 3090
#  Rank  1 Group  0 Pid   6482 on    ArchLinux device  1 [0x09] NVIDIA GeForce RTX 3090
ArchLinux:6482:6482 [0] NCCL INFO Bootstrap : Using enp8s0:143.248.56.121<0>
ArchLinux:6482:6482 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
ArchLinux:6482:6482 [1] NCCL INFO cudaDriverVersion 12000
NCCL version 2.15.5+cuda11.8
ArchLinux:6482:6500 [0] NCCL INFO Failed to open libibverbs.so[.1]
ArchLinux:6482:6500 [0] NCCL INFO NET/Socket : Using [0]enp8s0:143.248.56.121<0> [1]br-2178a67b2ff7:172.23.0.1<0> [2]veth018915b:fe80::6832:a2ff:fe5b:c212%veth018915b<0> [3]veth2d267e7:fe80::b07e:48ff:fe46:3fe2%veth2d267e7<0> [4]veth13a831b:fe80::4036:64ff:fe56:4cd6%veth13a831b<0> [5]vethbffaff7:fe80::4c9b:4bff:fef4:30b6%vethbffaff7<0>
ArchLinux:6482:6500 [0] NCCL INFO Using network Socket
ArchLinux:6482:6501 [1] NCCL INFO Using network Socket
ArchLinux:6482:6500 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL
ArchLinux:6482:6500 [0] NCCL INFO Channel 00/04 :    0   1
ArchLinux:6482:6500 [0] NCCL INFO Channel 01/04 :    0   1
ArchLinux:6482:6500 [0] NCCL INFO Channel 02/04 :    0   1
ArchLinux:6482:6500 [0] NCCL INFO Channel 03/04 :    0   1
ArchLinux:6482:6501 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] 0/-1/-1->1->-1 [2] -1/-1/-1->1->0 [3] 0/-1/-1->1->-1
ArchLinux:6482:6500 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1 [2] 1/-1/-1->0->-1 [3] -1/-1/-1->0->1
ArchLinux:6482:6500 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[9000] via P2P/direct pointer
ArchLinux:6482:6501 [1] NCCL INFO Channel 00/0 : 1[9000] -> 0[1000] via P2P/direct pointer
ArchLinux:6482:6500 [0] NCCL INFO Channel 01/0 : 0[1000] -> 1[9000] via P2P/direct pointer
ArchLinux:6482:6500 [0] NCCL INFO Channel 02/0 : 0[1000] -> 1[9000] via P2P/direct pointer
ArchLinux:6482:6500 [0] NCCL INFO Channel 03/0 : 0[1000] -> 1[9000] via P2P/direct pointer
ArchLinux:6482:6501 [1] NCCL INFO Channel 01/0 : 1[9000] -> 0[1000] via P2P/direct pointer
ArchLinux:6482:6501 [1] NCCL INFO Channel 02/0 : 1[9000] -> 0[1000] via P2P/direct pointer
ArchLinux:6482:6501 [1] NCCL INFO Channel 03/0 : 1[9000] -> 0[1000] via P2P/direct pointer
ArchLinux:6482:6500 [0] NCCL INFO Connected all rings
ArchLinux:6482:6500 [0] NCCL INFO Connected all trees
ArchLinux:6482:6501 [1] NCCL INFO Connected all rings
ArchLinux:6482:6501 [1] NCCL INFO Connected all trees
ArchLinux:6482:6501 [1] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512
ArchLinux:6482:6501 [1] NCCL INFO 4 coll channels, 4 p2p channels, 4 p2p channels per peer
ArchLinux:6482:6500 [0] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512
ArchLinux:6482:6500 [0] NCCL INFO 4 coll channels, 4 p2p channels, 4 p2p channels per peer
ArchLinux:6482:6500 [0] NCCL INFO comm 0x55a756b3ceb0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE
ArchLinux:6482:6501 [1] NCCL INFO comm 0x55a756b3f940 rank 1 nranks 2 cudaDev 1 busId 9000 - Init COMPLETE
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       

ArchLinux:6482:6482 [0] misc/strongstream.cc:60 NCCL WARN Cuda failure 'CUDA driver is a stub library'
ArchLinux:6482:6482 [0] NCCL INFO enqueue.cc:1496 -> 1
ArchLinux:6482:6482 [0] NCCL INFO enqueue.cc:1537 -> 1
ArchLinux: Test NCCL failure all_reduce.cu:44 'unhandled cuda error / '
 .. ArchLinux pid 6482: Test failure common.cu:377
)log";

// vLLM with TP=2 on one node and NCCL_P2P_DISABLE=1 (NCCL 2.28.9, SHM, two processes writing at
// once: a line of each fused), from https://github.com/joorklee/p2p-bench (results/
// 2026-06-16_5060ti-16gb_2cards_gen3-x4_p2p-sweep-c1-2-4-8/logs/p2p_off-c1.log at 4c9b4341).
constexpr std::string_view proxmox_log =
    R"log(proxmox:1495819:1495819 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
proxmox:1495819:1495819 [0] NCCL INFO Bootstrap: Using <iface>:<redacted-ip><0>
proxmox:1495819:1495819 [0] NCCL INFO cudaDriverVersion 13020
proxmox:1495819:1495819 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
proxmox:1495819:1495819 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
proxmox:1495819:1495819 [0] NCCL INFO Failed to open libmlx5.so[.1]
proxmox:1495819:1495819 [0] NCCL INFO NET/IB : No device found.
proxmox:1495819:1495819 [0] NCCL INFO NET/IB : Using [RO]; OOB <iface>:<redacted-ip><0>
proxmox:1495819:1495819 [0] NCCL INFO Failed to initialize NET plugin IB
proxmox:1495819:1495819 [0] NCCL INFO NET/Socket : Using [0]<iface>:<redacted-ip><0> [redacted: additional host bridge interfaces]
proxmox:1495819:1495819 [0] NCCL INFO Initialized NET plugin Socket
proxmox:1495819:1495819 [0] NCCL INFO Assigned NET plugin Socket to comm
proxmox:1495819:1495819 [0] NCCL INFO Using network Socket
proxmox:1495819:1495819 [0] NCCL INFO ncclCommInitRank comm 0x38b52f50 rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 9000 commId 0xbcee012846c54cbc - Init START
proxmox:1495819:1495819 [0] NCCL INFO RAS client listening socket at <redacted-ip><28028>
proxmox:1495819:1495819 [0] NCCL INFO Bootstrap timings total 0.000591 (create 0.000029, send 0.000142, recv 0.000159, ring 0.000035, delay 0.000000)
proxmox:1495819:1495819 [0] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 1.
proxmox:1495819:1495819 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
proxmox:1495819:1495819 [0] NCCL INFO ncclTopoGetCpuAffinity: Affinity for GPU 1 is empty, ignoring. (GPU affinity =  ; CPU affinity = 0-23).
proxmox:1495819:1495819 [0] NCCL INFO NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)
proxmox:1495819:1495819 [0] NCCL INFO comm 0x38b52f50 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
proxmox:1495819:1495819 [0] NCCL INFO Channel 00/02 : 0 1
proxmox:1495819:1495819 [0] NCCL INFO Channel 01/02 : 0 1
proxmox:1495819:1495819 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
proxmox:1495819:1495819 [0] NCCL INFO P2P Chunksize set to 131072
proxmox:1495819:1495819 [0] NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so
proxmox:1495819:1495819 [0] NCCL INFO Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 1
proxmox:1495819:1496070 [0] NCCL INFO [Proxy Service] Device 0 CPU core 8
proxmox:1495819:1496072 [0] NCCL INFO [Proxy Service UDS] Device 0 CPU core 14
proxmox:1495819:1495819 [0] NCCL INFO TUNER/Plugin: Could not find: libnccl-tuner.so
proxmox:1495819:1495819 [0] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512
proxmox:1495819:1495819 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
proxmox:1495819:1495819 [0] NCCL INFO CC Off, workFifoBytes 1048576
proxmox:1495819:1495819 [0] NCCL INFO ncclCommInitRank comm 0x38b52f50 rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 9000 commId 0xbcee012846c54cbc - Init COMPLETE
proxmox:1495819:1495819 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 0.22 (kernels 0.21, alloc 0.00, bootstrap 0.00, allgathers 0.00, topo 0.01, graphs 0.00, connections 0.00, rest 0.00)
proxmox:1495819:1495819 [0] NCCL INFO Channel 00 : 0[1] -> 1[2] via SHM/direct/direct
proxmox:1495819:1495819 [0] NCCL INFO Channel 01 : 0[1] -> 1[2] via SHM/direct/direct
proxmox:1495819:1495819 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
proxmox:1495819:1495819 [0] NCCL INFO Comm config Blocking set to 1
proxmox:1495819:1495819 [0] NCCL INFO Initialized NET plugin Socket
proxmox:1495819:1495819 [0] NCCL INFO Assigned NET plugin Socket to comm
proxmox:1495819:1495819 [0] NCCL INFO Using network Socket
proxmox:1495819:1495819 [0] NCCL INFO ncclCommInitRankConfig comm 0x776f6820 rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 9000 commId 0x42e2e3d735bb45ab - Init START
proxmox:1495819:1495819 [0] NCCL INFO Bootstrap timings total 0.000468 (create 0.000019, send 0.000proxmox:1495820:1495820 [1] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
proxmox:1495820:1495820 [1] NCCL INFO cudaDriverVersion 13020
proxmox:1495820:1495820 [1] NCCL INFO Bootstrap: Using <iface>:<redacted-ip><0>
proxmox:1495820:1495820 [1] NCCL INFO NCCL version 2.28.9+cuda13.0
proxmox:1495820:1495820 [1] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
proxmox:1495820:1495820 [1] NCCL INFO Failed to open libmlx5.so[.1]
proxmox:1495820:1495820 [1] NCCL INFO NET/IB : No device found.
proxmox:1495820:1495820 [1] NCCL INFO NET/IB : Using [RO]; OOB <iface>:<redacted-ip><0>
proxmox:1495820:1495820 [1] NCCL INFO Failed to initialize NET plugin IB
proxmox:1495820:1495820 [1] NCCL INFO NET/Socket : Using [0]<iface>:<redacted-ip><0> [redacted: additional host bridge interfaces]
proxmox:1495820:1495820 [1] NCCL INFO Initialized NET plugin Socket
proxmox:1495820:1495820 [1] NCCL INFO Assigned NET plugin Socket to comm
proxmox:1495820:1495820 [1] NCCL INFO Using network Socket
proxmox:1495820:1495820 [1] NCCL INFO ncclCommInitRank comm 0x1882d0d0 rank 1 nranks 2 cudaDev 1 nvmlDev 2 busId a000 commId 0xbcee012846c54cbc - Init START
proxmox:1495820:1495820 [1] NCCL INFO RAS client listening socket at <redacted-ip><28028>
proxmox:1495820:1495820 [1] NCCL INFO Bootstrap timings total 0.081326 (create 0.000031, send 0.000134, recv 0.080853, ring 0.000020, delay 0.000000)
proxmox:1495820:1495820 [1] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 1.
proxmox:1495820:1495820 [1] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
proxmox:1495820:1495820 [1] NCCL INFO ncclTopoGetCpuAffinity: Affinity for GPU 2 is empty, ignoring. (GPU affinity =  ; CPU affinity = 0-23).
proxmox:1495820:1495820 [1] NCCL INFO NVLS multicast support is not available on dev 1 (NVLS_NCHANNELS 0)
proxmox:1495820:1495820 [1] NCCL INFO comm 0x1882d0d0 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0
proxmox:1495820:1495820 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0
proxmox:1495820:1495820 [1] NCCL INFO P2P Chunksize set to 131072
proxmox:1495820:1495820 [1] NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so
proxmox:1495820:1495820 [1] NCCL INFO Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 1
proxmox:1495820:1496071 [0] NCCL INFO [Proxy Service UDS] Device 1 CPU core 14
proxmox:1495820:1496069 [0] NCCL INFO [Proxy Service] Device 1 CPU core 8
proxmox:1495820:1495820 [1] NCCL INFO TUNER/Plugin: Could not find: libnccl-tuner.so
proxmox:1495820:1495820 [1] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 512 | 512
proxmox:1495820:1495820 [1] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
proxmox:1495820:1495820 [1] NCCL INFO ncclCommInitRank comm 0x1882d0d0 rank 1 nranks 2 cudaDev 1 nvmlDev 2 busId a000 commId 0xbcee012846c54cbc - Init COMPLETE
proxmox:1495820:1495820 [1] NCCL INFO Init timings - ncclCommInitRank: rank 1 nranks 2 total 0.30 (kernels 0.21, alloc 0.00, bootstrap 0.08, allgathers 0.00, topo 0.01, graphs 0.00, connections 0.00, rest 0.00)
proxmox:1495820:1495820 [1] NCCL INFO Channel 00 : 1[2] -> 0[1] via SHM/direct/direct
proxmox:1495820:1495820 [1] NCCL INFO Channel 01 : 1[2] -> 0[1] via SHM/direct/direct
proxmox:1495820:1495820 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
)log";

Analysis analyze_inputs(const std::vector<std::pair<std::string_view, std::string>>& inputs,
    nccl::Inputs kind = nccl::Inputs::may_be_several_jobs)
{
    nccl::Analyzer analyzer(nccl::Limits{}, kind);
    for (const auto& [text, name] : inputs) {
        analyzer.read_text(text, name);
    }
    return analyzer.analysis();
}

std::vector<std::string> job_codes(const nccl::Job& job)
{
    std::vector<std::string> out;
    for (const auto& f : job.findings) {
        out.push_back(f.code);
    }
    return out;
}

} // namespace

TEST(NcclLogJobs, UnrelatedRealLogsKeepTheFindingsEachGivesAlone)
{
    const Analysis a =
        analyze_inputs({{tesla_log, "tesla.log"}, {archlinux_log, "archlinux.log"}, {proxmox_log, "proxmox.log"}});
    ASSERT_EQ(a.jobs.size(), 3U);
    EXPECT_EQ(a.jobs[0].inputs, Strings{"tesla.log"});
    EXPECT_EQ(a.jobs[0].hosts, Strings{"tesla-106"});
    EXPECT_EQ(a.jobs[0].ranks, 4U);
    EXPECT_EQ(a.jobs[1].hosts, Strings{"ArchLinux"});
    EXPECT_EQ(a.jobs[2].hosts, Strings{"proxmox"}) << "the fused line's \"0.000proxmox\" is proxmox";
    EXPECT_EQ(a.jobs[2].processes, 2U);
    EXPECT_EQ(a.communicators.size(), 4U);
    // Each job's findings are those its log gives alone: proxmox's NCCL_P2P_DISABLE=1 explains
    // only proxmox's SHM, and no other job is told it has the variable set.
    for (std::size_t j = 0; j < 3; ++j) {
        const std::string_view log = j == 0 ? tesla_log : j == 1 ? archlinux_log : proxmox_log;
        const Analysis alone = analyze(log, a.jobs[j].inputs[0]);
        EXPECT_EQ(job_codes(a.jobs[j]), codes(alone)) << a.jobs[j].inputs[0];
        ASSERT_EQ(alone.jobs.size(), 1U);
        EXPECT_EQ(alone.jobs[0].communicators.size(), a.jobs[j].communicators.size());
    }
    const auto shm = std::find_if(a.jobs[0].findings.begin(), a.jobs[0].findings.end(),
        [](const nccl::Finding& f) { return f.code == "nccl.shm_not_p2p"; });
    ASSERT_NE(shm, a.jobs[0].findings.end());
    EXPECT_EQ(shm->message.find("NCCL_P2P_DISABLE"), std::string::npos) << shm->message;
    EXPECT_EQ(shm->subject, "job 1: tesla-106");
    EXPECT_EQ(shm->facts["job"], 1);
    EXPECT_NE(finding(a, "nccl.env_disables_transport"), nullptr);
    EXPECT_EQ(finding(a, "nccl.env_disables_transport")->facts["job"], 3);
    // No host pair joins two jobs' hosts.
    for (const auto& c : a.communicators) {
        for (const auto& l : c.links) {
            EXPECT_EQ(l.from, l.to) << c.id;
            EXPECT_NE(l.to, "?") << c.id << ": a P2P/SHM peer is on the local rank's host";
        }
    }
    const nlohmann::json j = nccl::render_json(a);
    std::string written;
    nccl::write_json(a, written);
    EXPECT_EQ(written, j.dump(2)) << "the streamed report is the document's text, byte for byte";
    ASSERT_EQ(j["jobs"].size(), 3U);
    EXPECT_EQ(j["jobs"][2]["hosts"], nlohmann::json::array({"proxmox"}));
    EXPECT_EQ(j["communicators"][1]["job"], 2);
    const std::string text = nccl::render_text(a);
    EXPECT_NE(text.find("3 jobs"), std::string::npos);
    EXPECT_NE(text.find("Job 3: proxmox.log"), std::string::npos);
}

TEST(NcclLogJobs, TwoSingleNodeJobsOfOneSizeStayApart)
{
    // Two 2-GPU jobs on two machines, NCCL 2.10 (no commId): the same communicator size and ranks
    // 0 and 1 in each. Read together before, their ranks were matched across the files and their
    // P2P lines made links between the machines.
    constexpr std::string_view node_a = R"(node-a:5001:5001 [0] NCCL INFO NCCL version 2.10.3+cuda11.4
node-a:5001:5040 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via P2P/IPC/read
node-a:5002:5041 [1] NCCL INFO Channel 00 : 1[1c000] -> 0[1b000] via P2P/IPC/read
node-a:5001:5040 [0] NCCL INFO comm 0x7f01 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE
node-a:5002:5041 [1] NCCL INFO comm 0x7f02 rank 1 nranks 2 cudaDev 1 busId 1c000 - Init COMPLETE
)";
    constexpr std::string_view node_b = R"(node-b:7001:7001 [0] NCCL INFO NCCL version 2.10.3+cuda11.4
node-b:7001:7050 [0] NCCL INFO Channel 00 : 0[3b000] -> 1[3c000] via SHM/direct/direct
node-b:7002:7051 [1] NCCL INFO Channel 00 : 1[3c000] -> 0[3b000] via SHM/direct/direct
node-b:7001:7050 [0] NCCL INFO comm 0x7e01 rank 0 nranks 2 cudaDev 0 busId 3b000 - Init COMPLETE
node-b:7002:7051 [1] NCCL INFO comm 0x7e02 rank 1 nranks 2 cudaDev 1 busId 3c000 - Init COMPLETE
)";
    const Analysis a = analyze_inputs({{node_a, "a.log"}, {node_b, "b.log"}});
    ASSERT_EQ(a.jobs.size(), 2U);
    ASSERT_EQ(a.communicators.size(), 2U);
    EXPECT_EQ(a.communicators[0].hosts, Strings{"node-a"});
    EXPECT_EQ(a.communicators[1].hosts, Strings{"node-b"});
    EXPECT_EQ(a.communicators[1].id, "#2");
    EXPECT_EQ(rank_numbers(a.communicators[1]), (std::vector<int>{0, 1}));
    EXPECT_EQ(a.communicators[1].ranks[0].pid, 7001);
    EXPECT_EQ(job_codes(a.jobs[0]), Strings{});
    EXPECT_EQ(job_codes(a.jobs[1]), Strings{"nccl.shm_not_p2p"});
    EXPECT_EQ(finding(a, "nccl.shm_not_p2p")->subject, "job 2: node-b");

    // Known to be one job (gpurun --nccl-check): one communicator, the first claim of a rank kept.
    const Analysis one = analyze_inputs({{node_a, "a.log"}, {node_b, "b.log"}}, nccl::Inputs::one_job);
    EXPECT_EQ(one.jobs.size(), 1U);
    EXPECT_EQ(one.communicators.size(), 1U);
}

TEST(NcclLogJobs, PerProcessLogsOfOneJobAreOneJob)
{
    // The tesla-106 run split into one file per process, as NCCL_DEBUG_FILE=nccl.%h.%p writes:
    // without a commId, the communicators of the files fit together (ranks 0 to 3, one version).
    std::map<std::string, std::string> files;
    std::string rest;
    for (std::size_t at = 0; at < tesla_log.size();) {
        const std::size_t end = std::min(tesla_log.find('\n', at), tesla_log.size());
        const std::string line(tesla_log.substr(at, end - at));
        at = end + 1;
        const std::size_t colon = line.find(':');
        if (line.starts_with("tesla-106:") && colon != std::string::npos) {
            files["nccl.tesla-106." + line.substr(colon + 1, 5)] += line + "\n";
        } else {
            rest += line + "\n"; // the program's own output and the version banner
        }
    }
    ASSERT_EQ(files.size(), 4U);
    std::vector<std::pair<std::string_view, std::string>> inputs;
    for (const auto& [name, text] : files) {
        inputs.emplace_back(text, name);
    }
    inputs.emplace_back(rest, "stdout");
    const Analysis a = analyze_inputs(inputs);
    ASSERT_EQ(a.jobs.size(), 1U);
    EXPECT_EQ(a.jobs[0].inputs.size(), 5U);
    ASSERT_EQ(a.communicators.size(), 1U);
    EXPECT_EQ(a.communicators[0].ranks.size(), 4U);
    EXPECT_EQ(codes(a), codes(analyze(tesla_log, "tesla.log")));
    EXPECT_EQ(a.nccl_versions, Strings{"2.7.8+cuda10.1"});
}

TEST(NcclLogFormats, TensorflowsBundledBannerIsTheVersion)
{
    const std::string log =
        "w0:5202:5683 [0] NCCL INFO NCCL version 2.4.7+cudaCUDA_MAJOR.CUDA_MINOR\n"
        "w0:5202:5683 [0] NCCL INFO comm 0x7f00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 - Init COMPLETE\n"
        "w0:5202:5684 [1] NCCL INFO comm 0x7f01 rank 1 nranks 2 cudaDev 1 nvmlDev 1 - Init COMPLETE\n";
    const Analysis a = analyze(log, "tf_banner");
    EXPECT_EQ(a.nccl_versions, Strings{"2.4.7+cudaCUDA_MAJOR.CUDA_MINOR"});
}
