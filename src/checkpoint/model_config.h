// The text model's hyper-parameters, parsed from a checkpoint's config.json (docs/model-arch.md §1).
//
// Two layouts are understood:
//   kQwen3_5Moe  `Qwen3_5MoeForConditionalGeneration` / model_type "qwen3_5_moe" with the text
//                fields nested under `text_config` (also a flat "qwen3_5_moe_text" config).
//                Tensors under "model.language_model." (nested) or "model." (flat text config);
//                GDN projections stored separately
//                (in_proj_qkv / in_proj_z / in_proj_b / in_proj_a); experts fused 3-D in the BF16
//                release (per-expert in quantized releases); interleaved mRoPE.
//   kQwen3Next   `Qwen3NextForCausalLM` / "qwen3_next": flat config, tensors under "model.",
//                GDN projections fused and grouped per key head (in_proj_qkvz / in_proj_ba,
//                docs/model-arch.md §4.3), experts stored per expert, plain 1-D RoPE.
//
// Defaults: a field that is absent takes transformers' default (configuration_qwen3_5_moe.py and
// configuration_qwen3_next.py), except the fields that fix tensor shapes (hidden_size,
// num_hidden_layers, attention/GDN head counts, num_experts, vocab_size, ...): those are required,
// because a config without them is not a real checkpoint's and a silent default would only move the
// fault to a confusing shape mismatch at load. Rope parameters are read from `rope_parameters`
// (transformers >= 5) or from the older `rope_scaling` + top-level `rope_theta`/`partial_rotary_factor`.
// `layer_types` absent => derived from `full_attention_interval` (default 4) exactly as transformers:
// layer i is full attention iff (i + 1) % interval == 0.
//
// Every fault is a CheckpointError "config.json: <field path>: <what>"; inconsistent values (a
// layer_types list of the wrong length, heads that do not divide, a non-MoE layer) are refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve {

enum class LayerKind : uint8_t { kLinearAttention, kFullAttention };

enum class ModelLayout : uint8_t { kQwen3_5Moe, kQwen3Next };

std::string_view layer_kind_name(LayerKind kind);   // "linear_attention" / "full_attention"
std::string_view model_layout_name(ModelLayout layout);

struct ModelConfig {
  // --- identity ---
  std::string architecture;  // architectures[0], e.g. "Qwen3_5MoeForConditionalGeneration"
  std::string model_type;    // top-level model_type ("qwen3_5_moe", "qwen3_next", ...)
  std::string text_model_type;  // model_type of the text part ("qwen3_5_moe_text" when nested)
  ModelLayout layout = ModelLayout::kQwen3_5Moe;
  // Prefix of the text trunk's tensor names: "model.language_model." or "model.".
  // lm_head ("lm_head.weight") and the MTP block ("mtp.") are top level in both layouts.
  std::string tensor_prefix;

  // --- trunk ---
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<LayerKind> layer_types;  // one per layer
  int64_t full_attention_interval = 4;  // as declared (or the default); layer_types is what counts
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  int64_t max_position_embeddings = 32768;

  // --- gated full attention ---
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 256;
  bool attn_output_gate = true;  // q_proj is 2x wide: per head [q | gate]
  bool attention_bias = false;

  // --- rope (full-attention layers only) ---
  std::string rope_type = "default";
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.25;
  std::vector<int64_t> mrope_section;  // [11, 11, 10] for Qwen3.5; empty => plain 1-D RoPE
  bool mrope_interleaved = false;

  // --- Gated DeltaNet (linear-attention layers) ---
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_conv_kernel_dim = 4;
  std::string mamba_ssm_dtype = "float32";  // dtype of the recurrent state (vLLM)

  // --- MoE (every layer) ---
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  // Qwen3.5 always renormalises the top-k weights (hard-coded in HF), so true unless a
  // qwen3_next config says otherwise.
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;      // qwen3_next only; must leave every layer MoE
  std::vector<int64_t> mlp_only_layers;  // qwen3_next only; must be empty

  // --- special tokens (generation_config.json may add more eos ids) ---
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // eos_token_id may be an int or a list
  std::optional<int64_t> pad_token_id;

  // --- MTP (next-token prediction) head stored under "mtp." ---
  int64_t mtp_num_hidden_layers = 0;
  bool mtp_use_dedicated_embeddings = false;

  // --- multimodal token ids (top level of qwen3_5_moe; absent for text-only configs) ---
  std::optional<int64_t> image_token_id;
  std::optional<int64_t> video_token_id;
  bool has_vision_config = false;

  std::string torch_dtype;  // "bfloat16" ("dtype" or legacy "torch_dtype"); informational

  // --- derived ---
  bool is_full_attention(int64_t layer) const {
    return layer_types.at(static_cast<size_t>(layer)) == LayerKind::kFullAttention;
  }
  int64_t num_full_attention_layers() const;
  int64_t num_linear_attention_layers() const;
  std::vector<int64_t> full_attention_layers() const;
  int64_t rotary_dim() const;  // int(head_dim * partial_rotary_factor), as transformers
  int64_t q_proj_out() const { return num_attention_heads * head_dim * (attn_output_gate ? 2 : 1); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
  // "model.language_model.layers.<l>." — the prefix of layer l's tensors.
  std::string layer_prefix(int64_t layer) const;

  // Parses config.json text. `file` is the name used in messages.
  static ModelConfig parse(std::string_view json_text, const std::string& file = "config.json");
  // Reads <model_dir>/config.json.
  static ModelConfig load(const std::filesystem::path& model_dir);

  // A few lines for `fp4serve inspect` and the start-up log.
  std::string describe() const;
};

}  // namespace fp4serve
