#pragma once

// gpudoctor fit --config: a model from its Hugging Face config.json (the file next to the
// weights). Pure: the text in, the model out.

#include "doctor/fit/model.hpp"

#include <string>

namespace doctor::fit {

/// Reads a decoder-only or encoder-only transformer's config.json: its sizes (hidden_size,
/// num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
/// max_position_embeddings, or GPT-2's n_embd, n_layer, n_head, n_inner, n_positions), whether
/// its MLP is gated (SwiGLU/GeGLU), whether it trains with dropout, and its parameter count,
/// computed from the shapes: embeddings (plus an untied output layer), learned positions,
/// attention with grouped key/value heads, the MLP, norms and biases as the architecture has
/// them. The sequence is max_position_embeddings unless `seq` is given (not 0).
///
/// Encoder-decoder models of the T5 (t5, mt5) and BART (bart, mbart) families are read too: both
/// stacks, the decoder's layers as TransformerShape::decoder_layers (their length is --target-seq's
/// to give; it defaults to the encoder's).
///
/// Throws base::Error naming `origin` for text that is not JSON, a config without the sizes
/// (naming the keys looked for), sizes that are not whole numbers, heads that do not divide the
/// hidden size, and other encoder-decoder models.
ModelSpec model_from_config(const std::string& text, const std::string& origin, unsigned seq = 0);

} // namespace doctor::fit
