// gpudoctor fit's command line where golden files cannot hold the output (trial times vary):
// --search through the real binary, alone and after the analytic answer, and the exit statuses.
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using test_support::TempDir;

namespace {

class FitCli : public ::testing::Test {
protected:
    void SetUp() override
    {
        // A training script that runs out of GPU memory above batch 37, as PyTorch says it.
        m_script = script("train.sh",
            "if [ \"$1\" -gt 37 ]; then\n"
            "  echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.' >&2\n"
            "  exit 1\n"
            "fi\n"
            "echo \"step 0 batch $1 loss 6.9\"\n");
    }

    // An executable /bin/sh script of `body` in the test's directory; returns its path.
    std::string script(const std::string& name, const std::string& body) const
    {
        const std::string path = (m_dir / name).string();
        std::ofstream(path) << "#!/bin/sh\n" << body;
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path;
    }

    test_support::Finished fit(std::vector<std::string> args) const
    {
        args.insert(args.begin(), {GPUDOCTOR_PATH, "fit"});
        return test_support::run(args, {{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
    }

    TempDir m_dir;
    std::string m_script;
};

} // namespace

TEST_F(FitCli, SearchAloneFindsTheLimit)
{
    // --exact bisects to the end: 1 2 4 8 16 32 fit, 64 runs out, then 48 40 36 38 37.
    const auto r = fit({"--search", "--exact", "--max", "256", "--json", "--", m_script, "{batch}"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["best_batch"], 37);
    EXPECT_EQ(doc["trials"].size(), 12u);
    EXPECT_FALSE(doc.contains("max_batch_per_gpu")); // no analytic part
}

TEST_F(FitCli, SearchKeepsToItsTrialBudget)
{
    // Without --exact at most ceil(log2(256 / 1)) + 2 = 10 trials; the answer is a batch that fitted.
    const auto r = fit({"--search", "--max", "256", "--", m_script, "{batch}"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Search by trial: " + m_script + " {batch}"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Model states"), std::string::npos) << r.out;
    const auto json = fit({"--search", "--max", "256", "--json", "--", m_script, "{batch}"});
    const auto doc = nlohmann::json::parse(json.out);
    EXPECT_LE(doc["trials"].size(), 10u);
    ASSERT_TRUE(doc["best_batch"].is_number());
    EXPECT_LE(doc["best_batch"].get<unsigned>(), 37u);
    EXPECT_GE(doc["best_batch"].get<unsigned>(), 32u);
}

TEST_F(FitCli, SearchJoinsTheAnalyticJson)
{
    const auto r = fit({"--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "16GiB",
        "--search", "--exact", "--max", "64", "--json", "--", m_script, "{batch}"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["best_batch"], 37);
    EXPECT_TRUE(doc["trials"].is_array());
    EXPECT_GE(doc["trials"].size(), 2u);
    EXPECT_EQ(doc["trials"][0]["verdict"], "fits");
    EXPECT_TRUE(doc["max_batch_per_gpu"].is_number());
    EXPECT_TRUE(doc["breakdown"].is_object());
}

TEST_F(FitCli, SearchWithTheModelPrintsTheAnalyticAnswerFirst)
{
    const auto r = fit({"--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "16GiB",
        "--search", "--max", "64", "--", m_script, "{batch}"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto analytic = r.out.find("Max batch per GPU:");
    const auto search = r.out.find("Search by trial:");
    ASSERT_NE(analytic, std::string::npos) << r.out;
    ASSERT_NE(search, std::string::npos) << r.out;
    EXPECT_LT(analytic, search);
}

TEST_F(FitCli, SearchStoppedByAFailureExitsOne)
{
    const std::string failing = script("fail.sh", "echo 'ImportError: No module named torch' >&2\nexit 1\n");
    const auto r = fit({"--search", "--", failing, "{batch}"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("best batch: none"), std::string::npos) << r.out;
}

TEST_F(FitCli, SearchWhoseTrialPrintsABadMemoryLineIsAnInputError)
{
    const auto r = fit({"--search", "--", script("unit.sh", "echo \"GPUKIT_PEAK_BYTES=$1.5GB\"\n"), "{batch}"});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("batch 1: 'GPUKIT_PEAK_BYTES=1.5GB' is not a number of bytes"), std::string::npos) << r.err;
}

TEST_F(FitCli, SearchUsageErrors)
{
    struct Bad {
        std::vector<std::string> args;
        const char* message;
    };
    const std::vector<Bad> cases = {
        {{"--search"}, "fit --search: no command; give it after --"},
        {{"--", m_script, "{batch}"}, "a command after -- is run only with --search; add --search"},
        {{"--search", "--", m_script, "16"}, "no argument of the command holds {batch}"},
        {{"--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "16GiB", "--max", "8"},
            "--max is for the search by trial"},
        {{"--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "16GiB", "--exact"},
            "--exact is for the search by trial"},
        {{"--search", "--trial-timeout", "0", "--", m_script, "{batch}"}, "--trial-timeout 0: expected seconds"},
        {{"--search", "--min", "0", "--", m_script, "{batch}"}, "--min 0"},
        {{"--search", "--gpus", "2", "--", m_script, "{batch}"}, "--gpus is for the analytic fit"},
        {{"--search", "--", "gpukit-no-such-program", "{batch}"},
            "fit --search: program not found: 'gpukit-no-such-program' is not an executable in PATH"},
        {{"--search", "--", (m_dir / "missing.sh").string(), "{batch}"}, "is not an executable file"},
        {{"--search", "--max", "0x100", "--", m_script, "{batch}"}, "--max: '0x100' is not a decimal number"},
        {{"--search", "--trial-timeout", "0x1p4", "--", m_script, "{batch}"},
            "--trial-timeout: '0x1p4' is not a decimal number"},
    };
    for (const auto& c : cases) {
        const auto r = fit(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.out << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    }
}

// Numbers are read as written in decimal: a leading zero is not octal (CLI11 alone read 010 as 8).
TEST_F(FitCli, LeadingZerosAreDecimal)
{
    const auto r = fit({"--search", "--exact", "--min", "030", "--max", "040", "--", m_script, "{batch}"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("batch     30  fits"), std::string::npos) << "octal 030 is 24\n" << r.out;
    EXPECT_NE(r.out.find("batch     40  oom"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("best batch: 37"), std::string::npos) << r.out;
}

TEST_F(FitCli, ListAsJson)
{
    const auto r = fit({"--list", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_GE(doc["models"].size(), 9u);
    EXPECT_GE(doc["gpus"].size(), 9u);
    EXPECT_EQ(doc["models"][0]["name"], "resnet50"); // in the file's order
    EXPECT_EQ(doc["gpus"][0]["name"], "K80");
    // A Llama preset lists its grouped-query heads and gated MLP.
    for (const auto& m : doc["models"]) {
        if (m["name"] == "llama-70b") {
            EXPECT_EQ(m["kv_heads"], 8);
            EXPECT_EQ(m["intermediate"], 28672);
            EXPECT_EQ(m["gated_mlp"], true);
            EXPECT_EQ(m["dropout"], false);
        }
    }
}

TEST_F(FitCli, WorksFromAnyDirectory)
{
    // The presets and the GPU table are compiled in: nothing is read from share/.
    const auto r = test_support::run({"/bin/sh", "-c",
        std::string("cd / && exec ") + GPUDOCTOR_PATH +
            " fit --model densenet121 --precision amp --optimizer adam --gpu-model V100"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("densenet121: DenseNet-121 as in CheXNet"), std::string::npos) << r.out;
}

TEST_F(FitCli, ConfigFileAndMemoryAtABatch)
{
    // TinyLlama 1.1B's config.json (published, cut to the keys that matter): 1,100,048,384 parameters.
    const std::string config = (m_dir / "config.json").string();
    std::ofstream(config) << R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 5632, "max_position_embeddings": 2048, "num_attention_heads": 32,
        "num_hidden_layers": 22, "num_key_value_heads": 4, "rms_norm_eps": 1e-05,
        "tie_word_embeddings": false, "vocab_size": 32000})";
    const auto r = fit({"--config", config, "--seq", "512", "--precision", "bf16-pure", "--optimizer", "adamw",
        "--gpu-mem", "24GB", "--batch", "4", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["model"]["params"], 1100048384u);
    EXPECT_EQ(doc["model"]["kv_heads"], 4);
    EXPECT_EQ(doc["model"]["seq"], 512);
    EXPECT_EQ(doc["model"]["gated_mlp"], true);
    EXPECT_EQ(doc["training"]["attention"], "sdpa");
    // bf16-pure AdamW: 8 bytes per parameter.
    EXPECT_EQ(doc["breakdown"]["states"]["bytes"], 8 * 1100048384ULL);
    // Per layer (s = 512, h = 2048, a = 32, 4 key/value heads, I = 5632, sdpa, no dropout):
    // 3·2·s·h = 6,291,456; K and V repeated to the 32 heads before SDPA, 2 · 512 · 64 · 32 · 2 =
    // 4,194,304; MLP 2 · 512 · (2048 + 22,528) = 25,165,824; two RMSNorms, each its input in fp32
    // and its bf16 output, 2 · 6·s·h = 12,582,912; statistics 4 · 32 · 512 = 65,536: 48,300,032.
    // × 22 = 1,062,600,704; output layer: the final RMSNorm 6·s·h and the head's bf16 input 2·s·h,
    // 8,388,608, and the fp32 loss 12 · 512 · 32,000 = 196,608,000: 1,267,597,312 per sample.
    EXPECT_EQ(doc["breakdown"]["activations_per_sample"]["bytes"], 1267597312u);
    EXPECT_EQ(doc["training"]["loss"], "fp32");
    EXPECT_EQ(doc["model"]["norm"], "rms");
    const auto& at = doc["at_batch"];
    EXPECT_EQ(at["batch"], 4);
    EXPECT_EQ(at["activations_bytes"], 4 * 1267597312ULL);
    // --gpu-mem alone names no GPU: Hopper's cuBLAS workspaces, 2 × (32 + 1) MiB, which PyTorch
    // takes from its caching allocator; the context is outside it.
    EXPECT_EQ(at["workspace_bytes"], 66ULL << 20);
    EXPECT_EQ(at["allocated_bytes"], 8 * 1100048384ULL + 4 * 1267597312ULL + (66ULL << 20));
    EXPECT_EQ(at["peak_bytes"], 8 * 1100048384ULL + 4 * 1267597312ULL + (578ULL << 20));
    EXPECT_EQ(at["gpus"][0]["fits"], true);
    // FlashAttention-2 keeps K and V at their 4 heads: 22 × 3,670,016 less per sample.
    const auto flash = fit({"--config", config, "--seq", "512", "--precision", "bf16-pure", "--optimizer", "adamw",
        "--attention", "flash", "--gpu-mem", "24GB", "--json"});
    ASSERT_EQ(flash.exit_code, 0) << flash.err;
    EXPECT_EQ(
        nlohmann::json::parse(flash.out)["breakdown"]["activations_per_sample"]["bytes"], 1267597312u - 22 * 3670016u);
    // The text says the same, with what nvidia-smi and torch would show.
    const auto text = fit({"--config", config, "--seq", "512", "--precision", "bf16-pure", "--optimizer", "adamw",
        "--gpu-mem", "24GB", "--batch", "4"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("At batch 4: about 13.48 GiB per GPU"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("fits at the upper estimate, "), std::string::npos) << text.out;
}

TEST_F(FitCli, TheLossOptionSetsTheOutputLayer)
{
    // llama-3.2-1b at 512 tokens: s·h = 1,048,576, s·V = 512 · 128,256 = 65,667,072; the final
    // RMSNorm (its fp32 input and bf16 output) and the head's bf16 input, 8·s·h = 8,388,608.
    struct Case {
        std::vector<std::string> extra;
        std::uint64_t output_layer;
        std::string loss;
        std::string row;
    };
    const std::vector<Case> cases = {
        {{}, 8388608 + 12ULL * 65667072, "fp32", "the fp32 loss's log-probabilities and two gradients"},
        {{"--loss", "chunked"}, 8388608 + 6ULL * 65667072, "chunked", "the logits and the chunked loss's"},
        // Megatron's: half the vocabulary on each of 2 tensor-parallel GPUs, 6 · 32,833,536.
        {{"--loss", "fused", "--tp", "2"}, 8388608 + 6ULL * 32833536, "fused", "1/2 of the vocabulary"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args = {"--model", "llama-3.2-1b", "--seq", "512", "--precision", "bf16-pure",
            "--optimizer", "adamw", "--gpu-mem", "24GB"};
        args.insert(args.end(), c.extra.begin(), c.extra.end());
        const auto text = fit(args);
        ASSERT_EQ(text.exit_code, 0) << text.err;
        EXPECT_NE(text.out.find(", " + c.loss + " loss\n"), std::string::npos) << text.out;
        EXPECT_NE(text.out.find(c.row), std::string::npos) << text.out;
        args.emplace_back("--json");
        const auto r = fit(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const auto doc = nlohmann::json::parse(r.out);
        EXPECT_EQ(doc["training"]["loss"], c.loss);
        EXPECT_EQ(doc["breakdown"]["activations_per_sample"]["output_layer_bytes"], c.output_layer) << c.loss;
    }
    // Where no vocabulary is counted the JSON has no loss.
    const auto cnn =
        fit({"--model", "resnet50", "--precision", "fp32", "--optimizer", "sgd", "--gpu-mem", "16GB", "--json"});
    ASSERT_EQ(cnn.exit_code, 0) << cnn.err;
    EXPECT_TRUE(nlohmann::json::parse(cnn.out)["training"]["loss"].is_null());
}

TEST_F(FitCli, CnnAllocatedLeavesOutTheCachedShare)
{
    // ResNet-18 at batch 128 on an A100 (cuBLAS 18.25 MiB): what max_memory_allocated() shows is
    // the states and the saved tensors; the transient share is in the nvidia-smi peak only.
    const std::vector<std::string> args{"--model", "resnet18", "--precision", "fp32", "--optimizer", "sgd",
        "--gpu-model", "A100-40GB", "--batch", "128"};
    std::vector<std::string> with_json = args;
    with_json.emplace_back("--json");
    const auto r = fit(with_json);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    const auto& at = doc["at_batch"];
    const std::uint64_t transient = doc["breakdown"]["activations_per_sample"]["transient_bytes"];
    ASSERT_GT(transient, 0u);
    EXPECT_EQ(at["cached_bytes"], 128 * transient);
    EXPECT_EQ(at["allocated_bytes"].get<std::uint64_t>(),
        at["states_bytes"].get<std::uint64_t>() + at["activations_bytes"].get<std::uint64_t>() - 128 * transient +
            19136512u);
    EXPECT_EQ(at["peak_bytes"].get<std::uint64_t>(),
        at["states_bytes"].get<std::uint64_t>() + at["activations_bytes"].get<std::uint64_t>() + (512ULL << 20) +
            19136512u);
    const auto text = fit(args);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("(no context, no NCCL, no cached blocks)"), std::string::npos) << text.out;
}

TEST_F(FitCli, QloraOnALlamaPreset)
{
    const auto r = fit({"--model", "llama-7b", "--seq", "512", "--precision", "bf16-pure", "--optimizer", "adamw",
        "--lora-rank", "8", "--base-bits", "4", "--gpu-mem", "24GB", "--batch", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["training"]["lora"]["rank"], 8);
    EXPECT_EQ(doc["training"]["lora"]["base_bits"], 4);
    EXPECT_EQ(doc["training"]["lora"]["targets"], nlohmann::json::array({"q", "v"}));
    EXPECT_EQ(doc["breakdown"]["states"]["adapter_params"], 4194304u);
    EXPECT_EQ(doc["breakdown"]["states"]["gradients_bytes"], 2 * 4194304u);
    // Far under the 16-bit weights' 13.5 GB alone.
    EXPECT_LT(doc["breakdown"]["states"]["bytes"].get<std::uint64_t>(), 5000000000u);
    EXPECT_TRUE(doc["at_batch"]["gpus"][0]["fits"].get<bool>());
    // The upper estimate doubles the activations, as bitsandbytes before 0.43.2 held them, and
    // says so; the same run over 16-bit weights keeps the formula's +40 %.
    EXPECT_EQ(doc["breakdown"]["uncertainty"]["activations"], 1.0);
    EXPECT_NE(doc["breakdown"]["uncertainty"]["basis"].get<std::string>().find("bitsandbytes#1270"), std::string::npos);
    const auto b16 = fit({"--model", "llama-7b", "--seq", "512", "--precision", "bf16-pure", "--optimizer", "adamw",
        "--lora-rank", "8", "--gpu-mem", "40GB", "--json"});
    ASSERT_EQ(b16.exit_code, 0) << b16.err;
    EXPECT_EQ(nlohmann::json::parse(b16.out)["breakdown"]["uncertainty"]["activations"], 0.4);
    // At 24 GB the 4-bit base's max batch is where activations × 2 fit, well under its central one.
    const auto max =
        nlohmann::json::parse(fit({"--model", "llama-7b", "--seq", "512", "--precision", "bf16-pure", "--optimizer",
                                      "adamw", "--lora-rank", "8", "--base-bits", "4", "--gpu-mem", "24GB", "--json"})
                                  .out);
    EXPECT_LT(max["max_batch_per_gpu"].get<unsigned>() * 3, max["max_batch_per_gpu_central"].get<unsigned>() * 2);
}

TEST_F(FitCli, ModelParallelismAndOffloadInTheJson)
{
    const auto r =
        fit({"--model", "llama-70b", "--precision", "bf16", "--optimizer", "adam", "--tp", "8", "--sequence-parallel",
            "--pp", "4", "--zero", "1", "--dp", "2", "--offload", "optimizer", "--gpu-model", "A100-80GB", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["training"]["tp"], 8);
    EXPECT_EQ(doc["training"]["pp"], 4);
    EXPECT_EQ(doc["training"]["sequence_parallel"], true);
    EXPECT_EQ(doc["training"]["offload"], "optimizer");
    // 68,976,648,192 parameters over tp × pp = 32: 2,155,520,256 each; weights 2 B of them, the
    // optimizer's 12 B halved by ZeRO-1 over 2 and moved to the CPU.
    EXPECT_EQ(doc["breakdown"]["states"]["weights_bytes"], 2 * 2155520256ULL);
    EXPECT_EQ(doc["breakdown"]["states"]["optimizer_bytes"], 0);
    EXPECT_EQ(doc["breakdown"]["states"]["offloaded_bytes"], 6 * 2155520256ULL);
}

TEST_F(FitCli, DdpBucketsOverSeveralGpus)
{
    // gpt2 (124,439,808 parameters), fp32 AdamW over 4 GPUs without ZeRO: torch's DDP keeps a
    // bucket copy of the fp32 gradients.
    const std::vector<std::string> ddp = {"--model", "gpt2", "--precision", "fp32", "--optimizer", "adamw",
        "--gpu-count", "4", "--gpu-mem", "16GB", "--json"};
    const auto copied = fit(ddp);
    ASSERT_EQ(copied.exit_code, 0) << copied.err;
    const auto doc = nlohmann::json::parse(copied.out);
    const std::uint64_t params = doc["model"]["params"].get<std::uint64_t>();
    EXPECT_EQ(doc["training"]["bucket_view"], false);
    EXPECT_EQ(doc["breakdown"]["states"]["buckets_bytes"], 4 * params);
    EXPECT_EQ(doc["breakdown"]["states"]["bytes"], 20 * params);

    std::vector<std::string> views = ddp;
    views.push_back("--bucket-view");
    const auto shared = fit(views);
    ASSERT_EQ(shared.exit_code, 0) << shared.err;
    const auto viewed = nlohmann::json::parse(shared.out);
    EXPECT_EQ(viewed["training"]["bucket_view"], true);
    EXPECT_EQ(viewed["breakdown"]["states"]["buckets_bytes"], 0);
    EXPECT_EQ(viewed["breakdown"]["states"]["bytes"], 16 * params);
    // What is left for activations grows by the buckets and their share of the upper estimate.
    EXPECT_GT(viewed["gpus"][0]["available_bytes"].get<std::int64_t>(),
        doc["gpus"][0]["available_bytes"].get<std::int64_t>() + static_cast<std::int64_t>(4 * params));

    // The text names them.
    std::vector<std::string> text(ddp.begin(), ddp.end() - 1);
    const auto shown = fit(text);
    EXPECT_NE(shown.out.find("DDP buckets"), std::string::npos) << shown.out;

    // ZeRO-1 as torch's ZeroRedundancyOptimizer keeps them; DeepSpeed's offload does not.
    std::vector<std::string> zero1 = views;
    zero1.insert(zero1.end(), {"--zero", "1"});
    const auto sharded = fit(zero1);
    ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
    EXPECT_EQ(nlohmann::json::parse(sharded.out)["breakdown"]["states"]["buckets_bytes"], 0);
    zero1.pop_back();
    zero1.pop_back();
    zero1.pop_back(); // --bucket-view
    zero1.insert(zero1.end(), {"--zero", "1"});
    EXPECT_EQ(nlohmann::json::parse(fit(zero1).out)["breakdown"]["states"]["buckets_bytes"], 4 * params);
    zero1.insert(zero1.end(), {"--offload", "optimizer", "--bucket-view"});
    const auto offloaded = fit(zero1);
    EXPECT_EQ(offloaded.exit_code, 2);
    EXPECT_NE(offloaded.err.find("no DDP buckets"), std::string::npos) << offloaded.err;

    // When nothing fits, the views are among the changes, in the JSON too.
    const auto none = fit({"--model", "gpt2", "--precision", "fp32", "--optimizer", "adamw", "--gpu-count", "4",
        "--gpu-mem", "2500MB", "--json"});
    EXPECT_EQ(none.exit_code, 1) << none.err;
    bool view_suggested = false;
    const auto suggested = nlohmann::json::parse(none.out);
    for (const auto& change : suggested["suggestions"]["changes"]) {
        EXPECT_TRUE(change.contains("loss")) << change;
        view_suggested = view_suggested || (change["change"] == "--bucket-view" && change["bucket_view"] == true);
    }
    EXPECT_TRUE(view_suggested) << none.out;

    // ZeRO-2 shards the gradients: no DDP buckets to view.
    views.insert(views.end(), {"--zero", "2"});
    const auto zero = fit(views);
    EXPECT_EQ(zero.exit_code, 2);
    EXPECT_NE(zero.err.find("no DDP buckets"), std::string::npos) << zero.err;
}

TEST_F(FitCli, MeasuredCudaContext)
{
    // The Hugging Face guide's V100 showed 1343 MB after torch.ones((1, 1)).to("cuda").
    const auto r = fit({"--model", "gpt2", "--precision", "amp", "--optimizer", "adamw", "--gpu-mem", "16160MiB",
        "--cuda-context", "1343MiB", "--batch", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["breakdown"]["cuda_context_bytes"], 1343ULL << 20);
    EXPECT_EQ(doc["at_batch"]["cuda_context_bytes"], 1343ULL << 20);
    // One GPU, PyTorch: the workspaces are cuBLAS's, inside the allocator; the context is not.
    EXPECT_EQ(doc["at_batch"]["peak_bytes"].get<std::uint64_t>(),
        doc["at_batch"]["allocated_bytes"].get<std::uint64_t>() + (1343ULL << 20));
}

TEST_F(FitCli, ImageSizeScalesACnnPreset)
{
    // resnet50's 81.9 MiB fp32 at 224² (85,878,374 B) grows with the area: × (448/224)² = 4.
    const auto r = fit({"--model", "resnet50", "--image", "448", "--precision", "fp32", "--optimizer", "momentum",
        "--gpu-mem", "16GiB", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["model"]["image_size"], 448);
    EXPECT_EQ(doc["breakdown"]["activations_per_sample"]["measured_bytes"], 343513496u); // 4 × 85,878,374
}

TEST_F(FitCli, BadModelInputsAreUsageErrors)
{
    const std::string not_json = (m_dir / "not.json").string();
    std::ofstream(not_json) << "hidden_size = 4096\n";
    const std::string no_sizes = (m_dir / "no_sizes.json").string();
    std::ofstream(no_sizes) << R"({"model_type": "llama", "hidden_size": 4096})";
    const std::vector<std::string> setup = {"--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "80GB"};
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"--config", not_json}, "not.json: not JSON"},
        {{"--config", no_sizes}, "no layer count (num_hidden_layers, n_layer, num_layers)"},
        {{"--config", (m_dir / "absent.json").string()}, "absent.json"},
        {{"--config", not_json, "--model", "gpt2"}, "--model and --config each name the model"},
        {{"--model", "gpt2", "--batch", "0"}, "--batch 0: expected a per-GPU batch of 1 or more"},
        {{"--model", "gpt2", "--batch", "-3"}, "--batch"},
        {{"--model", "resnet50", "--image", "-1"}, "--image"},
        {{"--model", "resnet50", "--image", "0"}, "--image 0: expected 1 or more"},
        {{"--model", "gpt2", "--image", "384"}, "--image scales a CNN preset's measured activations"},
        {{"--model", "gpt2", "--attention", "flash2"}, "--attention flash2: expected eager, sdpa, flash"},
        {{"--model", "gpt2", "--mlp", "swiglu"}, "--mlp swiglu: expected plain"},
        {{"--model", "gpt2", "--norm", "batch"}, "--norm batch: expected layer (GPT-2, BERT) or rms"},
        {{"--model", "resnet50", "--norm", "rms"}, "--norm needs a transformer shape"},
        {{"--model", "resnet50", "--kv-heads", "8"}, "--kv-heads needs a transformer shape"},
        {{"--model", "gpt2", "--kv-heads", "5"}, "5 key/value heads for 12 attention heads"},
        {{"--model", "bert-large", "--framework", "tensorflow", "--attention", "sdpa"},
            "TensorFlow's attention keeps its scores"},
        {{"--model", "gpt2", "--framework", "jax"}, "--framework jax: expected pytorch, tensorflow"},
        {{"--model", "gpt2", "--loss", "fast"}, "--loss fast: expected fp32, chunked, fused"},
        {{"--model", "resnet50", "--loss", "chunked"}, "--loss: resnet50 has no vocabulary to count a loss over"},
        {{"--model", "bert-large", "--framework", "tensorflow", "--loss", "chunked"},
            "--loss is how PyTorch code runs its cross-entropy"},
        {{"--model", "llama-7b", "--lora-rank", "0"}, "--lora-rank 0: expected the adapters' rank"},
        {{"--model", "llama-7b", "--lora-rank", "8", "--lora-targets", "q,x"}, "'x' is not a projection"},
        {{"--model", "llama-7b", "--lora-rank", "8", "--base-bits", "3"}, "--base-bits 3: expected 16, 8 or 4"},
        {{"--model", "llama-7b", "--base-bits", "4"}, "--base-bits is for LoRA: add --lora-rank R"},
        {{"--model", "resnet50", "--lora-rank", "8"}, "--lora-rank needs a transformer's shape"},
        {{"--model", "gpt2", "--tp", "0"}, "--tp 0: expected 1 or more GPUs"},
        {{"--model", "gpt2", "--cuda-context", "lots"}, "--cuda-context"},
        {{"--model", "gpt2", "--sequence-parallel"}, "--sequence-parallel splits the sequence"},
        {{"--model", "gpt2", "--bucket-view"}, "--bucket-view is PyTorch DDP's gradient_as_bucket_view=True"},
        {{"--model", "gpt2", "--tp", "5"}, "--tp 5: the 12 attention heads do not split evenly"},
        {{"--model", "gpt2", "--offload", "nvme"}, "--offload nvme: expected none, optimizer, all"},
        {{"--model", "gpt2", "--offload", "optimizer"}, "--offload optimizer needs ZeRO"},
        {{"--model", "gpt2", "--grad-accum", "0"}, "--grad-accum 0: expected the micro-batches per optimizer step"},
        {{"--model", "gpt2", "--target-seq", "128"}, "--target-seq is the decoder's length"},
        {{"--model", "resnet50", "--decoder-layers", "2"}, "--decoder-layers needs a transformer shape"},
        {{"--model", "gpt2", "--decoder-layers", "6", "--target-seq", "0"}, "--target-seq 0: expected 1 or more"},
        {{"--model", "gpt2", "--grad-accum", "-2"}, "--grad-accum"},
        {{"--model", "gpt2", "--grad-accum", "4", "--global-batch", "30"},
            "--global-batch 30 is not a multiple of --grad-accum 4"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args = c.args;
        args.insert(args.end(), setup.begin(), setup.end());
        const auto r = fit(args);
        EXPECT_EQ(r.exit_code, 2) << c.args.front() << " " << c.args.at(1) << ": " << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args.front() << ": " << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST_F(FitCli, AnEncoderDecoderFromItsConfigWithItsTargetLength)
{
    // facebook/bart-large's config; summarising 1024 tokens into 128.
    const std::string config = (m_dir / "bart.json").string();
    std::ofstream(config) << R"({"activation_function": "gelu", "d_model": 1024, "decoder_attention_heads": 16,
        "decoder_ffn_dim": 4096, "decoder_layers": 12, "dropout": 0.1, "encoder_attention_heads": 16,
        "encoder_ffn_dim": 4096, "encoder_layers": 12, "is_encoder_decoder": true, "max_position_embeddings": 1024,
        "model_type": "bart", "vocab_size": 50265})";
    const auto r = fit({"--config", config, "--target-seq", "128", "--precision", "amp", "--optimizer", "adamw",
        "--gpu-mem", "24GB", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["model"]["params"], 406291456u);
    EXPECT_EQ(doc["model"]["layers"], 24);
    EXPECT_EQ(doc["model"]["decoder_layers"], 12);
    EXPECT_EQ(doc["model"]["seq"], 1024);
    EXPECT_EQ(doc["model"]["target_seq"], 128);
    const auto& act = doc["breakdown"]["activations_per_sample"];
    EXPECT_GT(act["decoder_per_layer_bytes"].get<std::uint64_t>(), 0u);
    EXPECT_LT(act["decoder_per_layer_bytes"].get<std::uint64_t>(), act["per_layer_bytes"].get<std::uint64_t>());
    EXPECT_EQ(act["encoder_output_bytes"], 1024 * 1024 * 2);
    EXPECT_EQ(doc["training"]["attention"], "sdpa");
    // T5's attention is eager unless --attention says otherwise.
    const auto t5 =
        fit({"--model", "t5-base", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "24GB", "--json"});
    ASSERT_EQ(t5.exit_code, 0) << t5.err;
    EXPECT_EQ(nlohmann::json::parse(t5.out)["training"]["attention"], "eager");
    const auto sdpa = fit({"--model", "t5-base", "--attention", "sdpa", "--precision", "bf16", "--optimizer", "adamw",
        "--gpu-mem", "24GB", "--json"});
    EXPECT_EQ(nlohmann::json::parse(sdpa.out)["training"]["attention"], "sdpa");
    // --layers gives the encoder's layers, --decoder-layers the decoder's.
    const auto text = fit({"--config", config, "--layers", "6", "--decoder-layers", "3", "--precision", "amp",
        "--optimizer", "adamw", "--gpu-mem", "24GB"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("6 encoder layers at sequence 1024 and 3 decoder layers at 1024"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("  decoder "), std::string::npos) << text.out;
}
