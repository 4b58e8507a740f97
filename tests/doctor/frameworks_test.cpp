#include "base/process.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Fake frameworks: python packages written into a temporary directory put on PYTHONPATH.

using Files = std::map<std::string, std::string>;

struct TorchShape {
    std::string version = "2.3.0+cu121";
    std::string cuda = "'12.1'"; // python literal: None for a CPU build
    std::string available = "True";
    int count = 8;
    std::string available_body; // extra python run inside is_available()
    std::string nccl_available = "True";
};

Files fake_torch(const TorchShape& t)
{
    return {
        {"torch/__init__.py",
            "__version__ = '" + t.version + "'\nfrom . import version, cuda, backends, distributed\n"},
        {"torch/version.py", "cuda = " + t.cuda + "\nhip = None\n"},
        {"torch/cuda/__init__.py",
            "def is_available():\n    " + t.available_body + "\n    return " + t.available +
                "\n\ndef device_count():\n    return " + std::to_string(t.count) + "\n"},
        {"torch/cuda/nccl.py", "def version():\n    return (2, 20, 5)\n"},
        {"torch/backends/__init__.py", "from . import cudnn\n"},
        {"torch/backends/cudnn.py",
            "def version():\n    return " + std::string(t.cuda == "None" ? "None" : "8902") + "\n"},
        {"torch/distributed.py",
            "def is_available():\n    return True\n\ndef is_nccl_available():\n    return " + t.nccl_available +
                "\n\ndef is_mpi_available():\n    return False\n"},
    };
}

const Files tensorflow_two_gpus = {
    {"tensorflow/__init__.py", R"(__version__ = '2.16.1'
class test:
    @staticmethod
    def is_built_with_cuda():
        return True
class sysconfig:
    @staticmethod
    def get_build_info():
        return {'cuda_version': '12.3', 'cudnn_version': '8'}
class config:
    @staticmethod
    def list_physical_devices(kind):
        return ['/physical_device:GPU:0', '/physical_device:GPU:1'] if kind == 'GPU' else []
)"},
};

// A CUDA file missing at import: the classic broken wheel.
const Files jax_broken = {
    {"jax/__init__.py",
        "raise ImportError('libcudart.so.12: cannot open shared object file: No such file or "
        "directory')\n"},
};

// An old version without the calls the script uses: its answers are "unknown", not a crash.
const Files mxnet_old = {
    {"mxnet/__init__.py",
        "__version__ = '1.2.0'\nclass context:\n    @staticmethod\n    def num_gpus():\n        "
        "return 2\n"},
};

Files merge(std::initializer_list<Files> parts)
{
    Files out;
    for (const auto& p : parts) {
        out.insert(p.begin(), p.end());
    }
    return out;
}

// The interpreter itself (not a pyenv or venv shim), or "" when this machine has none.
std::string real_python()
{
    const char* path = std::getenv("PATH");
    auto python = base::find_executable("python3", path);
    if (!python) {
        return "";
    }
    auto r = base::run_command({*python, "-c", "import sys; print(sys.executable)"}, std::chrono::seconds(20));
    std::string exe = r.output.substr(0, r.output.find('\n'));
    return r.exit_code == 0 && fs::exists(exe) ? exe : "";
}

class FrameworksCollect : public ::testing::Test {
protected:
    void SetUp() override
    {
        static const std::string python = real_python();
        if (python.empty()) {
            GTEST_SKIP() << "no python3 on this machine";
        }
        m_python = python;
        fs::create_directories(m_dir / "bin");
        fs::create_directories(m_dir / "site");
        // `python3` on the snapshot's PATH: the real interpreter without site-packages (-S), so
        // frameworks installed on this machine cannot leak in; PYTHONPATH still applies.
        write(m_dir / "bin" / "python3", "#!/bin/sh\nexec '" + python + "' -S \"$@\"\n");
        fs::permissions(m_dir / "bin" / "python3", fs::perms::owner_all);
        m_ctx.env = {{"PATH", (m_dir / "bin").string() + ":/usr/bin:/bin"}, {"PYTHONPATH", (m_dir / "site").string()},
            {"PYTHONNOUSERSITE", "1"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
        m_ctx.timeout = std::chrono::seconds(20);
    }

    static void write(const fs::path& file, const std::string& text)
    {
        fs::create_directories(file.parent_path());
        std::ofstream(file) << text;
    }

    void install(const Files& files)
    {
        for (const auto& [name, text] : files) {
            write(m_dir / "site" / name, text);
        }
    }

    nlohmann::json collect() const { return test_support::collector_named("frameworks").collect(m_ctx); }

    test_support::TempDir m_dir;
    std::string m_python;
    doctor::engine::CollectContext m_ctx;
};

// NVML facts of a node: `gpus` GPUs, a driver supporting `cuda` (12040 = 12.4).
nlohmann::json nvml_facts(int gpus, int cuda = 12040)
{
    nlohmann::json list = nlohmann::json::array();
    for (int i = 0; i < gpus; ++i) {
        list.push_back({{"index", i}, {"bus_id", "0000:0" + std::to_string(i) + ":00.0"}});
    }
    return {{"driver_file", "NVRM version: 550.54.15"}, {"nvml_loaded", true}, {"driver_version", "550.54.15"},
        {"cuda_driver_version", cuda}, {"gpus", list}};
}

const nlohmann::json no_driver = {{"driver_file", nullptr}, {"nvml_loaded", false},
    {"nvml_error", "libnvidia-ml.so.1: cannot open shared object file"}};

nlohmann::json facts_with(const nlohmann::json& frameworks, const nlohmann::json& nvml = nvml_facts(8))
{
    nlohmann::json mine = {{"python", "/usr/bin/python3"}, {"python_version", "3.11.7"},
        {"cuda_visible_devices", nullptr}, {"frameworks", frameworks}};
    return {{"frameworks", mine}, {"nvml", nvml}};
}

nlohmann::json only(const std::string& name, const nlohmann::json& f)
{
    nlohmann::json out;
    for (const char* n : {"torch", "tensorflow", "jax", "horovod", "mxnet"}) {
        out[n] = {{"installed", false}};
    }
    out[name] = f;
    return out;
}

const nlohmann::json torch_cpu = {{"installed", true}, {"version", "2.3.0+cpu"}, {"cuda_build", nullptr},
    {"hip_build", nullptr}, {"cuda_available", false}, {"device_count", 0}, {"cudnn_version", nullptr},
    {"nccl_available", false}, {"mpi_available", false}};

nlohmann::json torch_cuda(const std::string& cuda, bool available, int count)
{
    return {{"installed", true}, {"version", "2.5.1+cu" + cuda}, {"cuda_build", cuda}, {"hip_build", nullptr},
        {"cuda_available", available}, {"device_count", count}, {"cudnn_version", 90100}, {"nccl_version", "2.21.5"},
        {"nccl_available", true}, {"mpi_available", false}};
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The real script against fake packages

TEST_F(FrameworksCollect, NothingInstalledAndNothingLeaksInFromTheMachine)
{
    auto facts = collect();
    EXPECT_EQ(facts["python"], (m_dir / "bin" / "python3").string());
    EXPECT_FALSE(facts.contains("python_error")) << facts.dump();
    EXPECT_FALSE(facts.contains("error"));
    EXPECT_EQ(facts["python_version"].get<std::string>().substr(0, 2), "3.");
    for (const char* name : {"torch", "tensorflow", "jax", "horovod", "mxnet"}) {
        EXPECT_EQ(facts["frameworks"][name], nlohmann::json({{"installed", false}})) << name;
    }
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "frameworks.not_installed");
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(
        findings[0].message.find("none of torch, tensorflow, jax, horovod, mxnet is installed"), std::string::npos)
        << findings[0].message;
}

TEST_F(FrameworksCollect, ModulesInTheCurrentDirectoryAreNotImported)
{
    // gpudoctor run (as root, by a prolog or an administrator) in a directory another user can
    // write to: what they put there must not run.
    const fs::path planted = m_dir / "cwd";
    for (const char* module : {"json", "logging", "torch"}) {
        write(planted / (std::string(module) + ".py"),
            "open(" + nlohmann::json((m_dir / "ran").string()).dump() + ", 'a').write('" + module + "')\n");
    }
    const fs::path before = fs::current_path();
    fs::current_path(planted);
    auto facts = collect();
    fs::current_path(before);
    EXPECT_FALSE(fs::exists(m_dir / "ran")) << "a module from the current directory ran";
    EXPECT_FALSE(facts.contains("python_error")) << facts.dump();
    EXPECT_EQ(facts["frameworks"]["torch"], nlohmann::json({{"installed", false}})) << facts.dump();
}

TEST_F(FrameworksCollect, CpuOnlyTorchFails)
{
    TorchShape t;
    t.version = "2.3.0+cpu";
    t.cuda = "None";
    t.available = "False";
    t.count = 0;
    t.nccl_available = "False";
    install(fake_torch(t));
    auto facts = collect();
    const auto& torch = facts["frameworks"]["torch"];
    EXPECT_EQ(torch["installed"], true);
    EXPECT_EQ(torch["version"], "2.3.0+cpu");
    EXPECT_TRUE(torch["cuda_build"].is_null());
    EXPECT_EQ(torch["cuda_available"], false);
    EXPECT_FALSE(torch.contains("nccl_version")) << "no NCCL call on a CPU build";
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8, 12020)}});
    const auto* f = find_code(findings, "frameworks.cpu_only_build");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_EQ(f->subject, "torch");
    EXPECT_EQ(f->message, "torch 2.3.0+cpu: a CPU-only build");
    EXPECT_EQ(
        f->remedy, "install the CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu121");
    // the other four: one skip each
    EXPECT_EQ(codes_with(findings, Severity::skip).size(), 4U);
}

TEST_F(FrameworksCollect, CudaTorchThatSeesNoGpuFailsWithTheCause)
{
    TorchShape t;
    t.available = "False";
    t.count = 0;
    t.available_body =
        "import warnings; warnings.warn('CUDA initialization: CUDA driver initialization failed, you might not "
        "have a CUDA gpu.')";
    install(fake_torch(t));
    auto facts = collect();
    const auto& torch = facts["frameworks"]["torch"];
    EXPECT_EQ(torch["cuda_build"], "12.1");
    EXPECT_EQ(torch["cuda_available"], false);
    EXPECT_NE(torch.value("cuda_warning", "").find("CUDA driver initialization failed"), std::string::npos)
        << torch.dump();

    auto without_driver = judge_one("frameworks", {{"frameworks", facts}, {"nvml", no_driver}});
    const auto* f = find_code(without_driver, "frameworks.no_gpu_visible");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_NE(f->message.find("torch 2.3.0+cu121: a CUDA build that sees no GPU; likely cause: no NVIDIA driver"),
        std::string::npos)
        << f->message;

    // With a driver and GPUs, the warning CUDA gave is the cause named.
    auto with_driver = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    f = find_code(with_driver, "frameworks.no_gpu_visible");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("CUDA did not start: CUDA initialization: CUDA driver initialization failed"),
        std::string::npos)
        << f->message;
}

TEST_F(FrameworksCollect, HealthyTorchAndTensorflowPassAndPythonPathComesFromTheContext)
{
    install(merge({fake_torch(TorchShape{}), tensorflow_two_gpus}));
    auto facts = collect();
    const auto& torch = facts["frameworks"]["torch"];
    EXPECT_EQ(torch["device_count"], 8);
    EXPECT_EQ(torch["nccl_version"], "2.20.5");
    EXPECT_EQ(torch["cudnn_version"], 8902);
    EXPECT_EQ(facts["frameworks"]["tensorflow"]["device_count"], 2);
    EXPECT_EQ(facts["frameworks"]["tensorflow"]["cuda_version"], "12.3");

    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    const auto* ok = find_code(findings, "frameworks.ok");
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->subject, "torch");
    EXPECT_EQ(ok->message, "torch 2.3.0+cu121 (CUDA 12.1, cuDNN 8902, NCCL 2.20.5, no MPI): sees 8 GPUs");
    const auto* fewer = find_code(findings, "frameworks.fewer_gpus_visible");
    ASSERT_NE(fewer, nullptr);
    EXPECT_EQ(fewer->subject, "tensorflow");
    EXPECT_EQ(fewer->severity, Severity::warn);
    EXPECT_EQ(fewer->message, "tensorflow 2.16.1 sees 2 of the 8 GPUs NVML sees");
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());

    // The same packages are invisible when the context's PYTHONPATH does not name them.
    m_ctx.env.erase("PYTHONPATH");
    EXPECT_EQ(collect()["frameworks"]["torch"]["installed"], false);
}

TEST_F(FrameworksCollect, BrokenImportsFailAndOldVersionsReadAsUnknown)
{
    install(merge({jax_broken, mxnet_old, fake_torch(TorchShape{}),
        {{"horovod/__init__.py", "import a_module_that_is_not_there\n"}}}));
    auto facts = collect();
    EXPECT_EQ(facts["frameworks"]["jax"]["installed"], true);
    EXPECT_EQ(facts["frameworks"]["jax"]["import_error"],
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory");
    EXPECT_EQ(facts["frameworks"]["horovod"]["import_error"],
        "ModuleNotFoundError: No module named 'a_module_that_is_not_there'")
        << "a missing dependency is a broken install, not a missing framework";
    EXPECT_EQ(facts["frameworks"]["mxnet"]["cuda_build"], "unknown");
    EXPECT_EQ(facts["frameworks"]["mxnet"]["device_count"], 2);
    EXPECT_EQ(facts["frameworks"]["torch"]["device_count"], 8) << "one broken framework hides no other";

    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(2)}});
    std::vector<std::string> broken;
    for (const auto& f : findings) {
        if (f.code == "frameworks.broken_install") {
            broken.push_back(f.subject);
            EXPECT_EQ(f.severity, Severity::fail);
        }
    }
    EXPECT_EQ(broken, (std::vector<std::string>{"jax", "horovod"}));
    const auto* jax = find_code(findings, "frameworks.broken_install");
    EXPECT_NE(jax->message.find("libcudart.so.12"), std::string::npos);
    std::vector<std::string> passed;
    for (const auto& f : findings) {
        if (f.severity == Severity::pass) {
            passed.push_back(f.subject);
        }
    }
    EXPECT_EQ(passed, (std::vector<std::string>{"torch", "mxnet"}));
}

TEST_F(FrameworksCollect, HorovodWithoutNcclWarns)
{
    install(merge({fake_torch(TorchShape{}),
        {{"horovod/__init__.py", "__version__ = '0.28.1'\n"},
            {"horovod/torch/__init__.py",
                "def nccl_built():\n    return 0\ndef mpi_built():\n    return "
                "True\ndef gloo_built():\n    return True\n"}}}));
    auto facts = collect();
    const auto& hvd = facts["frameworks"]["horovod"];
    EXPECT_EQ(hvd["version"], "0.28.1");
    EXPECT_EQ(hvd["bindings"]["torch"]["nccl_built"], 0);
    EXPECT_EQ(hvd["bindings"]["torch"]["mpi_built"], true);
    EXPECT_FALSE(hvd["bindings"].contains("tensorflow")) << "only bindings of installed frameworks are tried";
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    const auto* w = find_code(findings, "frameworks.horovod_no_nccl");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->severity, Severity::warn);
    EXPECT_EQ(w->subject, "horovod");
    EXPECT_NE(w->message.find("horovod 0.28.1: built without NCCL for torch"), std::string::npos) << w->message;
}

TEST_F(FrameworksCollect, AFrameworkThatKillsPythonIsBrokenAndTheOthersAreStillRead)
{
    install(merge({fake_torch(TorchShape{}), mxnet_old,
        {{"tensorflow/__init__.py", "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"}}}));
    auto facts = collect();
    EXPECT_FALSE(facts.contains("python_error")) << facts.dump();
    EXPECT_EQ(facts["frameworks"]["torch"]["device_count"], 8);
    EXPECT_EQ(facts["frameworks"]["mxnet"]["device_count"], 2);
    EXPECT_EQ(facts["frameworks"]["jax"]["installed"], false);
    const std::string error = facts["frameworks"]["tensorflow"].value("import_error", "");
    EXPECT_NE(error.find("was killed by signal 4"), std::string::npos) << error;
    EXPECT_NE(error.find("while checking tensorflow"), std::string::npos) << error;
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    const auto* f = find_code(findings, "frameworks.broken_install");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "tensorflow");
}

TEST_F(FrameworksCollect, AHangingImportIsNamedWithinTheDeadline)
{
    install(merge({fake_torch(TorchShape{}), {{"jax/__init__.py", "import time\ntime.sleep(60)\n"}}}));
    m_ctx.timeout = std::chrono::seconds(3);
    const auto start = std::chrono::steady_clock::now();
    auto facts = collect();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    EXPECT_EQ(facts["frameworks"]["torch"]["device_count"], 8);
    EXPECT_EQ(facts["frameworks"]["jax"]["timed_out"], true);
    EXPECT_NE(facts.value("python_error", "").find("timed out after 2.4 s while checking jax"), std::string::npos)
        << facts.dump();
    EXPECT_EQ(facts["not_checked"], nlohmann::json({"horovod", "mxnet"}));
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    EXPECT_NE(find_code(findings, "frameworks.ok"), nullptr) << "torch was read before jax hung";
    std::vector<std::string> errors;
    for (const auto& f : findings) {
        if (f.severity == Severity::error) {
            errors.push_back(f.subject + ": " + f.message);
        }
    }
    ASSERT_EQ(errors.size(), 2U);
    EXPECT_NE(errors[0].find("jax: jax: not checked: python3 timed out"), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find("not checked: horovod, mxnet"), std::string::npos) << errors[1];
}

TEST_F(FrameworksCollect, GpukitPythonOverridesPathAndTheRealInterpreterPrefersPythonPath)
{
    install(fake_torch(TorchShape{}));
    // The interpreter itself, site-packages and all: the fake on PYTHONPATH still comes first.
    m_ctx.env["GPUKIT_PYTHON"] = m_python;
    auto facts = collect();
    EXPECT_EQ(facts["python"], m_python);
    EXPECT_EQ(facts["frameworks"]["torch"]["version"], "2.3.0+cu121");
    m_ctx.env["GPUKIT_PYTHON"] = (m_dir / "no-such-python").string();
    facts = collect();
    EXPECT_TRUE(facts["python"].is_null());
    EXPECT_NE(facts.value("python_error", "").find("is not an executable file"), std::string::npos);
}

TEST_F(FrameworksCollect, APyenvShimIsResolvedAsPyenvWould)
{
    // A pyenv shim is a bash script that starts pyenv before the interpreter (0.1 to 0.5 s): the
    // probe runs the interpreter the shim would, found by pyenv's own rules.
    const fs::path root = m_dir / "pyenv";
    const fs::path marker = m_dir / "shim_ran";
    write(root / "shims/python3", "#!/bin/sh\ntouch '" + marker.string() + "'\nexec '" + m_python + "' -S \"$@\"\n");
    const auto interpreter = [&](const fs::path& file) {
        write(file, "#!/bin/sh\nexec '" + m_python + "' -S \"$@\"\n");
        fs::permissions(file, fs::perms::owner_all);
    };
    fs::permissions(root / "shims/python3", fs::perms::owner_all);
    interpreter(root / "versions/3.10.13/bin/python3");
    interpreter(root / "versions/3.11.2/bin/python3");
    interpreter(root / "versions/3.11.7/bin/python3");
    interpreter(m_dir / "system/python3");
    write(root / "version", "3.10.13\n");
    write(m_dir / "project/.python-version", "# the project's\n3.11\n");
    fs::create_directories(m_dir / "project/src");
    m_ctx.env["PATH"] = (root / "shims").string() + ":" + (m_dir / "system").string();

    auto facts = collect(); // the global version file
    EXPECT_EQ(facts["python"], (root / "versions/3.10.13/bin/python3").string());
    EXPECT_EQ(facts["python_shim"], (root / "shims/python3").string());
    m_ctx.env["PWD"] = (m_dir / "project/src").string(); // .python-version above: 3.11 is 3.11.7
    EXPECT_EQ(collect()["python"], (root / "versions/3.11.7/bin/python3").string());
    m_ctx.env["PYENV_VERSION"] = "system";
    EXPECT_EQ(collect()["python"], (m_dir / "system/python3").string());
    m_ctx.env["PYENV_VERSION"] = "3.9.1:3.11.2"; // the first that is installed
    facts = collect();
    EXPECT_EQ(facts["python"], (root / "versions/3.11.2/bin/python3").string());
    EXPECT_TRUE(facts.contains("python_version")) << facts.dump();
    EXPECT_FALSE(fs::exists(marker)) << "the shim itself ran";
    m_ctx.env["PYENV_VERSION"] = "2.7.18"; // not installed: the shim runs, and says what it says
    facts = collect();
    EXPECT_EQ(facts["python"], (root / "shims/python3").string());
    EXPECT_FALSE(facts.contains("python_shim"));
}

TEST_F(FrameworksCollect, NoPythonIsASkip)
{
    m_ctx.env["PATH"] = (m_dir / "site").string();
    auto facts = collect();
    EXPECT_TRUE(facts["python"].is_null());
    EXPECT_FALSE(facts.contains("error"));
    auto findings = judge_one("frameworks", {{"frameworks", facts}, {"nvml", nvml_facts(8)}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "frameworks.no_python");
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(findings[0].message.find("python3 is not in PATH"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Rules from facts

TEST(FrameworksRule, CudaTorchWithoutGpusNamesTheLikelyCause)
{
    auto cause_of = [](const nlohmann::json& facts) {
        auto findings = judge_one("frameworks", facts);
        const auto* f = find_code(findings, "frameworks.no_gpu_visible");
        return f == nullptr ? std::string("(none)") : f->message + " | " + f->remedy;
    };
    auto blind = only("torch", torch_cuda("12.6", false, 0));
    EXPECT_NE(cause_of(facts_with(blind, no_driver)).find("likely cause: no NVIDIA driver"), std::string::npos);

    auto facts = facts_with(blind, nvml_facts(8, 12040));
    EXPECT_NE(cause_of(facts).find("likely cause: the driver supports CUDA 12.4, torch was built for CUDA 12.6"),
        std::string::npos)
        << cause_of(facts);

    for (const char* cvd : {"", "-1", "8"}) {
        auto hidden = facts_with(only("torch", torch_cuda("12.1", false, 0)), nvml_facts(8, 12040));
        hidden["frameworks"]["cuda_visible_devices"] = cvd;
        EXPECT_NE(cause_of(hidden).find(fmt::format("likely cause: CUDA_VISIBLE_DEVICES=\"{}\" hides every GPU", cvd)),
            std::string::npos)
            << cause_of(hidden);
    }
    // Older facts without the interpreter's view: the "env" collector's facts, if present.
    auto from_env = facts_with(only("torch", torch_cuda("12.1", false, 0)), nvml_facts(8, 12040));
    from_env["frameworks"].erase("cuda_visible_devices");
    from_env["env"] = {{"variables", {{"CUDA_VISIBLE_DEVICES", "-1"}}}};
    EXPECT_NE(cause_of(from_env).find("CUDA_VISIBLE_DEVICES=\"-1\""), std::string::npos) << cause_of(from_env);

    auto nvml_blind = facts_with(only("torch", torch_cuda("12.1", false, 0)), nvml_facts(0, 12040));
    EXPECT_NE(cause_of(nvml_blind).find("NVML sees no GPU either"), std::string::npos);

    auto unknown = facts_with(only("torch", torch_cuda("12.1", false, 0)), nvml_facts(8, 12040));
    EXPECT_NE(cause_of(unknown).find("NVML sees 8 GPUs but torch cannot use them"), std::string::npos);
}

TEST(FrameworksRule, FewerGpusAndNoNcclWarn)
{
    auto facts = facts_with(only("torch", torch_cuda("12.1", true, 4)), nvml_facts(8));
    facts["frameworks"]["cuda_visible_devices"] = "0,1,2,3";
    auto findings = judge_one("frameworks", facts);
    const auto* f = find_code(findings, "frameworks.fewer_gpus_visible");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->message, "torch 2.5.1+cu12.1 sees 4 of the 8 GPUs NVML sees (CUDA_VISIBLE_DEVICES=0,1,2,3)");
    EXPECT_EQ(find_code(findings, "frameworks.ok"), nullptr);

    auto no_nccl = torch_cuda("12.1", true, 8);
    no_nccl["nccl_available"] = false;
    no_nccl.erase("nccl_version");
    findings = judge_one("frameworks", facts_with(only("torch", no_nccl)));
    f = find_code(findings, "frameworks.no_nccl");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_FALSE(f->remedy.empty());
}

TEST(FrameworksRule, JaxBuilds)
{
    nlohmann::json cpu = {{"installed", true}, {"version", "0.4.30"}, {"jaxlib_version", "0.4.30"},
        {"cuda_plugin", nullptr}, {"backend", "cpu"}, {"platforms", {"cpu"}}};
    auto findings = judge_one("frameworks", facts_with(only("jax", cpu)));
    ASSERT_NE(find_code(findings, "frameworks.cpu_only_build"), nullptr);
    EXPECT_NE(find_code(findings, "frameworks.cpu_only_build")->remedy.find("jax[cuda12]"), std::string::npos);

    auto plugin_blind = cpu;
    plugin_blind["cuda_plugin"] = "jax_cuda12_plugin";
    findings = judge_one("frameworks", facts_with(only("jax", plugin_blind), no_driver));
    ASSERT_NE(find_code(findings, "frameworks.no_gpu_visible"), nullptr);

    auto gpu = plugin_blind;
    gpu["platforms"] = {"gpu", "gpu"};
    findings = judge_one("frameworks", facts_with(only("jax", gpu), nvml_facts(2)));
    ASSERT_NE(find_code(findings, "frameworks.ok"), nullptr);
    EXPECT_EQ(find_code(findings, "frameworks.ok")->message, "jax 0.4.30 (CUDA 12): sees 2 GPUs");
}

TEST(FrameworksRule, HorovodBindingsThatDoNotLoadAreABrokenInstall)
{
    nlohmann::json hvd = {{"installed", true}, {"version", "0.28.1"},
        {"bindings", {{"torch", {{"import_error", "ImportError: undefined symbol: _ZN3c104impl"}}}}}};
    auto findings = judge_one("frameworks", facts_with(only("horovod", hvd)));
    const auto* f = find_code(findings, "frameworks.broken_install");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("none of its framework bindings loads: horovod.torch: ImportError: undefined symbol"),
        std::string::npos)
        << f->message;

    hvd["bindings"]["torch"] = {{"nccl_built", 21805}, {"mpi_built", true}, {"gloo_built", true}};
    findings = judge_one("frameworks", facts_with(only("horovod", hvd)));
    ASSERT_NE(find_code(findings, "frameworks.ok"), nullptr);
    EXPECT_EQ(find_code(findings, "frameworks.ok")->message, "horovod 0.28.1: NCCL for torch, controllers MPI, Gloo");
}

TEST(FrameworksRule, CpuNodeByPolicyPasses)
{
    auto policy = doctor::engine::Policy::defaults();
    policy.expect_gpus = 0;
    auto findings = judge_one("frameworks", facts_with(only("torch", torch_cpu), no_driver), policy);
    ASSERT_NE(find_code(findings, "frameworks.ok"), nullptr);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
    findings = judge_one("frameworks", facts_with(only("torch", torch_cuda("12.1", false, 0)), no_driver), policy);
    EXPECT_TRUE(codes_with(findings, Severity::fail).empty());
}

TEST(FrameworksRule, UnknownAnswersAreNeverAPass)
{
    nlohmann::json odd = {{"installed", true}, {"version", "0.1"}, {"cuda_build", "unknown"},
        {"cuda_available", "unknown"}, {"device_count", "unknown"},
        {"errors", {{"cuda_available", "RuntimeError: boom"}}}};
    auto findings = judge_one("frameworks", facts_with(only("torch", odd)));
    const auto* f = find_code(findings, "frameworks.unknown");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::skip);
    EXPECT_NE(f->message.find("RuntimeError: boom"), std::string::npos);
    EXPECT_EQ(find_code(findings, "frameworks.ok"), nullptr);
}

TEST(FrameworksRule, PythonThatPrintedNothingIsAnErrorAndMissingFactsSkip)
{
    nlohmann::json mine = {{"python", "/usr/bin/python3"}, {"frameworks", nlohmann::json::object()},
        {"python_error", "/usr/bin/python3 exited with status 1 without printing its JSON: boom"}};
    auto findings = judge_one("frameworks", {{"frameworks", mine}, {"nvml", nvml_facts(8)}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "frameworks.python_failed");
    EXPECT_EQ(findings[0].severity, Severity::error);

    findings = judge_one("frameworks", {{"nvml", nvml_facts(8)}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::skip);
}

TEST(FrameworksRule, SomeInstalledGivesOneSkipPerMissingFramework)
{
    auto findings = judge_one("frameworks", facts_with(only("torch", torch_cuda("12.1", true, 8))));
    std::vector<std::string> skipped;
    for (const auto& f : findings) {
        if (f.code == "frameworks.not_installed") {
            skipped.push_back(f.subject);
        }
    }
    EXPECT_EQ(skipped, (std::vector<std::string>{"tensorflow", "jax", "horovod", "mxnet"}));
}

// The collector runs python3 with the snapshot's environment, not gpudoctor's own.
TEST(FrameworksCommand, RunCommandWithAnEnvironmentUsesExactlyThatOne)
{
    auto r = base::run_command({"sh", "-c", "echo \"[$GPUKIT_TEST_X][$HOME]\""}, std::chrono::seconds(10),
        {{"PATH", "/usr/bin:/bin"}, {"GPUKIT_TEST_X", "from the snapshot"}});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.output, "[from the snapshot][]\n");
    auto missing = base::run_command({"no-such-command-gpukit"}, std::chrono::seconds(10), {{"PATH", "/nowhere"}});
    EXPECT_EQ(missing.exit_code, 127);
}
