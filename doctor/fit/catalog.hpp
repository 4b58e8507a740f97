#pragma once

// The data gpudoctor fit looks names up in: model presets (share/gpukit/models.toml) and the GPU
// table (share/gpukit/gpus.toml), both compiled in; users add models with --models FILE.

#include "doctor/engine/gpu_table.hpp"
#include "doctor/fit/model.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace doctor::fit {

/// Model presets by name. An entry is a TOML table:
///   [name]
///   description = "..."
///   params = 335141888            # or "335M", "7B"
///   # a transformer:
///   layers = 24, hidden = 1024, heads = 16, seq = 512, vocab = 30522 (vocab optional)
///   # or a CNN measured per sample (tensors saved for backward):
///   activation_mib_fp32 = 81.9, activation_mib_16bit = 41.7, image_size = 224
///   # or any model, peak activation bytes per sample as measured:
///   activation_bytes_per_sample = 123456789
///   # or a transformer from its Hugging Face config.json (and seq optionally):
///   config = "Llama-2-7b-hf.json", seq = 4096
class ModelCatalog {
public:
    /// The presets shipped in share/gpukit/models.toml, their configs share/gpukit/models/*.json.
    static ModelCatalog builtin();
    /// The built-in file's text.
    static const char* builtin_toml();
    /// A shipped config's text by file name ("gpt2.json"); nullptr for none.
    static const char* builtin_config(const std::string& name);

    /// Adds the entries of the TOML file `origin` (its text): a `config` is read beside it, or is
    /// a shipped one. An entry with the name of an existing one replaces it whole. Throws
    /// base::Error naming `origin` (and line) for bad TOML, unknown keys (with the closest known
    /// key), wrong types, entries that give no way to count activations, and configs that are
    /// missing or bad (model_from_config's errors).
    void merge_toml(const std::string& text, const std::string& origin);

    /// The model called `name` (case-insensitive). Throws base::Error with the closest name.
    const ModelSpec& find(const std::string& name) const;
    const std::vector<ModelSpec>& models() const { return m_models; }

private:
    /// merge_toml, with configs beside `directory` when given, else shipped ones only.
    void merge(
        const std::string& text, const std::string& origin, const std::optional<std::filesystem::path>& directory);

    std::vector<ModelSpec> m_models;
};

/// The GPU table is gpudoctor's one table of GPUs (doctor/engine/gpu_table.hpp).
using engine::GpuModel;
using engine::GpuTable;

} // namespace doctor::fit
