// The model shapes `fp4serve synth` can write and the config files that describe them, written as
// the real release writes them (docs/model-arch.md §1.1): config.json of Qwen3_5MoeForConditionalGeneration
// with the text model under text_config and the vision tower's vision_config (the vision weights
// themselves are not synthesized), and generation_config.json. transformers saves both with
// json.dumps(indent=2, sort_keys=True) + "\n"; nlohmann::json's default map keeps keys sorted too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::synth {

// The shape-determining fields of the text model. The preset is the real model; tests shrink it.
struct SynthDims {
  int64_t num_hidden_layers = 40;
  int64_t hidden_size = 2048;
  int64_t vocab_size = 248320;
  int64_t num_attention_heads = 16;
  int64_t num_key_value_heads = 2;
  int64_t head_dim = 256;
  int64_t linear_num_key_heads = 16;
  int64_t linear_num_value_heads = 32;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_conv_kernel_dim = 4;
  int64_t num_experts = 256;
  int64_t num_experts_per_tok = 8;
  int64_t moe_intermediate_size = 512;
  int64_t shared_expert_intermediate_size = 512;
  int64_t full_attention_interval = 4;
  // The special token ids are fixed offsets from this one (<|endoftext|> = 248044 in Qwen3.6:
  // bos/eos 248044, <|im_end|> 248046, vision 248053/248054, image 248056, video 248057).
  int64_t special_token_base = 248044;
  // The vision tower (vision_config; model.visual.* at these shapes). The release's: 27 blocks of 1152.
  int64_t vision_depth = 27;
  int64_t vision_hidden_size = 1152;
  int64_t vision_num_heads = 16;
  int64_t vision_intermediate_size = 4304;
  int64_t vision_num_position_embeddings = 2304;

  // Qwen/Qwen3.6-35B-A3B.
  static SynthDims qwen36_35b_a3b() { return {}; }
  // A model small enough for unit tests that still satisfies every format's divisibility rules
  // (NVFP4: K % 16; INT4 group 128: K % 128 and N % 8 for every quantized linear).
  static SynthDims tiny();
  // The built-in demo model of `fp4serve serve` without a MODEL: tiny widths but the real
  // vocabulary and special token ids, so the real tokenizer and chat template work with it
  // (random weights: it answers with fluent-looking nonsense). ~130 MB in bf16.
  static SynthDims demo();
};

// Names accepted by --preset.
std::vector<std::string> preset_names();
// Throws std::invalid_argument listing the known presets.
SynthDims preset_dims(std::string_view name);

// layer_types of a model of n layers: layer i is full attention iff (i + 1) % interval == 0, so the
// 3:1 linear/full pattern of the real model is kept at any depth (n = 1, 2, 3 are all linear).
std::vector<std::string> layer_types(int64_t num_layers, int64_t full_attention_interval = 4);

// config.json as a JSON object; `quantization_config` (if not null) is added at the top level, where
// transformers, ModelOpt, Qwen's FP8 export and AutoRound all put it.
nlohmann::json config_json(const SynthDims& dims, const nlohmann::json& quantization_config = nullptr);
nlohmann::json generation_config_json(const SynthDims& dims);

// The text of a JSON file as transformers writes it: indent 2, sorted keys, trailing newline.
std::string hf_json_text(const nlohmann::json& j);

}  // namespace fp4serve::synth
