#include "base/binding.hpp"
#include "base/error.hpp"
#include "launcher/node_handoff.hpp"

#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

namespace {

using launcher::NodeKey;
using launcher::NodePlan;
using launcher::RankBinding;

NodeKey key()
{
    return NodeKey{"n01", "5b2c1f9e-0d3a-4c1e-9a57-3f5e8d2b7c10", "0-63", std::nullopt};
}

NodePlan two_ranks()
{
    NodePlan plan;
    RankBinding gpu_rank;
    gpu_rank.local_rank = 0;
    base::Gpu gpu;
    gpu.physical_index = 3;
    gpu.bus_id = *base::PciAddress::parse("0000:4e:00.0");
    gpu.name = "NVIDIA A100-SXM4-80GB";
    gpu.uuid = "GPU-8f3a2c1d-1111-2222-3333-444455556666";
    gpu.selector = "GPU-8f3a2c1d-1111-2222-3333-444455556666";
    gpu.hca = "mlx5_1";
    gpu_rank.gpu = gpu;
    gpu_rank.cuda_index = 3;
    gpu_rank.cpus = base::CpuSet::parse("16-31");
    gpu_rank.numa = {1};
    gpu_rank.cores = 16;
    gpu_rank.hca = "mlx5_1";
    RankBinding cpu_rank;
    cpu_rank.local_rank = 1;
    cpu_rank.cpus = base::CpuSet::parse("32-47,96");
    cpu_rank.numa = {2, 3};
    cpu_rank.cores = 16;
    cpu_rank.shared = true;
    plan.ranks = {gpu_rank, cpu_rank};
    return plan;
}

TEST(NodeHandoff, APlanMadeUnderTheSameKeyIsReadBackWhole)
{
    const std::string text = launcher::write_node_plan(key(), two_ranks());
    const auto plan = launcher::read_node_plan(text, key(), 2);
    ASSERT_TRUE(plan.has_value());
    ASSERT_EQ(plan->ranks.size(), 2U);
    const RankBinding& first = plan->ranks[0];
    ASSERT_TRUE(first.gpu.has_value());
    EXPECT_EQ(first.gpu->physical_index, 3U);
    EXPECT_EQ(first.gpu->bus_id.to_string(), "0000:4e:00.0");
    EXPECT_EQ(first.gpu->name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(first.gpu->selector, "GPU-8f3a2c1d-1111-2222-3333-444455556666");
    EXPECT_EQ(first.cuda_index, 3U);
    EXPECT_EQ(first.cpus.to_list(), "16-31");
    EXPECT_EQ(first.numa, std::vector<unsigned>{1});
    EXPECT_EQ(first.hca, "mlx5_1");
    const RankBinding& second = plan->ranks[1];
    EXPECT_FALSE(second.gpu.has_value());
    EXPECT_EQ(second.cpus.to_list(), "32-47,96");
    EXPECT_EQ(second.numa, (std::vector<unsigned>{2, 3}));
    EXPECT_TRUE(second.shared);
    EXPECT_EQ(launcher::write_node_plan(key(), *plan), text) << "what is read writes back the same";
}

TEST(NodeHandoff, AnyDifferenceInTheKeyOrTheRankCountMeansTheHelperPlansItself)
{
    const std::string text = launcher::write_node_plan(key(), two_ranks());
    auto other = [&](auto change) {
        NodeKey k = key();
        change(k);
        return launcher::read_node_plan(text, k, 2).has_value();
    };
    EXPECT_FALSE(other([](NodeKey& k) { k.host = "n02"; })) << "another host";
    EXPECT_FALSE(other([](NodeKey& k) { k.boot_id = "0a1b"; })) << "another machine of that name, or a reboot";
    EXPECT_FALSE(other([](NodeKey& k) { k.affinity = "0-31"; })) << "another cgroup or binding (srun's step)";
    EXPECT_FALSE(other([](NodeKey& k) { k.visible_devices = "1,2"; })) << "other GPUs visible";
    EXPECT_FALSE(launcher::read_node_plan(text, key(), 3).has_value()) << "more ranks here than planned";

    NodeKey visible = key();
    visible.visible_devices = "";
    const std::string with_empty = launcher::write_node_plan(visible, two_ranks());
    EXPECT_FALSE(launcher::read_node_plan(with_empty, key(), 2).has_value()) << "set but empty is not unset";
    EXPECT_TRUE(launcher::read_node_plan(with_empty, visible, 2).has_value());

    NodeKey unknown = key();
    unknown.boot_id.clear();
    EXPECT_FALSE(launcher::read_node_plan(launcher::write_node_plan(unknown, two_ranks()), unknown, 2).has_value())
        << "a node that cannot say which boot it is gets no plan handed";
}

TEST(NodeHandoff, TextGpurunDidNotWriteIsAnErrorNamingTheVariable)
{
    auto error = [](const std::string& text) {
        try {
            (void)launcher::read_node_plan(text, key(), 1);
        } catch (const base::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    for (const std::string text :
        {"", "{", "[]", R"({"host":"n01"})",
            R"({"host":"n01","boot_id":"5b2c1f9e-0d3a-4c1e-9a57-3f5e8d2b7c10","affinity":"0-63","visible_devices":null,"ranks":{}})"}) {
        const std::string e = error(text);
        EXPECT_EQ(e.rfind("GPURUN_NODE_PLAN is not a plan gpurun wrote (", 0), 0U) << text << " -> " << e;
        EXPECT_NE(e.find("; unset it"), std::string::npos) << e;
    }
    NodePlan plan = two_ranks();
    plan.ranks.resize(1);
    std::string text = launcher::write_node_plan(key(), plan);
    const std::string good_cpus = "\"cpus\":\"16-31\"";
    text.replace(text.find(good_cpus), good_cpus.size(), "\"cpus\":\"16-x\"");
    EXPECT_NE(error(text).find("16-x"), std::string::npos) << error(text);
    plan.ranks[0].local_rank = 1;
    EXPECT_NE(error(launcher::write_node_plan(key(), plan)).find("local ranks out of order"), std::string::npos);
    // Numbers that are not whole, negative or past 32 bits (found by fuzz_node_plan: a cast of
    // 8.9e57 to unsigned is undefined behaviour).
    plan.ranks[0].local_rank = 0;
    const std::string good = launcher::write_node_plan(key(), plan);
    for (const auto& [from, to] :
        std::vector<std::pair<std::string, std::string>>{{"\"numa\":[1]", "\"numa\":[8.9e57]"},
            {"\"numa\":[1]", "\"numa\":[-1]"}, {"\"cores\":16", "\"cores\":4294967296"},
            {"\"cuda_index\":3", "\"cuda_index\":3.5"}, {"\"index\":3", "\"index\":\"3\""}}) {
        std::string bad = good;
        ASSERT_NE(bad.find(from), std::string::npos) << from << " in " << bad;
        bad.replace(bad.find(from), from.size(), to);
        EXPECT_NE(error(bad).find("is not a whole number below 2^32"), std::string::npos) << to << ": " << error(bad);
    }
}

TEST(NodeHandoff, ThisNodesKeyIsWhatTheKernelSays)
{
    const NodeKey k = launcher::this_node_key("0,1");
    EXPECT_FALSE(k.host.empty());
    EXPECT_EQ(k.boot_id.size(), 36U) << k.boot_id;
    EXPECT_EQ(k.affinity, base::cpu_binding().to_list());
    EXPECT_EQ(k.visible_devices, std::optional<std::string>("0,1"));
    EXPECT_FALSE(launcher::this_node_key(nullptr).visible_devices.has_value());
}

} // namespace
