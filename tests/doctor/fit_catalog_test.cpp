// The model presets and the GPU table: the built-in files, users' files, look-ups and their errors.
#include "doctor/fit/catalog.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include "base/error.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using namespace doctor::fit;

namespace {

std::string error_of(const std::function<void()>& f)
{
    return test_support::error_of(f, "no error");
}

} // namespace

TEST(ModelCatalog, BuiltinHasThePresetsAndEachPlans)
{
    const ModelCatalog catalog = ModelCatalog::builtin();
    for (const char* name : {"resnet50", "densenet121", "bert-base", "bert-large", "gpt2", "gpt2-xl", "llama-7b",
             "llama-13b", "llama-70b"}) {
        const ModelSpec& m = catalog.find(name);
        EXPECT_EQ(m.name, name);
        EXPECT_GT(m.params, 0u) << name;
        EXPECT_FALSE(m.description.empty()) << name;
    }
    for (const auto& m : catalog.models()) {
        for (auto p : {Precision::fp32, Precision::bf16, Precision::amp}) {
            TrainingSetup setup;
            setup.precision = p;
            setup.optimizer = Optimizer::adamw;
            EXPECT_GT(plan_memory(m, setup).activations.per_sample, 0u) << m.name;
        }
    }
}

TEST(ModelCatalog, BuiltinValuesAreTheReferenceOnes)
{
    const ModelCatalog catalog = ModelCatalog::builtin();
    const ModelSpec& bert = catalog.find("bert-large");
    EXPECT_EQ(bert.params, 335141888u);
    EXPECT_EQ(bert.layers, 24u);
    ASSERT_TRUE(bert.transformer);
    EXPECT_EQ(bert.transformer->hidden, 1024u);
    EXPECT_EQ(bert.transformer->heads, 16u);
    EXPECT_EQ(bert.transformer->seq, 512u);
    EXPECT_EQ(bert.transformer->vocab, 30522u);
    // Llama 2 70B: grouped-query attention with 8 key/value heads, SwiGLU of 28,672, no dropout.
    const ModelSpec& llama = catalog.find("llama-70b");
    ASSERT_TRUE(llama.transformer);
    EXPECT_EQ(llama.transformer->kv_heads, 8u);
    EXPECT_EQ(llama.transformer->intermediate, 28672u);
    EXPECT_TRUE(llama.transformer->gated_mlp);
    EXPECT_TRUE(llama.transformer->rms_norm);
    EXPECT_FALSE(llama.transformer->dropout);
    EXPECT_TRUE(bert.transformer->dropout); // the default
    EXPECT_FALSE(bert.transformer->rms_norm);
    // ResNet-50 ≈ 82 MiB per image fp32 (81.9 MiB = 85,878,374 B), DenseNet-121 ≈ 124 MiB.
    EXPECT_EQ(*catalog.find("resnet50").measured_fp32, 85878374u);
    EXPECT_EQ(*catalog.find("densenet121").measured_fp32, 130337997u); // 124.3 · 2^20 = 130,337,996.8
    EXPECT_EQ(catalog.find("llama-70b").layers, 80u);
}

// The transformer presets are Hugging Face configs (share/gpukit/models); the parameter counts
// they give are the models' own (sum of numel over the parameters in Transformers).
TEST(ModelCatalog, TransformerPresetsComeFromTheirConfigs)
{
    const ModelCatalog catalog = ModelCatalog::builtin();
    const std::vector<std::pair<const char*, std::uint64_t>> counts = {{"bert-base", 109482240},
        {"bert-large", 335141888}, {"gpt2", 124439808}, {"gpt2-medium", 354823168}, {"gpt2-large", 774030080},
        {"gpt2-xl", 1557611200}, {"llama-7b", 6738415616}, {"llama-13b", 13015864320}, {"llama-70b", 68976648192},
        {"t5-base", 222903552}, {"bart-large", 406291456}};
    for (const auto& [name, params] : counts) {
        EXPECT_EQ(catalog.find(name).params, params) << name;
    }
    // The encoder-decoders keep both stacks.
    EXPECT_EQ(catalog.find("t5-base").layers, 24u);
    EXPECT_EQ(catalog.find("t5-base").transformer->decoder_layers, 12u);
    EXPECT_EQ(catalog.find("bart-large").transformer->seq, 1024u);
    // Every shipped config is there by its file name; none is a stranger.
    EXPECT_NE(ModelCatalog::builtin_config("Llama-2-70b-hf.json"), nullptr);
    EXPECT_EQ(ModelCatalog::builtin_config("llama.json"), nullptr);
}

TEST(ModelCatalog, UserEntriesNameConfigsBesideTheirFileOrShippedOnes)
{
    const test_support::TempDir temp;
    const std::filesystem::path& dir = temp.path();
    std::ofstream(dir / "tiny.json") << R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
        "num_attention_heads": 8, "num_hidden_layers": 4, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
        "vocab_size": 1000, "hidden_act": "silu"})";
    const std::string toml = (dir / "m.toml").string();
    ModelCatalog catalog = ModelCatalog::builtin();
    catalog.merge_toml(
        "[tiny]\ndescription = \"mine\"\nconfig = \"tiny.json\"\nseq = 256\n[gpt2-again]\nconfig = \"gpt2.json\"\n",
        toml);
    const ModelSpec& tiny = catalog.find("tiny");
    EXPECT_EQ(tiny.description, "mine");
    EXPECT_EQ(tiny.layers, 4u);
    ASSERT_TRUE(tiny.transformer);
    EXPECT_EQ(tiny.transformer->seq, 256u);
    EXPECT_TRUE(tiny.transformer->gated_mlp);
    // A shipped config, named from a user's file.
    EXPECT_EQ(catalog.find("gpt2-again").params, 124439808u);
    // Missing, or given with the keys the config gives: errors that say where.
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[x]\nconfig = \"none.json\"\n", toml);
    }).find("[x]: config \"none.json\": no such file in " + dir.string()),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[x]\nconfig = \"tiny.json\"\nlayers = 3\n", toml);
    }).find("[x]: layers must be left out: config \"tiny.json\" gives the model"),
        std::string::npos);
    std::ofstream(dir / "bad.json") << "{\"model_type\": ";
    EXPECT_NE(error_of([&] { catalog.merge_toml("[x]\nconfig = \"bad.json\"\n", toml); }).find("bad.json: not JSON"),
        std::string::npos);
}

TEST(ModelCatalog, FindIgnoresCaseAndSuggestsTheClosestName)
{
    const ModelCatalog catalog = ModelCatalog::builtin();
    EXPECT_EQ(catalog.find("BERT-Large").name, "bert-large");
    const std::string e = error_of([&] { catalog.find("bert-lage"); });
    EXPECT_NE(e.find("--model bert-lage: no such preset (did you mean bert-large?)"), std::string::npos) << e;
    EXPECT_EQ(error_of([&] { catalog.find("zzzzzzzz"); }).find("did you mean"), std::string::npos);
}

TEST(ModelCatalog, UserFileAddsAndReplaces)
{
    ModelCatalog catalog = ModelCatalog::builtin();
    const std::size_t before = catalog.models().size();
    catalog.merge_toml(R"(
[my-vit]
description = "a ViT measured at home"
params = "86M"
activation_bytes_per_sample = "300MiB"

[gpt2]
description = "GPT-2 at 2048"
params = 124439808
layers = 12
hidden = 768
heads = 12
seq = 2048

[my-llama]
params = "1B"
layers = 16
hidden = 2048
heads = 32
seq = 1024
gated_mlp = true
rms_norm = true
)",
        "mine.toml");
    EXPECT_EQ(catalog.models().size(), before + 2);
    const ModelSpec& vit = catalog.find("my-vit");
    EXPECT_EQ(vit.params, 86000000u);
    EXPECT_EQ(*vit.activation_bytes, 300u << 20);
    const ModelSpec& gpt2 = catalog.find("gpt2");
    EXPECT_EQ(gpt2.transformer->seq, 2048u);
    EXPECT_EQ(gpt2.transformer->vocab, 0u); // replaced whole: the built-in's vocabulary is gone
    EXPECT_FALSE(gpt2.transformer->rms_norm);
    EXPECT_TRUE(catalog.find("my-llama").transformer->rms_norm);
}

TEST(ModelCatalog, UserFileErrorsSayWhere)
{
    ModelCatalog catalog;
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[a]\nparams = 1\nhiden = 3\n", "m.toml");
    }).find("m.toml:3: [a]: unknown key 'hiden' (did you mean hidden?)"),
        std::string::npos);
    // TOML splits a table's name at its dots: [llama-3.1-8b] is a table "1-8b" inside [llama-3].
    EXPECT_NE(error_of([&] { catalog.merge_toml("[llama-3.1-8b]\nconfig = \"Llama-3.1-8B.json\"\n", "m.toml"); })
                  .find("m.toml:1: [llama-3.1-8b]: a name with a dot is a table inside [llama-3]; quote the name: "
                        "[\"llama-3.1-8b\"]"),
        std::string::npos);
    EXPECT_NE(
        error_of([&] { catalog.merge_toml("[a]\nlayers = 2\n", "m.toml"); }).find("[a]: no params"), std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[a]\nparams = 5\nlayers = 2\nhidden = 8\n", "m.toml");
    }).find("needs layers, hidden, heads and seq together"),
        std::string::npos);
    EXPECT_NE(error_of([&] { catalog.merge_toml("[a]\nparams = 5\n", "m.toml"); }).find("no way to count"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[a]\nparams = \"5Q\"\nactivation_bytes_per_sample = 1\n", "m.toml");
    }).find("m.toml:2: [a]: params 5Q: not a parameter count"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[a]\nparams = 5\nlayers = -1\n", "m.toml");
    }).find("m.toml:3: [a]: layers must be a whole number, 1 or more"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml(
            "[a]\nparams = 5\nlayers = 2\nhidden = 8\nheads = 2\nseq = 4\ngated_mlp = \"yes\"\n", "m.toml");
    }).find("m.toml:7: [a]: gated_mlp must be true or false"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        catalog.merge_toml("[a]\nparams = 5\nactivation_mib_fp32 = 3.0\nkv_heads = 2\n", "m.toml");
    }).find("kv_heads must be given with a transformer shape"),
        std::string::npos);
    EXPECT_NE(error_of([&] { catalog.merge_toml("a = 1\n", "m.toml"); }).find("'a' must be a [model] table"),
        std::string::npos);
    EXPECT_NE(error_of([&] { catalog.merge_toml("[a\n", "m.toml"); }).find("m.toml:1:"), std::string::npos);
}

TEST(GpuTable, BuiltinCoversK80ToB200AndK80IsHalfAV100)
{
    const GpuTable table = GpuTable::builtin();
    for (const char* name : {"K80", "P100", "V100", "T4", "A100-40GB", "A100-80GB", "H100", "H200", "B200"}) {
        EXPECT_EQ(table.find(name).name, name);
    }
    EXPECT_DOUBLE_EQ(table.find("K80").speed * 2, table.find("V100").speed);
    EXPECT_FALSE(table.find("K80").note.empty());
    // Memory about what NVML reports: a V100-16GB shows 16160 MiB (15.78 GiB).
    EXPECT_NEAR(static_cast<double>(table.find("V100").memory) / (1 << 30), 15.78, 0.01);
    for (const auto& g : table.models()) {
        EXPECT_GT(g.memory, 8ull << 30) << g.name;
        EXPECT_GT(g.speed, 0) << g.name;
    }
}

TEST(GpuTable, FindsAliasesWhateverTheSpelling)
{
    const GpuTable table = GpuTable::builtin();
    EXPECT_EQ(table.find("v100").name, "V100");
    EXPECT_EQ(table.find("Tesla V100").name, "V100");
    EXPECT_EQ(table.find("NVIDIA A100-SXM4-80GB").name, "A100-80GB");
    EXPECT_EQ(table.find("a100_80gb").name, "A100-80GB");
    EXPECT_EQ(table.find("a100 80GB").name, "A100-80GB");
    EXPECT_EQ(table.find("V100S").name, "V100-PCIe-32GB");
    // The SXM and PCIe cards are rows of their own, each by NVML's name: their floors differ.
    EXPECT_EQ(table.find("Tesla V100-SXM2-32GB").name, "V100-32GB");
    EXPECT_EQ(table.find("Tesla V100-PCIE-16GB").name, "V100-PCIe");
    EXPECT_EQ(table.find("NVIDIA A100 80GB PCIe").name, "A100-PCIe-80GB");
    EXPECT_EQ(table.find("NVIDIA H100 NVL").name, "H100-NVL");
    EXPECT_EQ(table.find("h100 pcie").name, "H100-PCIe");
    // GeForce and workstation cards by the names NVML gives them, on new drivers and old.
    EXPECT_EQ(table.find("NVIDIA GeForce RTX 3090").name, "RTX-3090");
    EXPECT_EQ(table.find("GeForce RTX 2080 Ti").name, "RTX-2080-Ti");
    EXPECT_EQ(table.find("NVIDIA GeForce RTX 4090").name, "RTX-4090");
    EXPECT_EQ(table.find("NVIDIA RTX A5000").name, "A5000");
    EXPECT_EQ(table.find("NVIDIA RTX 6000 Ada Generation").name, "RTX-6000-Ada");
    // The smaller total older drivers printed: 24259 MiB for the 3090.
    EXPECT_EQ(table.find("3090").memory, static_cast<std::uint64_t>(std::llround(23.69 * 1073741824.0)));
    EXPECT_EQ(to_string(*table.find("4090").traits.compute_capability), "8.9");
    EXPECT_EQ(table.find("4090").traits.nvlink, false);
}

TEST(GpuTable, UnknownAndAmbiguousNames)
{
    const GpuTable table = GpuTable::builtin();
    const std::string typo = error_of([&] { table.find("V10O"); });
    EXPECT_NE(typo.find("GPU V10O: not in the GPU table (did you mean V100?)"), std::string::npos) << typo;
    const std::string ambiguous = error_of([&] { table.find("A100"); });
    EXPECT_NE(
        ambiguous.find(
            "GPU A100: more than one in the table (A100-40GB, A100-PCIe-40GB, A100-80GB, A100-PCIe-80GB); name one"),
        std::string::npos)
        << ambiguous;
}

TEST(GpuTable, FileErrors)
{
    EXPECT_NE(error_of([] { GpuTable::from_toml("[X]\nspeed = 1\n", "g.toml"); }).find("memory_gib must be given"),
        std::string::npos);
    EXPECT_NE(error_of([] {
        GpuTable::from_toml("[X]\nmemory_gib = 16\nsped = 1\n", "g.toml");
    }).find("unknown key 'sped' (did you mean speed?)"),
        std::string::npos);
    EXPECT_NE(error_of([] {
        GpuTable::from_toml("[X]\nmemory_gib = 16\nspeed = 0\ncompute_capability = \"8.0\"\n", "g.toml");
    }).find("speed must be a number above 0"),
        std::string::npos);
    const GpuTable t = GpuTable::from_toml("[X]\nmemory_gib = 16\ncompute_capability = \"8.0\"\n", "g.toml");
    EXPECT_EQ(t.find("x").memory, 16ull << 30);
    EXPECT_DOUBLE_EQ(t.find("x").speed, 1.0);
}
