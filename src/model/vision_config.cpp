#include "model/vision_config.h"

#include <cmath>

namespace fp4serve::model {

int64_t VisionConfig::grid_side() const {
  return static_cast<int64_t>(std::sqrt(static_cast<double>(num_position_embeddings)));
}

kernels::Activation VisionConfig::mlp_activation() const {
  // [transformers: activations.py ACT2FN] "gelu_pytorch_tanh" is GELU(approximate="tanh"), "gelu" the exact one.
  if (hidden_act == "gelu_pytorch_tanh") return kernels::Activation::kGeluTanh;
  return kernels::Activation::kGeluErf;  // "gelu" (parse refuses anything else)
}

VisionConfig VisionConfig::parse(const JsonField& v) {
  if (!v.is_object()) v.fail("expected an object");
  VisionConfig c;
  c.depth = v.get_int("depth", c.depth);
  c.hidden_size = v.get_int("hidden_size", c.hidden_size);
  c.num_heads = v.get_int("num_heads", c.num_heads);
  c.intermediate_size = v.get_int("intermediate_size", c.intermediate_size);
  c.hidden_act = v.get_string("hidden_act", c.hidden_act);
  c.in_channels = v.get_int("in_channels", c.in_channels);
  c.patch_size = v.get_int("patch_size", c.patch_size);
  c.temporal_patch_size = v.get_int("temporal_patch_size", c.temporal_patch_size);
  c.spatial_merge_size = v.get_int("spatial_merge_size", c.spatial_merge_size);
  c.out_hidden_size = v.get_int("out_hidden_size", c.out_hidden_size);
  c.num_position_embeddings = v.get_int("num_position_embeddings", c.num_position_embeddings);
  auto positive = [&](const char* key, int64_t value) {
    if (value <= 0) v.at(key).fail("must be positive");
  };
  for (auto [key, value] : {std::pair{"depth", c.depth}, {"hidden_size", c.hidden_size}, {"num_heads", c.num_heads},
                            {"intermediate_size", c.intermediate_size}, {"in_channels", c.in_channels},
                            {"patch_size", c.patch_size}, {"temporal_patch_size", c.temporal_patch_size},
                            {"spatial_merge_size", c.spatial_merge_size}, {"out_hidden_size", c.out_hidden_size},
                            {"num_position_embeddings", c.num_position_embeddings}})
    if (v.has(key)) positive(key, value);
  if (c.hidden_size % c.num_heads != 0 || c.head_dim() % 4 != 0)
    v.at("num_heads").fail("hidden_size / num_heads must be a multiple of 4 (2-D rotary over the head dim)");
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu")
    v.at("hidden_act").fail("'" + c.hidden_act + "' is not supported by the vision tower (gelu_pytorch_tanh, gelu)");
  if (c.grid_side() * c.grid_side() != c.num_position_embeddings)
    v.at("num_position_embeddings").fail("must be a square (the position table is a square grid)");
  if (auto ds = v.find("deepstack_visual_indexes"); ds && !ds->as_int_list().empty())
    ds->fail("deepstack layers are not supported (every Qwen3.5/3.6 release has none)");
  return c;
}

std::optional<VisionConfig> VisionConfig::parse_config_json(std::string_view json_text, const std::string& file) {
  const CheckpointJson doc = parse_json_text(json_text, file);
  const JsonField root(doc, file, "");
  auto v = root.is_object() ? root.find("vision_config") : std::nullopt;
  if (!v) return std::nullopt;
  return parse(*v);
}

std::optional<VisionConfig> VisionConfig::load(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  return parse_config_json(read_text_file(path), path.string());
}

}  // namespace fp4serve::model
