#include "launcher/node_monitor.hpp"
#include "tests/support/error_of.hpp"

#include <filesystem>
#include <gtest/gtest.h>

using launcher::NodeMonitorOptions;

TEST(NodeMonitor, ArgumentsRoundTrip)
{
    NodeMonitorOptions o;
    o.local_ranks = 8;
    o.gpus = {*base::PciAddress::parse("0000:07:00.0"), *base::PciAddress::parse("0000:0f:00.0")};
    o.monitor.interval = 0.25;
    o.monitor.enforce = launcher::EnforceMode::kill;
    o.monitor.json_file = "/home/me/run.%h.json";
    const auto args = launcher::node_monitor_arguments(o);
    EXPECT_EQ(args,
        (std::vector<std::string>{"--local-ranks", "8", "--gpus", "0000:07:00.0,0000:0f:00.0", "--interval", "0.25",
            "--enforce", "kill", "--json", "/home/me/run.%h.json"}));
    EXPECT_EQ(launcher::parse_node_monitor_arguments(args), o);
    EXPECT_EQ(test_support::error_of([] {
        launcher::parse_node_monitor_arguments({"--gpus", "x"});
    }),
        "--gpus x: not a list of PCI bus ids");
    EXPECT_EQ(test_support::error_of([] {
        launcher::parse_node_monitor_arguments({"--local-ranks", "2"});
    }),
        "the node monitor needs --gpus and --interval; it is started by gpurun-rank");
}

TEST(NodeMonitor, HostInFileNames)
{
    EXPECT_EQ(launcher::expand_host("/r/run.%h.json", "n01"), "/r/run.n01.json");
    EXPECT_EQ(launcher::expand_host("/r/100%%.%h", "n01"), "/r/100%.n01");
    EXPECT_EQ(launcher::expand_host("/r/%x%", "n01"), "/r/%x%");
}

TEST(NodeMonitor, JsonFilePerNodeOnSeveralHosts)
{
    std::vector<std::string> notes;
    launcher::MonitorOptions o;
    o.interval = 1;
    o.json_file = "/runs/50%/mon.json";
    EXPECT_EQ(launcher::monitor_for_helpers(o, false, notes).json_file, "/runs/50%%/mon.json");
    EXPECT_TRUE(notes.empty());
    EXPECT_EQ(launcher::monitor_for_helpers(o, true, notes).json_file, "/runs/50%%/mon.%h.json");
    ASSERT_EQ(notes.size(), 1U);
    EXPECT_NE(notes[0].find("each node's monitor writes its own file"), std::string::npos) << notes[0];
    o.json_file = "mon";
    EXPECT_EQ(launcher::monitor_for_helpers(o, true, notes).json_file,
        (std::filesystem::current_path() / "mon").string() + ".%h");
    o.json_file.clear();
    EXPECT_EQ(launcher::monitor_for_helpers(o, true, notes).json_file, "");
}
