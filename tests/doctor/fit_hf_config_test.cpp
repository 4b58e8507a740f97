// gpudoctor fit --config: models read from Hugging Face config.json files. The configs below are
// the published ones (huggingface.co/<model>/blob/main/config.json), cut to the keys that
// matter; the parameter counts they must give are the models' published counts.
#include "doctor/fit/hf_config.hpp"

#include "base/error.hpp"

#include <gtest/gtest.h>
#include <string>

using namespace doctor::fit;

namespace {

// meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters.
const char* const llama2_7b = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 11008, "max_position_embeddings": 4096,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
  "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "torch_dtype": "float16", "vocab_size": 32000
})";

// mistralai/Mistral-7B-v0.1: 7,241,732,096 parameters; 8 key/value heads.
const char* const mistral_7b = R"({
  "model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "sliding_window": 4096,
  "tie_word_embeddings": false, "vocab_size": 32000
})";

// TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T: 1,100,048,384 parameters.
const char* const tinyllama = R"({
  "model_type": "llama", "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5632,
  "max_position_embeddings": 2048, "num_attention_heads": 32, "num_hidden_layers": 22,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "vocab_size": 32000
})";

// google/gemma-2b: 2,506,172,416 parameters; head_dim 256 with 8 heads of a 2048 hidden size, one
// key/value head, tied embeddings.
const char* const gemma_2b = R"({
  "model_type": "gemma", "hidden_act": "gelu", "hidden_size": 2048, "intermediate_size": 16384,
  "head_dim": 256, "max_position_embeddings": 8192, "num_attention_heads": 8,
  "num_hidden_layers": 18, "num_key_value_heads": 1, "rms_norm_eps": 1e-06, "vocab_size": 256000
})";

// openai-community/gpt2: 124,439,808 parameters; GPT-2's own key names, tied embeddings.
const char* const gpt2 = R"({
  "model_type": "gpt2", "activation_function": "gelu_new", "attn_pdrop": 0.1, "embd_pdrop": 0.1,
  "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
  "resid_pdrop": 0.1, "vocab_size": 50257
})";

// google-bert/bert-base-uncased: 109,482,240 parameters (BertModel, with its pooler).
const char* const bert_base = R"({
  "model_type": "bert", "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1, "hidden_size": 768, "intermediate_size": 3072,
  "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
  "type_vocab_size": 2, "vocab_size": 30522
})";

std::string error_of(const std::string& text, const std::string& origin = "config.json")
{
    try {
        model_from_config(text, origin);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

TEST(FitHfConfig, ParameterCountsMatchThePublishedOnes)
{
    EXPECT_EQ(model_from_config(llama2_7b, "llama").params, 6738415616u);
    EXPECT_EQ(model_from_config(mistral_7b, "mistral").params, 7241732096u);
    EXPECT_EQ(model_from_config(tinyllama, "tinyllama").params, 1100048384u);
    EXPECT_EQ(model_from_config(gemma_2b, "gemma").params, 2506172416u);
    EXPECT_EQ(model_from_config(gpt2, "gpt2").params, 124439808u);
    EXPECT_EQ(model_from_config(bert_base, "bert").params, 109482240u);
}

TEST(FitHfConfig, ShapeForTheActivations)
{
    const ModelSpec m = model_from_config(mistral_7b, "mistral/config.json", 2048);
    EXPECT_EQ(m.name, "mistral/config.json");
    EXPECT_EQ(m.layers, 32u);
    ASSERT_TRUE(m.transformer);
    EXPECT_EQ(m.transformer->hidden, 4096u);
    EXPECT_EQ(m.transformer->heads, 32u);
    EXPECT_EQ(m.transformer->kv_heads, 8u);
    EXPECT_EQ(m.transformer->intermediate, 14336u);
    EXPECT_TRUE(m.transformer->gated_mlp);
    EXPECT_TRUE(m.transformer->rms_norm); // rms_norm_eps
    EXPECT_FALSE(m.transformer->dropout);
    EXPECT_EQ(m.transformer->vocab, 32000u);
    EXPECT_EQ(m.transformer->seq, 2048u); // as given; not the 32768 positions
    // Without a sequence, the model's context, and the description says so.
    const ModelSpec g = model_from_config(gpt2, "gpt2.json");
    EXPECT_EQ(g.transformer->seq, 1024u);
    EXPECT_FALSE(g.transformer->gated_mlp);
    EXPECT_FALSE(g.transformer->rms_norm); // LayerNorm
    EXPECT_TRUE(g.transformer->dropout);
    EXPECT_EQ(g.transformer->kv_heads, 12u);
    EXPECT_EQ(g.transformer->intermediate, 3072u); // 4 × 768 where n_inner is absent
    EXPECT_NE(g.description.find("max_position_embeddings"), std::string::npos) << g.description;
}

TEST(FitHfConfig, AnUnknownArchitectureIsReadFromItsKeys)
{
    // A Llama-shaped config under another name: RMSNorm (rms_norm_eps), SwiGLU (silu), no biases.
    std::string text = llama2_7b;
    text.replace(text.find("\"llama\""), 7, "\"my_llama\"");
    const ModelSpec m = model_from_config(text, "c.json");
    EXPECT_EQ(m.params, 6738415616u);
    EXPECT_NE(m.description.find("inferred"), std::string::npos) << m.description;
}

TEST(FitHfConfig, BadConfigsAreInputErrors)
{
    EXPECT_NE(error_of("{\"hidden_size\": 4096,").find("config.json: not JSON"), std::string::npos);
    // A number beyond a double is nlohmann's out_of_range, not its parse_error: still not JSON.
    EXPECT_NE(error_of(R"({"hidden_size": 5e632})").find("config.json: not JSON"), std::string::npos);
    EXPECT_NE(error_of("[1, 2]").find("not a JSON object"), std::string::npos);
    // Sizes missing: the keys looked for are named.
    const std::string missing = error_of(R"({"model_type": "llama", "hidden_size": 4096})");
    EXPECT_NE(missing.find("no layer count (num_hidden_layers, n_layer, num_layers)"), std::string::npos) << missing;
    // Not a whole number.
    std::string text = llama2_7b;
    text.replace(text.find("\"num_hidden_layers\": 32"), 23, "\"num_hidden_layers\": 3.5");
    EXPECT_NE(error_of(text).find("num_hidden_layers is 3.5"), std::string::npos) << error_of(text);
    // Key/value heads that do not divide the heads.
    text = mistral_7b;
    text.replace(text.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 7");
    EXPECT_NE(error_of(text).find("7 key/value heads for 32 attention heads"), std::string::npos) << error_of(text);
    // Sizes no model has, whose products would wrap, are refused.
    const std::string huge =
        error_of(R"({"model_type": "llama", "hidden_size": 100000000, "num_hidden_layers": 100000000,
        "num_attention_heads": 100000000, "vocab_size": 100000000, "max_position_embeddings": 100000000})");
    EXPECT_NE(huge.find("more than 10^15 parameters"), std::string::npos) << huge;
    // Encoder-decoder models other than T5's and BART's are refused, with what to give instead.
    const std::string pegasus = error_of(R"({"model_type": "pegasus", "is_encoder_decoder": true, "d_model": 1024,
        "encoder_layers": 16, "decoder_layers": 16, "encoder_attention_heads": 16, "vocab_size": 96103})");
    EXPECT_NE(pegasus.find("pegasus is an encoder-decoder model that --config does not know"), std::string::npos)
        << pegasus;
    // t5-3b's attention (32 heads × d_kv 128 = 4096) is wider than its d_model (1024): refused.
    const std::string t5_3b = error_of(R"({"model_type": "t5", "d_ff": 16384, "d_kv": 128, "d_model": 1024,
        "num_heads": 32, "num_layers": 24, "vocab_size": 32128, "n_positions": 512})");
    EXPECT_NE(t5_3b.find("32 heads × d_kv 128 = 4096 wide, not d_model 1024"), std::string::npos) << t5_3b;
    // A T5 without d_kv names it.
    const std::string no_dkv = error_of(R"({"model_type": "t5", "d_ff": 2048, "d_model": 512, "num_heads": 8,
        "num_layers": 6, "vocab_size": 32128})");
    EXPECT_NE(no_dkv.find("no d_kv"), std::string::npos) << no_dkv;
    // BART's stacks must share a shape.
    const std::string uneven = error_of(R"({"model_type": "bart", "d_model": 1024, "encoder_layers": 12,
        "decoder_layers": 12, "encoder_attention_heads": 16, "decoder_attention_heads": 8, "encoder_ffn_dim": 4096,
        "vocab_size": 50265, "max_position_embeddings": 1024})");
    EXPECT_NE(uneven.find("the decoder's heads or MLP differ from the encoder's"), std::string::npos) << uneven;
}

// The published configs (huggingface.co/<model>/blob/main/config.json, cut to the keys that
// matter) and the parameter counts the models have (sum of numel over model.parameters() in
// Transformers: t5-small 60,506,624, t5-base 222,903,552, google/flan-t5-base 247,577,856,
// facebook/bart-large 406,291,456).
TEST(FitHfConfig, EncoderDecoderModelsCountBothStacks)
{
    const ModelSpec t5_small = model_from_config(R"({"d_ff": 2048, "d_kv": 64, "d_model": 512,
        "dropout_rate": 0.1, "is_encoder_decoder": true, "model_type": "t5", "n_positions": 512, "num_heads": 8,
        "num_layers": 6, "relative_attention_num_buckets": 32, "vocab_size": 32128})",
        "t5-small/config.json");
    EXPECT_EQ(t5_small.params, 60506624u);
    EXPECT_EQ(t5_small.layers, 12u);
    ASSERT_TRUE(t5_small.transformer);
    EXPECT_EQ(t5_small.transformer->decoder_layers, 6u);
    EXPECT_EQ(t5_small.transformer->seq, 512u);
    EXPECT_TRUE(t5_small.transformer->dropout);
    EXPECT_FALSE(t5_small.transformer->gated_mlp);
    EXPECT_TRUE(t5_small.transformer->rms_norm); // T5LayerNorm: no mean, no bias
    // T5's attention has no sdpa path in Transformers (its position bias): eager unless asked.
    ASSERT_TRUE(t5_small.attention);
    EXPECT_EQ(*t5_small.attention, Attention::eager);

    const ModelSpec t5_base = model_from_config(R"({"d_ff": 3072, "d_kv": 64, "d_model": 768,
        "dropout_rate": 0.1, "model_type": "t5", "n_positions": 512, "num_heads": 12, "num_layers": 12,
        "vocab_size": 32128})",
        "t5-base/config.json", 256);
    EXPECT_EQ(t5_base.params, 222903552u);
    EXPECT_EQ(t5_base.transformer->seq, 256u);
    EXPECT_EQ(t5_base.transformer->intermediate, 3072u);

    // Flan-T5: gated GELU (three MLP matrices), its own output layer.
    const ModelSpec flan = model_from_config(R"({"d_ff": 2048, "d_kv": 64, "d_model": 768,
        "dropout_rate": 0.1, "feed_forward_proj": "gated-gelu", "is_encoder_decoder": true, "model_type": "t5",
        "n_positions": 512, "num_decoder_layers": 12, "num_heads": 12, "num_layers": 12,
        "relative_attention_num_buckets": 32, "tie_word_embeddings": false, "vocab_size": 32128})",
        "flan-t5-base/config.json");
    EXPECT_EQ(flan.params, 247577856u);
    EXPECT_TRUE(flan.transformer->gated_mlp);

    const ModelSpec bart = model_from_config(R"({"activation_function": "gelu", "attention_dropout": 0.0,
        "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layers": 12,
        "dropout": 0.1, "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layers": 12,
        "is_encoder_decoder": true, "max_position_embeddings": 1024, "model_type": "bart", "vocab_size": 50265})",
        "bart-large/config.json");
    EXPECT_EQ(bart.params, 406291456u);
    EXPECT_EQ(bart.layers, 24u);
    EXPECT_EQ(bart.transformer->decoder_layers, 12u);
    EXPECT_EQ(bart.transformer->heads, 16u);
    EXPECT_EQ(bart.transformer->seq, 1024u);
    EXPECT_FALSE(bart.transformer->rms_norm);
    EXPECT_FALSE(bart.attention); // BART runs sdpa
}
