#include "tools/synth_preset.h"

#include <stdexcept>

namespace fp4serve::synth {

SynthDims SynthDims::tiny() {
  SynthDims d;
  d.num_hidden_layers = 4;
  d.hidden_size = 128;
  d.vocab_size = 512;
  d.num_attention_heads = 4;
  d.num_key_value_heads = 1;
  d.head_dim = 256;             // as the real model: mRoPE sections [11, 11, 10] need rotary dim 64
  d.linear_num_key_heads = 4;
  d.linear_num_value_heads = 8;  // in_proj_a/b: 8 rows (INT4 needs N % 8)
  d.linear_key_head_dim = 32;
  d.linear_value_head_dim = 32;  // out_proj in = 256 (INT4 needs K % 128)
  d.num_experts = 8;
  d.num_experts_per_tok = 2;
  d.moe_intermediate_size = 128;  // down_proj in = 128
  d.shared_expert_intermediate_size = 128;
  d.special_token_base = 490;  // every special id inside the 512-token vocabulary
  d.vision_depth = 1;           // a small tower of the real structure (head dim 16, an 8 x 8 position table)
  d.vision_hidden_size = 64;
  d.vision_num_heads = 4;
  d.vision_intermediate_size = 128;
  d.vision_num_position_embeddings = 64;
  return d;
}

SynthDims SynthDims::demo() {
  SynthDims d = tiny();
  d.vocab_size = 248320;
  d.special_token_base = 248044;
  return d;
}

std::vector<std::string> preset_names() { return {"qwen3.6-35b-a3b", "demo"}; }

SynthDims preset_dims(std::string_view name) {
  if (name == "qwen3.6-35b-a3b") return SynthDims::qwen36_35b_a3b();
  if (name == "demo") return SynthDims::demo();
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> layer_types(int64_t num_layers, int64_t interval) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    out.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  return out;
}

nlohmann::json config_json(const SynthDims& d, const nlohmann::json& quantization_config) {
  using nlohmann::json;
  const int64_t tok = d.special_token_base;
  // text_config of Qwen/Qwen3.6-35B-A3B (docs/model-arch.md §1.1), with the shape fields from `d`.
  json text = {
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"attn_output_gate", true},
      {"bos_token_id", tok},
      {"dtype", "bfloat16"},
      {"eos_token_id", tok},
      {"full_attention_interval", d.full_attention_interval},
      {"head_dim", d.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", d.hidden_size},
      {"initializer_range", 0.02},
      {"layer_types", layer_types(d.num_hidden_layers, d.full_attention_interval)},
      {"linear_conv_kernel_dim", d.linear_conv_kernel_dim},
      {"linear_key_head_dim", d.linear_key_head_dim},
      {"linear_num_key_heads", d.linear_num_key_heads},
      {"linear_num_value_heads", d.linear_num_value_heads},
      {"linear_value_head_dim", d.linear_value_head_dim},
      {"mamba_ssm_dtype", "float32"},
      {"max_position_embeddings", 262144},
      {"model_type", "qwen3_5_moe_text"},
      {"moe_intermediate_size", d.moe_intermediate_size},
      {"mtp_num_hidden_layers", 1},
      {"mtp_use_dedicated_embeddings", false},
      {"num_attention_heads", d.num_attention_heads},
      {"num_experts", d.num_experts},
      {"num_experts_per_tok", d.num_experts_per_tok},
      {"num_hidden_layers", d.num_hidden_layers},
      {"num_key_value_heads", d.num_key_value_heads},
      {"output_router_logits", false},
      {"pad_token_id", nullptr},
      {"partial_rotary_factor", 0.25},
      {"rms_norm_eps", 1e-6},
      {"rope_parameters",
       {{"mrope_interleaved", true},
        {"mrope_section", {11, 11, 10}},
        {"partial_rotary_factor", 0.25},
        {"rope_theta", 10000000},
        {"rope_type", "default"}}},
      {"router_aux_loss_coef", 0.001},
      {"shared_expert_intermediate_size", d.shared_expert_intermediate_size},
      {"use_cache", true},
      {"vocab_size", d.vocab_size},
  };
  json vision = {
      {"deepstack_visual_indexes", json::array()},
      {"depth", d.vision_depth},
      {"hidden_act", "gelu_pytorch_tanh"},
      {"hidden_size", d.vision_hidden_size},
      {"in_channels", 3},
      {"initializer_range", 0.02},
      {"intermediate_size", d.vision_intermediate_size},
      {"model_type", "qwen3_5_moe"},
      {"num_heads", d.vision_num_heads},
      {"num_position_embeddings", d.vision_num_position_embeddings},
      {"out_hidden_size", d.hidden_size},
      {"patch_size", 16},
      {"spatial_merge_size", 2},
      {"temporal_patch_size", 2},
  };
  json config = {
      {"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
      {"image_token_id", tok + 12},
      {"model_type", "qwen3_5_moe"},
      {"text_config", text},
      {"tie_word_embeddings", false},
      {"transformers_version", "4.57.1"},
      {"video_token_id", tok + 13},
      {"vision_config", vision},
      {"vision_end_token_id", tok + 10},
      {"vision_start_token_id", tok + 9},
  };
  if (!quantization_config.is_null()) config["quantization_config"] = quantization_config;
  return config;
}

nlohmann::json generation_config_json(const SynthDims& d) {
  const int64_t tok = d.special_token_base;
  return {
      {"bos_token_id", tok},
      {"do_sample", true},
      {"eos_token_id", {tok + 2, tok}},
      {"pad_token_id", tok},
      {"temperature", 1.0},
      {"top_k", 20},
      {"top_p", 0.95},
      {"transformers_version", "4.57.1"},
  };
}

std::string hf_json_text(const nlohmann::json& j) { return j.dump(2) + "\n"; }

}  // namespace fp4serve::synth
