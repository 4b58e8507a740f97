#include "doctor/engine/runner.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <string>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::TempDir;

namespace {

const char* const fake_variables[] = {"FAKE_CUDA_DRIVER_VERSION", "FAKE_CUDA_INIT_ERROR", "FAKE_CUDA_DEVICE_COUNT",
    "FAKE_CUDART_VERSION", "FAKE_CUDNN_VERSION", "FAKE_CUBLAS_VERSION", "FAKE_NCCL_VERSION"};

/// Runs the real libraries collector in this process against the fake libraries, each selected
/// with its env override in the collect context (so the machine's own CUDA never answers). The
/// fakes answer from FAKE_* variables, set per test.
class LibrariesProbe : public ::testing::Test {
protected:
    LibrariesProbe()
    {
        m_env = {{"GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH}, {"GPUKIT_CUDART_LIBRARY", FAKE_CUDART_PATH},
            {"GPUKIT_CUDNN_LIBRARY", FAKE_CUDNN_PATH}, {"GPUKIT_CUBLAS_LIBRARY", FAKE_CUBLAS_PATH},
            {"GPUKIT_NCCL_LIBRARY", FAKE_NCCL_PATH}, {"LD_LIBRARY_PATH", "/opt/test/lib"}};
    }
    ~LibrariesProbe() override
    {
        for (const char* name : fake_variables) {
            unsetenv(name);
        }
    }
    static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

    nlohmann::json collect()
    {
        doctor::engine::CollectContext ctx;
        ctx.env = m_env;
        nlohmann::json facts;
        facts["libraries"] = test_support::collector_named("libraries").collect(ctx);
        return facts;
    }
    std::vector<doctor::engine::Finding> judge(const nlohmann::json& facts)
    {
        return test_support::judge_one("libraries", facts);
    }

    std::map<std::string, std::string> m_env;
};

} // namespace

TEST_F(LibrariesProbe, HealthyStackPassesWithEveryVersion)
{
    set("FAKE_CUDA_DEVICE_COUNT", "8");
    auto facts = collect();
    const auto& f = facts["libraries"];
    EXPECT_EQ(f["ld_library_path"], "/opt/test/lib");
    EXPECT_EQ(f["cuda_driver"]["raw"], 12040);
    EXPECT_EQ(f["cuda_driver"]["version"], "12.4");
    EXPECT_EQ(f["cuda_driver"]["device_count"], 8);
    EXPECT_EQ(f["cudart"]["file"], FAKE_CUDART_PATH);
    EXPECT_EQ(f["cudart"]["version"], "12.4");
    EXPECT_EQ(f["cudart"]["raw"], 12040);
    EXPECT_EQ(f["cudnn"]["version"], "9.1.0");
    EXPECT_EQ(f["cublas"]["version"], "12.4.5");
    EXPECT_EQ(f["cublas"]["raw"], 120405);
    EXPECT_EQ(f["nccl"]["version"], "2.18.3");
    EXPECT_FALSE(f.contains("error"));

    auto findings = judge(facts);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    EXPECT_TRUE(codes_with(findings, Severity::warn).empty());
    EXPECT_TRUE(codes_with(findings, Severity::skip).empty());
    EXPECT_EQ(codes_with(findings, Severity::pass),
        (std::vector<std::string>{
            "libraries.cuda_driver", "libraries.cudart", "libraries.cudnn", "libraries.cublas", "libraries.nccl"}));
    EXPECT_EQ(findings[0].message, std::string("CUDA driver API 12.4 (") + FAKE_CUDA_PATH + "), 8 devices");
    EXPECT_EQ(findings[1].message,
        std::string("CUDA runtime 12.4 (") + FAKE_CUDART_PATH + "); the driver supports CUDA 12.4");
    EXPECT_EQ(findings[4].subject, "nccl");
}

TEST_F(LibrariesProbe, VersionsDecodeInBothEncodings)
{
    set("FAKE_CUDNN_VERSION", "8902"); // cuDNN 8: major*1000 + minor*100 + patch
    set("FAKE_NCCL_VERSION", "2804"); // NCCL before 2.9: major*1000 + minor*100 + patch
    set("FAKE_CUDART_VERSION", "11080");
    auto old = collect()["libraries"];
    EXPECT_EQ(old["cudnn"]["version"], "8.9.2");
    EXPECT_EQ(old["cudnn"]["raw"], 8902);
    EXPECT_EQ(old["nccl"]["version"], "2.8.4");
    EXPECT_EQ(old["cudart"]["version"], "11.8");

    set("FAKE_CUDNN_VERSION", "90100"); // cuDNN 9: major*10000 + minor*100 + patch
    set("FAKE_NCCL_VERSION", "22105"); // NCCL 2.9 on: major*10000 + minor*100 + patch
    set("FAKE_CUBLAS_VERSION", "13.0.2");
    auto current = collect()["libraries"];
    EXPECT_EQ(current["cudnn"]["version"], "9.1.0");
    EXPECT_EQ(current["nccl"]["version"], "2.21.5");
    EXPECT_EQ(current["cublas"]["version"], "13.0.2");
}

TEST_F(LibrariesProbe, RuntimeNewerThanTheDriverFailsAcrossMajorVersionsWarnsWithinOne)
{
    set("FAKE_CUDA_DRIVER_VERSION", "12040");
    set("FAKE_CUDART_VERSION", "13000");
    auto findings = judge(collect());
    EXPECT_EQ(codes_with(findings, Severity::fail), (std::vector<std::string>{"libraries.runtime_newer_than_driver"}));
    const auto* f = find_code(findings, "libraries.runtime_newer_than_driver");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "cudart");
    EXPECT_EQ(f->message,
        std::string("CUDA runtime 13.0 (") + FAKE_CUDART_PATH +
            ") is newer than this driver supports (CUDA 12.4): programs built with it fail with 'CUDA driver "
            "version is insufficient'");
    EXPECT_NE(f->remedy.find("upgrade the NVIDIA driver, or use a CUDA runtime of 12.4 or older"), std::string::npos)
        << f->remedy;
    EXPECT_EQ(f->facts["cuda_driver"]["raw"], 12040);
    EXPECT_EQ(find_code(findings, "libraries.cudart"), nullptr);

    set("FAKE_CUDART_VERSION", "12060"); // minor version compatibility: a warning
    auto minor = judge(collect());
    EXPECT_TRUE(codes_with(minor, Severity::fail).empty());
    EXPECT_EQ(codes_with(minor, Severity::warn), (std::vector<std::string>{"libraries.runtime_newer_minor"}));

    set("FAKE_CUDA_DRIVER_VERSION", "13000"); // an older runtime on a newer driver is fine
    auto fine = judge(collect());
    EXPECT_TRUE(codes_with(fine, Severity::fail).empty());
    EXPECT_NE(find_code(fine, "libraries.cudart"), nullptr);
}

TEST_F(LibrariesProbe, OldNcclAndCudnnWarnAgainstThePolicy)
{
    set("FAKE_NCCL_VERSION", "2804");
    set("FAKE_CUDNN_VERSION", "8600");
    auto findings = judge(collect());
    EXPECT_EQ(codes_with(findings, Severity::warn),
        (std::vector<std::string>{"libraries.cudnn_too_old", "libraries.nccl_too_old"}));
    const auto* nccl = find_code(findings, "libraries.nccl_too_old");
    ASSERT_NE(nccl, nullptr);
    EXPECT_EQ(nccl->message,
        std::string("NCCL 2.8.4 (") + FAKE_NCCL_PATH + ") is older than 2.18.0 (policy libraries.min_nccl)");
    EXPECT_FALSE(nccl->remedy.empty());

    auto policy = doctor::engine::Policy::defaults();
    policy.min_nccl = "2.8.0";
    policy.min_cudnn = "8.6.0";
    auto relaxed = test_support::judge_one("libraries", collect(), policy);
    EXPECT_TRUE(codes_with(relaxed, Severity::warn).empty());
}

TEST_F(LibrariesProbe, MissingLibrariesAreSkippedWithTheReasonNeverPassed)
{
    m_env["GPUKIT_CUDNN_LIBRARY"] = "/nonexistent/libcudnn.so.9";
    m_env["GPUKIT_NCCL_LIBRARY"] = "/nonexistent/libnccl.so.2";
    auto facts = collect();
    EXPECT_NE(facts["libraries"]["cudnn"]["missing"].get<std::string>().find("/nonexistent/libcudnn.so.9"),
        std::string::npos);
    auto findings = judge(facts);
    auto skipped = codes_with(findings, Severity::skip);
    EXPECT_EQ(skipped, (std::vector<std::string>{"libraries.not_found", "libraries.not_found"}));
    EXPECT_EQ(find_code(findings, "libraries.nccl"), nullptr);
    EXPECT_EQ(find_code(findings, "libraries.cudnn"), nullptr);
    const auto* cudnn = find_code(findings, "libraries.not_found");
    ASSERT_NE(cudnn, nullptr);
    EXPECT_EQ(cudnn->subject, "cudnn");
    EXPECT_NE(cudnn->message.find("cuDNN not found (cannot load /nonexistent/libcudnn.so.9"), std::string::npos)
        << cudnn->message;
    EXPECT_NE(cudnn->message.find("bundle their own copy"), std::string::npos);
    EXPECT_NE(find_code(findings, "libraries.cublas"), nullptr) << "the others are still judged";
}

TEST_F(LibrariesProbe, LibraryWithoutItsVersionCallIsUnusable)
{
    m_env["GPUKIT_CUDNN_LIBRARY"] = FAKE_CUDA_PATH; // loads, but is no cuDNN
    auto findings = judge(collect());
    const auto* f = find_code(findings, "libraries.unusable");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_EQ(f->message, std::string("cuDNN could not say its version: ") + FAKE_CUDA_PATH + " lacks cudnnGetVersion");
}

TEST_F(LibrariesProbe, NoCudaDriverLibrarySkipsTheWholeProbe)
{
    m_env["GPUKIT_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
    auto facts = collect();
    EXPECT_TRUE(facts["libraries"]["cuda_driver"].contains("missing"));
    EXPECT_EQ(facts["libraries"]["nccl"]["version"], "2.18.3") << "the libraries are still recorded";
    auto findings = judge(facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "libraries.no_cuda_driver");
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(
        findings[0].message.find("no CUDA driver library (cannot load /nonexistent/libcuda.so.1"), std::string::npos)
        << findings[0].message;
    EXPECT_NE(findings[0].message.find("NCCL 2.18.3"), std::string::npos) << findings[0].message;
}

TEST_F(LibrariesProbe, CuInitFailureFails)
{
    set("FAKE_CUDA_INIT_ERROR", "100");
    auto facts = collect();
    EXPECT_EQ(facts["libraries"]["cuda_driver"]["raw"], 12040) << "the version does not need cuInit";
    auto findings = judge(facts);
    const auto* f = find_code(findings, "libraries.cuda_init_failed");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_NE(f->message.find("CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected (CUDA error 100) (the driver "
                              "supports CUDA 12.4)"),
        std::string::npos)
        << f->message;
    EXPECT_EQ(find_code(findings, "libraries.cuda_driver"), nullptr);
}

TEST_F(LibrariesProbe, BrokenCollectorIsAnErrorNotAPass)
{
    auto findings = judge({{"libraries", {{"error", "timed out after 10 s"}}}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::error);
    EXPECT_EQ(findings[0].code, "libraries.error");
}

namespace {

/// The environment for the real gpudoctor binary: the fake driver and the fake libraries.
test_support::EnvChanges binary_env()
{
    return {{"GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH}, {"GPUKIT_CUDART_LIBRARY", FAKE_CUDART_PATH},
        {"GPUKIT_CUDNN_LIBRARY", FAKE_CUDNN_PATH}, {"GPUKIT_CUBLAS_LIBRARY", FAKE_CUBLAS_PATH},
        {"GPUKIT_NCCL_LIBRARY", FAKE_NCCL_PATH}};
}

} // namespace

TEST(LibrariesBinary, SonamesAreFoundOnLdLibraryPath)
{
    TempDir dir;
    std::filesystem::create_symlink(FAKE_CUDNN_PATH, dir / "libcudnn.so");
    std::filesystem::create_symlink(FAKE_CUBLAS_PATH, dir / "libcublas.so");
    auto env = binary_env();
    env["GPUKIT_CUDNN_LIBRARY"] = test_support::unset_var;
    env["GPUKIT_CUBLAS_LIBRARY"] = test_support::unset_var;
    env["LD_LIBRARY_PATH"] = dir.path().string();
    env["FAKE_CUDNN_VERSION"] = "8902";
    auto r = test_support::run({GPUDOCTOR_PATH, "snapshot", "--only", "libraries"}, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto facts = nlohmann::json::parse(r.out)["facts"]["libraries"];
    EXPECT_EQ(facts["ld_library_path"], dir.path().string());
    EXPECT_EQ(facts["cudnn"]["file"], "libcudnn.so");
    EXPECT_EQ(facts["cudnn"]["version"], "8.9.2");
    EXPECT_EQ(facts["cublas"]["file"], "libcublas.so");
    EXPECT_EQ(facts["cublas"]["version"], "12.4.5");
    EXPECT_EQ(facts["cudart"]["file"], FAKE_CUDART_PATH);
}

TEST(LibrariesBinary, HungCuInitTimesOutAndOnlyThisProbeErrors)
{
    auto env = binary_env();
    env["FAKE_CUDA_HANG_IN"] = "cuInit";
    const auto start = std::chrono::steady_clock::now();
    auto r = test_support::run(
        {GPUDOCTOR_PATH, "check", "--only", "libraries", "--timeout", "1", "--json"}, env, std::chrono::seconds(20));
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_FALSE(r.timed_out);
    EXPECT_LT(took, std::chrono::milliseconds(3000));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    auto report = nlohmann::json::parse(r.out);
    ASSERT_EQ(report["probes"].size(), 1U);
    const auto& findings = report["probes"][0]["findings"];
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0]["code"], "libraries.error");
    EXPECT_EQ(findings[0]["severity"], "error");
    EXPECT_NE(findings[0]["message"].get<std::string>().find("timed out after 1 s"), std::string::npos)
        << findings[0]["message"];
}

TEST(LibrariesBinary, CrashInCuInitIsAnError)
{
    auto env = binary_env();
    env["FAKE_CUDA_CRASH_IN"] = "cuInit";
    auto r =
        test_support::run({GPUDOCTOR_PATH, "check", "--only", "libraries", "--json"}, env, std::chrono::seconds(20));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    auto report = nlohmann::json::parse(r.out);
    const auto& findings = report["probes"][0]["findings"];
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0]["code"], "libraries.error");
    EXPECT_NE(findings[0]["message"].get<std::string>().find("crashed (Segmentation fault)"), std::string::npos)
        << findings[0]["message"];
}
