// The vision tower's hyper-parameters: config.json's `vision_config` (Qwen3_5MoeVisionConfig; the
// release's values in the comments, docs/model-arch.md §2.6).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "checkpoint/json_field.h"
#include "kernels/vision.h"

namespace fp4serve::model {

struct VisionConfig {
  int64_t depth = 27;
  int64_t hidden_size = 1152;
  int64_t num_heads = 16;
  int64_t intermediate_size = 4304;
  std::string hidden_act = "gelu_pytorch_tanh";
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 2048;
  int64_t num_position_embeddings = 2304;  // a 48 x 48 table
  float layer_norm_eps = 1e-6f;            // fixed in HF's modules, not in the config
  float rope_theta = 10000.0f;             // Qwen3_5MoeVisionRotaryEmbedding's default

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merged_dim() const { return hidden_size * spatial_merge_size * spatial_merge_size; }
  int64_t grid_side() const;  // int(sqrt(num_position_embeddings)), as HF
  kernels::Activation mlp_activation() const;

  // Parses a `vision_config` object; CheckpointError "<file>: vision_config.<field>: ..." on a bad
  // or unsupported value (deepstack layers, an activation the tower does not implement).
  static VisionConfig parse(const JsonField& vision_config);
  // <model_dir>/config.json's vision_config; nullopt when the config has none (a text-only model).
  static std::optional<VisionConfig> load(const std::filesystem::path& model_dir);
  static std::optional<VisionConfig> parse_config_json(std::string_view json_text, const std::string& file);
};

}  // namespace fp4serve::model
