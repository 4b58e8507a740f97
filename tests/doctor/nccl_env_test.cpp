#include "tests/support/doctor_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace {

const nlohmann::json ib_device = {{"name", "mlx5_0"},
    {"ports", {{{"port", 1}, {"state", "4: ACTIVE"}, {"phys_state", "5: LinkUp"}, {"rate", "200 Gb/sec (4X HDR)"}}}}};

const nlohmann::json no_peermem = {{"files", nlohmann::json::array()}, {"modules", nlohmann::json::array()}};

// Facts for the nccl-env probe: these variables, these interfaces, IB devices or not.
nlohmann::json env_facts(const std::map<std::string, std::string>& variables,
    nlohmann::json interfaces = {"eth0", "ib0", "lo"}, bool with_ib = false)
{
    nlohmann::json vars = nlohmann::json::object();
    for (const auto& [k, v] : variables) {
        vars[k] = v;
    }
    nlohmann::json ib = nlohmann::json::array();
    if (with_ib) {
        ib.push_back(ib_device);
    }
    return {{"env", {{"variables", vars}, {"interfaces", interfaces}}},
        {"network", {{"infiniband", ib}, {"peermem", no_peermem}}}};
}

std::vector<doctor::engine::Finding> judge(const std::map<std::string, std::string>& variables,
    nlohmann::json interfaces = {"eth0", "ib0", "lo"}, bool with_ib = false)
{
    return judge_one("nccl-env", env_facts(variables, std::move(interfaces), with_ib));
}

std::vector<std::string> warnings(const std::vector<doctor::engine::Finding>& findings)
{
    auto out = codes_with(findings, Severity::warn);
    auto fails = codes_with(findings, Severity::fail);
    out.insert(out.end(), fails.begin(), fails.end());
    return out;
}

} // namespace

TEST(NcclEnvCollector, KeepsOnlyTheRelevantVariablesAndListsInterfaces)
{
    test_support::TempDir root;
    for (const char* i : {"lo", "eth0", "ib0", "docker0"}) {
        std::filesystem::create_directories(root / ("sys/class/net/" + std::string(i)));
    }
    doctor::engine::CollectContext ctx;
    ctx.sysroot = root.path().string();
    ctx.env = {{"NCCL_DEBUG", "INFO"}, {"HOME", "/root"}, {"PATH", "/usr/bin"}, {"CUDA_VISIBLE_DEVICES", ""},
        {"UCX_TLS", "rc,cuda_copy"}, {"OMPI_MCA_pml", "ucx"}, {"AWS_SECRET", "x"}};
    auto facts = test_support::collector_named("env").collect(ctx);
    EXPECT_EQ(facts["variables"],
        (nlohmann::json{{"NCCL_DEBUG", "INFO"}, {"CUDA_VISIBLE_DEVICES", ""}, {"UCX_TLS", "rc,cuda_copy"},
            {"OMPI_MCA_pml", "ucx"}}));
    EXPECT_EQ(facts["interfaces"], (nlohmann::json{"docker0", "eth0", "ib0", "lo"}));
    EXPECT_FALSE(facts.contains("error"));
}

TEST(NcclEnvCollector, NoSysClassNetMeansInterfacesUnknown)
{
    test_support::TempDir root;
    doctor::engine::CollectContext ctx;
    ctx.sysroot = root.path().string();
    ctx.env = {{"NCCL_SOCKET_IFNAME", "eth0"}};
    auto facts = test_support::collector_named("env").collect(ctx);
    EXPECT_FALSE(facts.contains("interfaces"));
    EXPECT_NE(facts["interfaces_error"].get<std::string>().find("sys/class/net"), std::string::npos);
    auto findings = judge_one(
        "nccl-env", {{"env", facts}, {"network", {{"infiniband", nlohmann::json::array()}, {"peermem", no_peermem}}}});
    const auto* f = find_code(findings, "nccl-env.socket_ifname_unchecked");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::skip);
}

TEST(NcclEnvRule, CleanEnvironmentPasses)
{
    auto findings = judge({});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "nccl-env.ok");
    EXPECT_EQ(findings[0].severity, Severity::pass);
    EXPECT_NE(findings[0].message.find("no NCCL_* variables"), std::string::npos);

    findings = judge({{"NCCL_IB_HCA", "mlx5_0"}, {"NCCL_DEBUG", "WARN"}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_NE(findings[0].message.find("NCCL_IB_HCA=mlx5_0"), std::string::npos) << findings[0].message;
}

TEST(NcclEnvRule, P2pDisableIsOnlyTheValueOne)
{
    auto findings = judge({{"NCCL_P2P_DISABLE", "1"}});
    const auto* f = find_code(findings, "nccl-env.p2p_disabled");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_EQ(f->subject, "NCCL_P2P_DISABLE");
    EXPECT_FALSE(f->remedy.empty());
    EXPECT_EQ(find_code(findings, "nccl-env.ok"), nullptr);
    // NCCL compares strtol(value) with 1.
    for (const char* v : {"0", "2", "", "yes"}) {
        EXPECT_TRUE(warnings(judge({{"NCCL_P2P_DISABLE", v}})).empty()) << v;
    }
    EXPECT_FALSE(warnings(judge({{"NCCL_P2P_DISABLE", "0x1"}})).empty());
}

TEST(NcclEnvRule, IbDisableMattersOnlyWithIbDevices)
{
    auto findings = judge({{"NCCL_IB_DISABLE", "1"}}, {"eth0", "lo"}, true);
    const auto* f = find_code(findings, "nccl-env.ib_disabled");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    findings = judge({{"NCCL_IB_DISABLE", "1"}}, {"eth0", "lo"}, false);
    EXPECT_EQ(find_code(findings, "nccl-env.ib_disabled"), nullptr);
    EXPECT_NE(find_code(findings, "nccl-env.ok"), nullptr);
    EXPECT_TRUE(warnings(judge({{"NCCL_IB_DISABLE", "0"}}, {"eth0"}, true)).empty());
}

TEST(NcclEnvRule, SocketIfnamePrefixExactAndExclude)
{
    EXPECT_NE(find_code(judge({{"NCCL_SOCKET_IFNAME", "eth"}}), "nccl-env.socket_ifname_ok"), nullptr);
    EXPECT_NE(find_code(judge({{"NCCL_SOCKET_IFNAME", "=eth0"}}), "nccl-env.socket_ifname_ok"), nullptr);
    EXPECT_NE(find_code(judge({{"NCCL_SOCKET_IFNAME", "eth0:5000"}}), "nccl-env.socket_ifname_ok"), nullptr);
    EXPECT_NE(find_code(judge({{"NCCL_SOCKET_IFNAME", "^docker,lo"}}), "nccl-env.socket_ifname_ok"), nullptr);

    // "=eth" asks for an interface called exactly "eth".
    auto findings = judge({{"NCCL_SOCKET_IFNAME", "=eth"}});
    const auto* f = find_code(findings, "nccl-env.socket_ifname_missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_NE(f->message.find("eth0, ib0, lo"), std::string::npos) << f->message;
}

TEST(NcclEnvRule, SocketIfnameTypoFailsWithDidYouMean)
{
    auto findings = judge({{"NCCL_SOCKET_IFNAME", "eht0"}}, {"eth0", "lo"});
    const auto* f = find_code(findings, "nccl-env.socket_ifname_missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_NE(f->message.find("did you mean eth0?"), std::string::npos) << f->message;
    EXPECT_FALSE(f->remedy.empty());
}

TEST(NcclEnvRule, SocketIfnameWithSomeEntriesNamingNothingWarns)
{
    auto findings = judge({{"NCCL_SOCKET_IFNAME", "eth0,bond0"}});
    const auto* f = find_code(findings, "nccl-env.socket_ifname_partial");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("bond0 names no interface"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("NCCL uses eth0"), std::string::npos) << f->message;
}

TEST(NcclEnvRule, ExcludingEverythingButLoopbackWarns)
{
    auto findings = judge({{"NCCL_SOCKET_IFNAME", "^eth,ib"}});
    const auto* f = find_code(findings, "nccl-env.socket_ifname_missing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("only loopback"), std::string::npos) << f->message;
}

TEST(NcclEnvRule, TooShortSocketIfnameIsIgnoredByNccl)
{
    for (const char* v : {"", "e"}) {
        auto findings = judge({{"NCCL_SOCKET_IFNAME", v}});
        const auto* f = find_code(findings, "nccl-env.socket_ifname_ignored");
        ASSERT_NE(f, nullptr) << v;
        EXPECT_EQ(f->severity, Severity::warn);
    }
}

TEST(NcclEnvRule, DebugLeftOnWarnsInAnyCase)
{
    for (const char* v : {"INFO", "info", "TRACE"}) {
        auto findings = judge({{"NCCL_DEBUG", v}});
        const auto* f = find_code(findings, "nccl-env.debug_on");
        ASSERT_NE(f, nullptr) << v;
        EXPECT_NE(f->message.find(v), std::string::npos);
    }
    EXPECT_TRUE(warnings(judge({{"NCCL_DEBUG", "WARN"}})).empty());
    EXPECT_TRUE(warnings(judge({{"NCCL_DEBUG", ""}})).empty());
}

TEST(NcclEnvRule, ShmDisableWarns)
{
    EXPECT_NE(find_code(judge({{"NCCL_SHM_DISABLE", "1"}}), "nccl-env.shm_disabled"), nullptr);
    EXPECT_TRUE(warnings(judge({{"NCCL_SHM_DISABLE", "0"}})).empty());
}

TEST(NcclEnvRule, RestrictiveLevelsWarnWithWhatTheyDo)
{
    struct Case {
        const char* var;
        const char* value;
        const char* code;
        const char* says;
    };
    for (const Case& c : {Case{"NCCL_P2P_LEVEL", "LOC", "nccl-env.p2p_level_restrictive", "disables"},
             Case{"NCCL_P2P_LEVEL", "NVL", "nccl-env.p2p_level_restrictive", "NVLink only"},
             Case{"NCCL_P2P_LEVEL", "PIX", "nccl-env.p2p_level_restrictive", "same PCIe switch"},
             Case{"NCCL_P2P_LEVEL", "0", "nccl-env.p2p_level_restrictive", "(LOC)"},
             Case{"NCCL_P2P_LEVEL", "1", "nccl-env.p2p_level_restrictive", "(PIX)"},
             Case{"NCCL_NET_GDR_LEVEL", "LOC", "nccl-env.gdr_level_restrictive", "disables GPUDirect"},
             Case{"NCCL_NET_GDR_LEVEL", "PIX", "nccl-env.gdr_level_restrictive", "own PCIe switch"}}) {
        auto findings = judge({{c.var, c.value}});
        const auto* f = find_code(findings, c.code);
        ASSERT_NE(f, nullptr) << c.var << "=" << c.value;
        EXPECT_EQ(f->severity, Severity::warn);
        EXPECT_NE(f->message.find(c.says), std::string::npos) << f->message;
    }
    // Permissive levels, and names NCCL does not recognise (it compares case-sensitively).
    for (const auto& [var, value] :
        std::vector<std::pair<const char*, const char*>>{{"NCCL_P2P_LEVEL", "SYS"}, {"NCCL_P2P_LEVEL", "loc"},
            {"NCCL_P2P_LEVEL", ""}, {"NCCL_NET_GDR_LEVEL", "PHB"}, {"NCCL_NET_GDR_LEVEL", "3"}}) {
        EXPECT_TRUE(warnings(judge({{var, value}})).empty()) << var << "=" << value;
    }
}

TEST(NcclEnvRule, HiddenGpus)
{
    for (const char* v : {"", "-1", "-1,0"}) {
        EXPECT_NE(find_code(judge({{"CUDA_VISIBLE_DEVICES", v}}), "nccl-env.no_visible_devices"), nullptr) << v;
    }
    EXPECT_TRUE(warnings(judge({{"CUDA_VISIBLE_DEVICES", "0,1"}})).empty());
    EXPECT_TRUE(warnings(judge({{"CUDA_VISIBLE_DEVICES", "GPU-1234"}})).empty());
}

TEST(NcclEnvRule, SeveralTrapsAreAllReported)
{
    auto findings = judge({{"NCCL_P2P_DISABLE", "1"}, {"NCCL_DEBUG", "INFO"}, {"NCCL_SOCKET_IFNAME", "nope"}});
    EXPECT_EQ(warnings(findings),
        (std::vector<std::string>{"nccl-env.p2p_disabled", "nccl-env.debug_on", "nccl-env.socket_ifname_missing"}));
}

TEST(NcclEnvRule, NeedsTheNetworkFacts)
{
    auto facts = env_facts({});
    facts.erase("network");
    auto findings = judge_one("nccl-env", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::skip);
}

TEST(NcclEnvRule, EveryCodeEmittedIsDocumented)
{
    const auto& probe = test_support::probe_named("nccl-env");
    std::vector<std::string> documented;
    for (const auto& c : probe.codes) {
        documented.push_back(c.code);
    }
    for (const auto& vars : std::vector<std::map<std::string, std::string>>{
             {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_IB_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}, {"NCCL_DEBUG", "INFO"},
                 {"NCCL_NET_GDR_LEVEL", "LOC"}, {"NCCL_SOCKET_IFNAME", "x"}, {"CUDA_VISIBLE_DEVICES", ""}},
             {{"NCCL_P2P_LEVEL", "NVL"}, {"NCCL_SOCKET_IFNAME", "eth0,zz"}}, {{"NCCL_SOCKET_IFNAME", "eth"}},
             {{"NCCL_SOCKET_IFNAME", "zz"}}}) {
        for (const auto& f : judge(vars, {"eth0", "lo"}, true)) {
            EXPECT_NE(std::find(documented.begin(), documented.end(), f.code), documented.end()) << f.code;
            if (f.severity == Severity::warn || f.severity == Severity::fail) {
                EXPECT_FALSE(f.remedy.empty()) << f.code;
            }
        }
    }
}
