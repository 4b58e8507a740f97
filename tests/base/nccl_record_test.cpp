// The per-line parsers of NCCL_DEBUG output, one kind of line at a time. The lines follow the
// formats in NCCL's own sources (src/init.cc, src/transport/*.cc, src/graph/connect.cc,
// src/misc/param.cc) and PyTorch's ProcessGroupNCCL.cpp, as they appear in logs users paste.
#include "base/nccl/record.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace {

using namespace base::nccl;

/// The records of one raw line; they point into `raw` or `scratch`, which outlive them.
std::vector<NcclRecord> records_in(const std::string& raw, std::string& scratch)
{
    std::vector<NcclRecord> out;
    find_records(clean_line(raw, scratch), out);
    return out;
}

TEST(NcclRecord, ThePrefixGivesHostPidTidDeviceAndLevel)
{
    std::string scratch;
    const std::string plain = "gpu-a01:3100:3187 [3] NCCL INFO Using network IB";
    auto r = records_in(plain, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_EQ(r[0].host, "gpu-a01");
    EXPECT_EQ(r[0].pid, 3100);
    EXPECT_EQ(r[0].tid, 3187);
    EXPECT_EQ(r[0].dev, 3);
    EXPECT_EQ(r[0].level, Level::info);
    EXPECT_EQ(r[0].message, "Using network IB");

    // A WARN carries its source location; behind Open MPI's --tag-output prefix and colours.
    const std::string tagged =
        "[1,3]<stderr>:\x1b[31mgpu-a02:4201:4305 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : "
        "Got completion from peer 10.1.0.11<40112> with status=12\x1b[0m\r";
    r = records_in(tagged, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_EQ(r[0].host, "gpu-a02");
    EXPECT_EQ(r[0].level, Level::warn);
    EXPECT_EQ(r[0].location, "transport/net_ib.cc:1295");
    EXPECT_EQ(r[0].message, "NET/IB : Got completion from peer 10.1.0.11<40112> with status=12");

    // A prefix stripped by the user: no host, pid 0.
    const std::string stripped = "[0] NCCL INFO Channel 00/02 :    0   1";
    r = records_in(stripped, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_EQ(r[0].host, "");
    EXPECT_EQ(r[0].pid, 0);
    EXPECT_EQ(r[0].dev, 0);
    EXPECT_FALSE(r[0].prefixed);
    EXPECT_TRUE(records_in(plain, scratch)[0].prefixed);
}

TEST(NcclRecord, AnEmptyHostOrRedactedNumbersKeepThePrefix)
{
    // A container without a host name: NCCL prints ":pid:tid".
    std::string scratch;
    const std::string empty_host = ":5202:5683 [0] NCCL INFO Using network IB";
    auto r = records_in(empty_host, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_TRUE(r[0].prefixed);
    EXPECT_EQ(r[0].host, "");
    EXPECT_EQ(r[0].pid, 5202);
    EXPECT_EQ(r[0].tid, 5683);
    EXPECT_EQ(r[0].message, "Using network IB");

    // Numbers a poster replaced by words: the prefix stays, pid and tid are unknown (0).
    const std::string redacted = "pod-id:num:num [3] NCCL INFO Channel 00/0 : 3[3] -> 0[0] via P2P/CUMEM";
    r = records_in(redacted, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_TRUE(r[0].prefixed);
    EXPECT_EQ(r[0].host, "pod-id");
    EXPECT_EQ(r[0].pid, 0);
    EXPECT_EQ(r[0].dev, 3);

    // Two colons before the pid are no prefix: the record has none.
    const std::string two_colons = "x::12:13 [0] NCCL INFO Using network IB";
    r = records_in(two_colons, scratch);
    ASSERT_EQ(r.size(), 1U);
    EXPECT_FALSE(r[0].prefixed);
    EXPECT_EQ(r[0].pid, 0);
}

TEST(NcclRecord, TwoRecordsOnOneLineAreTwoAndJunkIsNone)
{
    // A terminal-wrapped paste joins records with a blank.
    std::string scratch;
    const std::string joined =
        "n1:10:10 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0> n1:11:11 [1] NCCL INFO NET/Plugin : No plugin found";
    const auto r = records_in(joined, scratch);
    ASSERT_EQ(r.size(), 2U);
    EXPECT_EQ(r[0].message, "Bootstrap : Using eth0:10.0.0.1<0>");
    EXPECT_EQ(r[1].pid, 11);
    const std::string training = "epoch 0 step 100 loss 5.102";
    EXPECT_TRUE(records_in(training, scratch).empty());
    const std::string junk("\0\x01\xff NCCL", 7);
    EXPECT_TRUE(records_in(junk, scratch).empty());
}

TEST(NcclRecord, ConnectionLinesOfEveryGeneration)
{
    // NCCL 2.4-2.6: Ring lines.
    auto c = parse_connection("Ring 01 : 16 -> 0 [send] via NET/IB/0");
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->ring_keyword);
    EXPECT_EQ(c->channel, 1);
    EXPECT_EQ(c->src, 16);
    EXPECT_EQ(c->dst, 0);
    EXPECT_EQ(c->direction, Direction::send);
    EXPECT_EQ(c->path, "NET/IB/0");
    // 2.12+: Channel NN/conn-index, devices in brackets.
    c = parse_connection("Channel 02/1 : 15[7] -> 16[0] [receive] via NET/IB/0/GDRDMA");
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->ring_keyword);
    EXPECT_EQ(c->channel, 2);
    EXPECT_EQ(c->conn_index, 1);
    EXPECT_EQ(c->direction, Direction::receive);
    EXPECT_EQ(classify_path(c->path), Transport::net_ib_gdr);
    c = parse_connection("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->direction, Direction::none);
    EXPECT_EQ(classify_path(c->path), Transport::p2p);
    EXPECT_EQ(classify_path("SHM/direct/direct"), Transport::shm);
    EXPECT_EQ(classify_path("NET/Socket/0"), Transport::net_socket);
    EXPECT_EQ(classify_path("NET/IB/0"), Transport::net_ib);
    // CollNet names only the local rank.
    c = parse_connection("CollNet 00/0 : 3 [send] via COLLNET/SHARP/0");
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->collnet);
    EXPECT_EQ(c->src, 3);
    EXPECT_EQ(c->dst, -1);
    EXPECT_FALSE(parse_connection("Channel 00/02 :    0   1   2   3"));
    EXPECT_FALSE(parse_connection("Connected all rings"));
}

TEST(NcclRecord, InitLinesOldAndNew)
{
    auto i = parse_init("ncclCommInitRank comm 0x55810c0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId "
                        "0x7f3ab2c41d9e0c55 - Init COMPLETE");
    ASSERT_TRUE(i);
    EXPECT_EQ(i->comm, "0x55810c0");
    EXPECT_EQ(i->rank, 2);
    EXPECT_EQ(i->nranks, 4);
    EXPECT_EQ(i->cuda_dev, 0);
    EXPECT_EQ(i->nvml_dev, 0);
    EXPECT_EQ(i->bus_id, "1b000");
    EXPECT_EQ(i->comm_id, "0x7f3ab2c41d9e0c55");
    EXPECT_EQ(i->stage, InitStage::complete);
    // NCCL 2.3-2.4: no busId, no commId, no stage.
    i = parse_init("comm 0x7f2c3c001c30 rank 1 nranks 2 cudaDev 1 nvmlDev 1 - Init COMPLETE");
    ASSERT_TRUE(i);
    EXPECT_EQ(i->rank, 1);
    EXPECT_EQ(i->bus_id, "");
    EXPECT_EQ(i->comm_id, "");
    EXPECT_FALSE(parse_init("Init COMPLETE"));
}

TEST(NcclRecord, RingOrderVersionEnvironmentAndChannels)
{
    NcclRingOrder order;
    ASSERT_TRUE(parse_ring_order("Channel 00/02 :    0   1   2   3", order));
    EXPECT_EQ(order.channel, 0);
    EXPECT_EQ(order.ranks, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_FALSE(order.truncated);
    EXPECT_FALSE(parse_ring_order("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", order));

    EXPECT_EQ(find_version("gpu-a01:3100:3100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"), "2.21.5+cuda12.4");
    EXPECT_FALSE(find_version("NCCL INFO Using network IB"));
    // TensorFlow's bundled NCCL leaves its CUDA version unexpanded.
    EXPECT_EQ(find_version("w-0:5202:5683 [0] NCCL INFO NCCL version 2.4.7+cudaCUDA_MAJOR.CUDA_MINOR"),
        "2.4.7+cudaCUDA_MAJOR.CUDA_MINOR");
    // Without "+cuda": only in an NCCL record's message, never from other text.
    EXPECT_EQ(find_version("NCCL version 2.18.5-1, on eth0", true), "2.18.5-1");
    EXPECT_FALSE(find_version("torch: NCCL version 2.18.5 found"));
    EXPECT_FALSE(find_version("NCCL version mismatch", true));
    EXPECT_FALSE(find_version("NCCL version 2 is required", true)) << "a dotted number";
    // A line that is the banner alone (NCCL up to 2.8 printed it without a prefix): a build's own
    // suffix, or none, is the version too; a sentence that starts so is not.
    EXPECT_EQ(find_version("NCCL version 2.8.4"), "2.8.4");
    EXPECT_EQ(find_version("  NCCL version 2.18.3-1"), "2.18.3-1");
    EXPECT_EQ(find_version("NCCL version 2.19.3+internal.2"), "2.19.3+internal.2");
    EXPECT_FALSE(find_version("NCCL version 2.18.3 is too old for this wheel"));
    EXPECT_FALSE(find_version("NCCL version 2.18.3, found"));
    EXPECT_FALSE(find_version("NCCL version 2.18.3a"));

    const auto env = parse_env_setting("NCCL_SOCKET_IFNAME set by environment to ib0");
    ASSERT_TRUE(env);
    EXPECT_EQ(env->name, "NCCL_SOCKET_IFNAME");
    EXPECT_EQ(env->value, "ib0");

    const auto channels = parse_channel_summary("32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p "
                                                "channels, 32 p2p channels per peer");
    ASSERT_TRUE(channels);
    EXPECT_EQ(channels->coll, 32U);
    EXPECT_EQ(channels->collnet, 32U);
    EXPECT_EQ(channels->nvls, 16U);
}

TEST(NcclRecord, WarnKindsGroupTheSameFailureAndKeepWhatTellsThemApart)
{
    EXPECT_EQ(warn_kind("NET/IB : Got completion from peer 10.1.0.11<40112> with status=12 opcode=0 len=0"),
        warn_kind("NET/IB : Got completion from peer 10.1.0.12<40113> with status=12 opcode=0 len=0"));
    EXPECT_NE(warn_kind("Cuda failure 'out of memory'"), warn_kind("Call to ibv_reg_mr failed"));
    EXPECT_FALSE(warn_kind("Cuda failure 'out of memory'").empty());

    // What tells a failure apart may come after request numbers and peers: NCCL 2.14.3's
    // collective mismatch (NVIDIA/nccl#969) and 2.9.6's form (NVIDIA/nccl#615) are one kind, and
    // not that of another NET/IB request error.
    const std::string mismatch = warn_kind(
        "NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536");
    EXPECT_EQ(mismatch, "NET/IB collective mismatch (ranks posted different sizes)");
    EXPECT_EQ(warn_kind("NET/IB : collective mismatch error local size 546816 remote 524288 addr 7ff7d1530000 rkey "
                        "2553d seq 14/1c"),
        mismatch);
    EXPECT_NE(
        warn_kind("NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> posted incorrect receive info: size 0"), mismatch);
    // dmlc/xgboost#7982 (NCCL 2.12.12).
    EXPECT_EQ(warn_kind("Proxy Call to rank 3 failed (Connect)"), "Proxy call to a rank failed");
    EXPECT_EQ(warn_kind("[Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 2"),
        "Proxy service failed to execute an operation");
    // An unknown message keeps six words that are not numbers.
    EXPECT_EQ(warn_kind("NET/IB : req 0/1 tag 0 peer went away quietly"), "NET/IB : req tag peer went");
}

TEST(NcclRecord, PyTorchWatchdogLinesNewAndOld)
{
    auto w = parse_watchdog("[rank1]:[E1105 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
                            "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, "
                            "NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->op, "ALLREDUCE");
    EXPECT_EQ(w->seq, 1580);
    EXPECT_EQ(w->timeout_ms, 600000);
    EXPECT_EQ(w->ran_ms, 600043);
    EXPECT_EQ(w->rank, 1);
    // PyTorch <= 1.13: no rank tag, no Numel fields.
    w = parse_watchdog("[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeout: "
                       "WorkNCCL(SeqNum=3, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1806794 milliseconds "
                       "before timing out.");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->op, "BROADCAST");
    EXPECT_EQ(w->rank, 0);
    EXPECT_FALSE(parse_watchdog("Watchdog started"));

    const auto e = parse_comm_error("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121, "
                                    "unhandled system error, NCCL version 2.10.3");
    ASSERT_TRUE(e);
    EXPECT_NE(e->find("unhandled system error"), std::string_view::npos) << *e;
}

} // namespace
