// The tensor plan against the spec's arithmetic (docs/model-arch.md §4.1, docs/quant-formats.md §3.5) on the
// real Qwen3.6-35B-A3B dimensions.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "checkpoint/model_config.h"
#include "checkpoint/tensor_plan.h"

namespace fp4serve {
namespace {

std::string qwen36_config_json(int layers) {
  std::string types;
  for (int i = 0; i < layers; ++i) types += std::string(i ? "," : "") + ((i + 1) % 4 == 0 ? "\"full_attention\"" : "\"linear_attention\"");
  return R"({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "tie_word_embeddings": false, "image_token_id": 248056, "video_token_id": 248057,
    "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": )" +
         std::to_string(layers) + R"(, "layer_types": [)" + types + R"(],
      "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
      "attn_output_gate": true, "attention_bias": false,
      "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                          "rope_theta": 10000000, "rope_type": "default"},
      "max_position_embeddings": 262144, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
      "mamba_ssm_dtype": "float32", "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
      "shared_expert_intermediate_size": 512, "hidden_act": "silu", "rms_norm_eps": 1e-06, "vocab_size": 248320,
      "tie_word_embeddings": false, "bos_token_id": 248044, "eos_token_id": 248044, "mtp_num_hidden_layers": 1,
      "dtype": "bfloat16"}})";
}

uint64_t params_of_layer(const TensorPlan& plan, int64_t layer, bool (*pick)(const PlannedModule&)) {
  uint64_t n = 0;
  for (const auto& m : plan.modules) {
    if (m.layer != layer || !pick(m)) continue;
    for (const auto& t : m.tensors) {
      uint64_t e = 1;
      for (auto d : t.shape) e *= static_cast<uint64_t>(d);
      n += e;
    }
  }
  return n;
}

bool is_mixer(const PlannedModule& m) { return m.path.find(".mlp.") == std::string::npos && m.path.find("layernorms") == std::string::npos; }
bool is_moe(const PlannedModule& m) { return m.path.find(".mlp.") != std::string::npos; }

TEST(TensorPlan, Bf16ReleaseMatchesSpecParameterCounts) {
  const ModelConfig c = ModelConfig::parse(qwen36_config_json(40));
  const TensorPlan plan = make_tensor_plan(c, [](std::string_view) { return WeightFormat::bf16(); }, ExpertStorage::kFused);
  // docs/model-arch.md §4.1: GDN layer 33,718,464 params, attention layer 27,263,488, MoE block 808,978,432.
  EXPECT_EQ(params_of_layer(plan, 0, is_mixer), 33'718'464u);
  EXPECT_EQ(params_of_layer(plan, 3, is_mixer), 27'263'488u);
  EXPECT_EQ(params_of_layer(plan, 0, is_moe), 808'978'432u);
  // 3 global + 30 x 19 GDN-layer + 10 x 16 attention-layer tensors = 733 (the GGUF count, which
  // splits fused gate_up into two; we keep gate_up_proj fused, so one fewer per layer: 693).
  EXPECT_EQ(plan.all_tensors().size(), 3u + 30u * 18u + 10u * 15u);
}

TEST(TensorPlan, KvAndGdnStateSizes) {
  const ModelConfig c = ModelConfig::parse(qwen36_config_json(40));
  EXPECT_EQ(kv_cache_bytes_per_token(c, 2), 10u * 2u * 2u * 256u * 2u);  // 20,480
  EXPECT_EQ(kv_cache_bytes_per_token(c, 1), 10'240u);
  // 30 x (32 x 128 x 128 x 4 + 8192 x 3 x 2) = 64,389,120 bytes, the "~61 MiB" of docs/model-arch.md §3
  EXPECT_EQ(gdn_state_bytes_per_sequence(c), 64'389'120u);
}

TEST(TensorPlan, Nvfp4ReleaseShapes) {
  const ModelConfig c = ModelConfig::parse(qwen36_config_json(4));
  auto recipe = [](std::string_view path) {
    if (path.find("mlp.experts") != std::string_view::npos || path.find("shared_expert.") != std::string_view::npos ||
        path == "lm_head")
      return WeightFormat::nvfp4(16, false);
    if (path.find("self_attn") != std::string_view::npos || path.find("in_proj_qkv") != std::string_view::npos ||
        path.find("in_proj_z") != std::string_view::npos || path.find("out_proj") != std::string_view::npos)
      return WeightFormat::fp8_per_tensor(true);
    return WeightFormat::bf16();
  };
  const TensorPlan plan = make_tensor_plan(c, recipe, ExpertStorage::kPerExpert, true);
  std::map<std::string, const PlannedTensor*> by_name;
  for (const auto* t : plan.all_tensors()) by_name[t->name] = t;
  const std::string P = "model.language_model.layers.";
  // docs/quant-formats.md §3.4/§3.5
  auto* gate = by_name.at(P + "0.mlp.experts.5.gate_proj.weight");
  EXPECT_EQ(gate->dtype, DType::kU8);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{512, 1024}));
  EXPECT_EQ(by_name.at(P + "0.mlp.experts.5.down_proj.weight_scale")->shape, (std::vector<int64_t>{2048, 32}));
  EXPECT_EQ(by_name.at(P + "0.mlp.experts.5.down_proj.weight_scale")->dtype, DType::kF8E4M3);
  EXPECT_TRUE(by_name.at(P + "0.mlp.experts.5.down_proj.input_scale")->optional);  // W4A16
  EXPECT_EQ(by_name.at("lm_head.weight")->shape, (std::vector<int64_t>{248320, 1024}));
  EXPECT_EQ(by_name.at(P + "0.linear_attn.in_proj_qkv.weight")->dtype, DType::kF8E4M3);
  EXPECT_FALSE(by_name.at(P + "0.linear_attn.in_proj_qkv.input_scale")->optional);
  EXPECT_EQ(by_name.at(P + "0.linear_attn.in_proj_a.weight")->dtype, DType::kBF16);
  EXPECT_TRUE(by_name.at(P + "3.self_attn.k_proj.k_scale")->optional);
  EXPECT_EQ(by_name.at(P + "0.linear_attn.A_log")->dtype, DType::kF32);
}

TEST(TensorPlan, ActiveBytesCountTopKExpertsOnly) {
  const ModelConfig c = ModelConfig::parse(qwen36_config_json(4));
  const TensorPlan plan = make_tensor_plan(c, [](std::string_view) { return WeightFormat::bf16(); }, ExpertStorage::kFused);
  uint64_t experts = 0, others = 0;
  for (const auto& m : plan.modules) {
    if (m.kind == ModuleKind::kRoutedExperts) experts += m.byte_size();
    else if (m.kind != ModuleKind::kEmbedding) others += m.byte_size();
  }
  const uint64_t embed_row = 2048 * 2;
  EXPECT_EQ(plan.active_bytes_per_token(), others + experts * 8 / 256 + embed_row);
}

TEST(TensorPlan, KnownUnusedPrefixes) {
  EXPECT_TRUE(is_known_unused_tensor("mtp.fc.weight"));
  EXPECT_TRUE(is_known_unused_tensor("model.visual.blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(is_known_unused_tensor("model.language_model.norm.weight"));
}

}  // namespace
}  // namespace fp4serve
