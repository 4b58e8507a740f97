// fit --cuda-context measure: the fake NVML's used memory read from a file that a stand-in
// interpreter (/bin/sh, written here) raises while it "holds its context", as the real script
// makes PyTorch or TensorFlow do.
#include "base/error.hpp"
#include "doctor/fit/cuda_context.hpp"
#include "doctor/fit/gpu_memory.hpp"
#include "doctor/fit/search.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using doctor::fit::ContextMeasurement;
using doctor::fit::Framework;
using doctor::fit::measure_cuda_contexts;
using test_support::ScopedEnv;

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

TEST(FitContextReady, TheScriptsLineGivesThePool)
{
    // The script says it holds its context by printing its allocator's pool, read as the search
    // reads a trial's memory lines.
    EXPECT_EQ(doctor::fit::read_memory_report("loading\nGPUKIT_RESERVED_BYTES=2097152\n").reserved_bytes, 2097152u);
    EXPECT_EQ(doctor::fit::read_memory_report("GPUKIT_RESERVED_BYTES=0\r\n").reserved_bytes, 0u);
    EXPECT_FALSE(doctor::fit::read_memory_report("ModuleNotFoundError: No module named 'torch'").reserved_bytes);
    EXPECT_FALSE(doctor::fit::read_memory_report("MY_GPUKIT_RESERVED_BYTES=5\n").reserved_bytes);
    EXPECT_THROW(doctor::fit::read_memory_report("GPUKIT_RESERVED_BYTES=lots\n"), base::Error);
    EXPECT_THROW(doctor::fit::read_memory_report("GPUKIT_RESERVED_BYTES=2 MiB\n"), base::Error);
    EXPECT_THROW(doctor::fit::read_memory_report("GPUKIT_RESERVED_BYTES=99999999999999999999999\n"), base::Error);
}

// Two H100s, an A100 40GB, and two A100 80GB of which the first is in MIG mode (NVML indexes 0
// to 4), each GPU's used memory in a file of its own.
class FitContextMeasure : public ::testing::Test {
protected:
    void SetUp() override
    {
        nlohmann::json gpus = nlohmann::json::array();
        const char* names[] = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"};
        for (int i = 0; i < 5; ++i) {
            const std::string used = (m_dir / fmt::format("used{}", i)).string();
            std::ofstream(used) << 4 * MiB;
            gpus.push_back({{"bus_id", fmt::format("00000000:{:02X}:00.0", 7 + i)}, {"name", names[i]},
                {"uuid", fmt::format("GPU-{}", i)}, {"memory_total", 85899345920ULL}, {"memory_used_file", used}});
        }
        gpus[3]["mig"] = {"MIG-3a"}; // split into MIG instances
        m_fixture.emplace(m_dir, nlohmann::json{{"gpus", gpus}}.dump());
    }

    // A stand-in interpreter: checks that it was given "-c <script> FRAMEWORK", raises the used
    // memory of the GPU CUDA_VISIBLE_DEVICES names (GPU-i) by `rise` + i · 100 MiB bytes for 0.3 s,
    // saying `reserved` is its pool, then puts it back.
    std::string interpreter(std::uint64_t rise, std::uint64_t reserved, const std::string& framework = "pytorch")
    {
        const std::string path = (m_dir / "python").string();
        std::ofstream(path) << fmt::format(
            "#!/bin/sh\n"
            "[ \"$1\" = -c ] && [ \"$3\" = {framework} ] || {{ echo \"bad arguments: $1 $3\" >&2; exit 9; }}\n"
            "[ \"$CUDA_DEVICE_ORDER\" = PCI_BUS_ID ] || {{ echo 'CUDA would number the GPUs otherwise' >&2; exit 9; "
            "}}\n"
            "case \"$2\" in *GPUKIT_RESERVED_BYTES*) ;; *) echo 'not the context script' >&2; exit 9;; esac\n"
            "file='{dir}/used'\"${{CUDA_VISIBLE_DEVICES#GPU-}}\"\n"
            "echo $(( 4194304 + {rise} + ${{CUDA_VISIBLE_DEVICES#GPU-}} * 104857600 )) > \"$file\"\n"
            "echo 'GPUKIT_RESERVED_BYTES={reserved}'\n"
            "sleep 0.3\necho 4194304 > \"$file\"\n",
            fmt::arg("framework", framework), fmt::arg("dir", m_dir.path().string()), fmt::arg("rise", rise),
            fmt::arg("reserved", reserved));
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path;
    }

    std::string script(const std::string& body)
    {
        const std::string path = (m_dir / "python").string();
        std::ofstream(path) << "#!/bin/sh\n" << body;
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path;
    }

    std::string unavailable(const std::vector<unsigned>& indexes, const std::string& python,
        std::chrono::milliseconds timeout = std::chrono::seconds(20))
    {
        try {
            measure_cuda_contexts(Framework::pytorch, indexes, python, timeout);
        } catch (const base::Unavailable& e) {
            return e.what();
        }
        ADD_FAILURE() << "measured";
        return "";
    }

    test_support::TempDir m_dir;
    std::optional<test_support::FakeNvmlFixture> m_fixture;
    ScopedEnv m_library{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH};
};

} // namespace

TEST_F(FitContextMeasure, OneGpuOfEachModelWithThePoolTakenOff)
{
    // 500 MiB more in use, 2 MiB of it PyTorch's pool: a 498 MiB context, on GPU 0 for the H100s
    // (GPU 1 is the same model) and on GPU 2 for the A100.
    const auto measured =
        measure_cuda_contexts(Framework::pytorch, {0, 1, 2}, interpreter(500 * MiB, 2 * MiB), std::chrono::seconds(20));
    ASSERT_EQ(measured.size(), 2u);
    EXPECT_EQ(measured[0].index, 0u);
    EXPECT_EQ(measured[0].gpu, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(measured[0].before, 4 * MiB);
    EXPECT_EQ(measured[0].peak, 504 * MiB);
    EXPECT_EQ(measured[0].reserved, 2 * MiB);
    EXPECT_EQ(measured[0].bytes, 498 * MiB);
    EXPECT_EQ(measured[1].index, 2u);
    EXPECT_EQ(measured[1].gpu, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(measured[1].bytes, 698 * MiB);
    // Only the GPUs asked for.
    const auto second = measure_cuda_contexts(
        Framework::tensorflow, {1}, interpreter(300 * MiB, 0, "tensorflow"), std::chrono::seconds(20));
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0].index, 1u);
    EXPECT_EQ(second[0].bytes, 400 * MiB);
}

TEST_F(FitContextMeasure, WhatWentWrongIsSaidWithWhatToGiveInstead)
{
    const std::string failed = unavailable({0},
        script("echo 'Traceback (most recent call last):' >&2\n"
               "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\n"
               "exit 1\n"));
    EXPECT_NE(failed.find("stopped before holding a context: exit status 1"), std::string::npos) << failed;
    EXPECT_NE(failed.find("No module named 'torch'"), std::string::npos) << failed;
    EXPECT_NE(failed.find("--cuda-context SIZE"), std::string::npos) << failed;

    const std::string silent = unavailable({0}, script("echo 'done'\n"));
    EXPECT_NE(silent.find("exit status 0 without its GPUKIT_RESERVED_BYTES line (last: 'done')"), std::string::npos)
        << silent;

    // A context elsewhere (CUDA_VISIBLE_DEVICES not honoured): no rise on the GPU measured.
    const std::string none = unavailable({0}, script("echo 'GPUKIT_RESERVED_BYTES=2097152'\n"));
    EXPECT_NE(none.find("no context on this GPU"), std::string::npos) << none;

    // A framework that hangs is stopped at the deadline.
    const auto start = std::chrono::steady_clock::now();
    const std::string hung = unavailable({0}, script("echo importing\nsleep 30\n"), std::chrono::seconds(1));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_NE(hung.find("did not finish in 1 s"), std::string::npos) << hung;
    EXPECT_NE(hung.find("importing"), std::string::npos) << hung;

    // A crash in the CUDA library.
    const std::string crashed = unavailable({0}, script("kill -SEGV $$\n"));
    EXPECT_NE(crashed.find("killed by SIGSEGV (exit status 139)"), std::string::npos) << crashed;

    const std::string garbled = unavailable({0}, script("echo 'GPUKIT_RESERVED_BYTES=many'\n"));
    EXPECT_NE(garbled.find("is not a number of bytes"), std::string::npos) << garbled;

    // A model whose only GPU here is split into MIG instances is refused; with a whole one of the
    // same model beside it, that one is measured.
    const std::string mig = unavailable({3}, interpreter(MiB, 0));
    EXPECT_NE(mig.find("GPU 3 (NVIDIA A100-SXM4-80GB) is split into MIG instances"), std::string::npos) << mig;
    const auto whole = measure_cuda_contexts(Framework::pytorch, {3, 4}, interpreter(MiB, 0), std::chrono::seconds(20));
    ASSERT_EQ(whole.size(), 1u);
    EXPECT_EQ(whole[0].index, 4u);

    // A pool too large to be one is no context, not a wrapped-around number.
    const std::string huge = unavailable({0},
        script("echo 8388608 > '" + (m_dir / "used0").string() +
            "'\necho GPUKIT_RESERVED_BYTES=18446744073709551615\nsleep 0.3\n"));
    EXPECT_NE(huge.find("no context on this GPU"), std::string::npos) << huge;

    const std::string no_gpu = unavailable({7}, interpreter(MiB, 0));
    EXPECT_NE(no_gpu.find("NVML lists none of the GPUs"), std::string::npos) << no_gpu;
}

TEST_F(FitContextMeasure, NoNvmlIsSaid)
{
    ScopedEnv none{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"};
    const std::string message = unavailable({0}, interpreter(MiB, 0));
    EXPECT_NE(message.find("cannot read NVML"), std::string::npos) << message;
}

TEST_F(FitContextMeasure, TheCommandLineUsesTheLargestAndShowsEach)
{
    // gpudoctor fit itself, on GPUs 0 to 2, with GPUKIT_PYTHON as the interpreter:
    // 698 MiB on the H100s (GPU 0), 898 on the A100 (GPU 2), which counts for all.
    const std::string python = interpreter(700 * MiB, 2 * MiB);
    const auto r = test_support::run({GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer",
                                         "adamw", "--gpus", "0,1,2", "--cuda-context", "measure", "--json"},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()}, {"GPUKIT_PYTHON", python}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["breakdown"]["cuda_context_bytes"], 898 * MiB);
    EXPECT_EQ(doc["breakdown"]["cuda_context_measured"][0]["bytes"], 698 * MiB);
    ASSERT_EQ(doc["breakdown"]["cuda_context_measured"].size(), 2u);
    EXPECT_EQ(doc["breakdown"]["cuda_context_measured"][1]["name"], "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(doc["breakdown"]["cuda_context_measured"][1]["reserved_bytes"], 2 * MiB);

    const auto text = test_support::run({GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer",
                                            "adamw", "--gpus", "2", "--cuda-context", "measure"},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()}, {"GPUKIT_PYTHON", python}});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("measured on GPU 2 (NVIDIA A100-SXM4-40GB)"), std::string::npos) << text.out;

    // GPUs from the table are not this node's: nothing to measure on.
    const auto table = test_support::run(
        {GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-model", "V100",
            "--cuda-context", "measure"},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()}, {"GPUKIT_PYTHON", python}});
    EXPECT_EQ(table.exit_code, 2);
    EXPECT_NE(table.err.find("measures on this node's GPUs"), std::string::npos) << table.err;

    // An input error is said before anything is measured.
    const std::string ran = (m_dir / "ran").string();
    const auto early =
        test_support::run({GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw",
                              "--global-batch", "0", "--cuda-context", "measure"},
            {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()},
                {"GPUKIT_PYTHON", script("touch '" + ran + "'\n")}});
    EXPECT_EQ(early.exit_code, 2) << early.err;
    const auto uneven =
        test_support::run({GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw",
                              "--gpus", "0", "--grad-accum", "4", "--global-batch", "30", "--cuda-context", "measure"},
            {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()},
                {"GPUKIT_PYTHON", script("touch '" + ran + "'\n")}});
    EXPECT_EQ(uneven.exit_code, 2) << uneven.err;
    EXPECT_NE(uneven.err.find("not a multiple of --grad-accum 4"), std::string::npos) << uneven.err;
    EXPECT_FALSE(std::filesystem::exists(ran));

    // The interpreter failing is "could not run", 3.
    const auto failed = test_support::run({GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "bf16",
                                              "--optimizer", "adamw", "--cuda-context", "measure"},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", m_fixture->path()},
            {"GPUKIT_PYTHON", script("echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")}});
    EXPECT_EQ(failed.exit_code, 3);
    EXPECT_NE(failed.err.find("No module named 'torch'"), std::string::npos) << failed.err;
    EXPECT_TRUE(failed.out.empty()) << failed.out;
}

TEST_F(FitContextMeasure, TheScriptRunsTheRealPyTorchUpToCuda)
{
    // Debian's python3-torch has no CUDA: the script gets as far as asking PyTorch for a tensor on
    // the GPU, and what PyTorch says is what the user is told.
    const char* python = "/usr/bin/python3";
    if (test_support::run({python, "-c", "import torch"}, {}, std::chrono::seconds(120)).exit_code != 0) {
        GTEST_SKIP() << python << " has no torch (Debian package python3-torch)";
    }
    const std::string message = unavailable({0}, python, std::chrono::seconds(120));
    EXPECT_NE(message.find("stopped before holding a context: exit status 1"), std::string::npos) << message;
    EXPECT_TRUE(message.find("CUDA") != std::string::npos || message.find("NVIDIA") != std::string::npos) << message;
}

TEST_F(FitContextMeasure, AStuckNvmlEndsGpudoctorWithAMessage)
{
    // nvmlDeviceGetMemoryInfo never returns (a wedged driver): the sampler's deadline ends the
    // process with exit status 3 and says why, where it would hang for ever.
    const std::string stuck = (m_dir / "stuck.json").string();
    std::ofstream(stuck) << R"({"hang_in": "nvmlDeviceGetMemoryInfo",
        "gpus": [{"bus_id": "00000000:07:00.0", "memory_total": 85899345920}]})";
    ScopedEnv fixture{"FAKE_NVML_FIXTURE", stuck};
    EXPECT_EXIT({ doctor::fit::GpuMemorySampler sampler({0}, std::chrono::milliseconds(50), 1); },
        ::testing::ExitedWithCode(3), "an NVML call did not return in time");
}
