// ModelConfig and GenerationConfig: every field of the real Qwen3.6 config, the Qwen3-Next flat
// layout, transformers' defaults, and one test per kind of malformed input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/generation_config.h"
#include "checkpoint/model_config.h"

namespace fp4serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::filesystem::path kConfigs = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "configs";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json fixture(const std::string& rel) {
  return nlohmann::ordered_json::parse(read_file(kConfigs / rel));
}

// The message of the CheckpointError that parsing `text` throws ("" if none).
std::string model_error(const std::string& text) {
  try {
    ModelConfig::parse(text);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

std::string generation_error(const std::string& text) {
  try {
    GenerationConfig::parse(text);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// A nested Qwen3.5-MoE config with only the required fields.
nlohmann::ordered_json minimal_nested() {
  return nlohmann::ordered_json::parse(R"({
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {"hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "vocab_size": 1000, "num_experts": 8,
                    "num_experts_per_tok": 2, "moe_intermediate_size": 32}})");
}

TEST(ModelConfigTest, Qwen36EveryField) {
  const ModelConfig c = ModelConfig::parse(read_file(kConfigs / "qwen3_6_35b_a3b/config.json"));
  EXPECT_EQ(c.architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(c.model_type, "qwen3_5_moe");
  EXPECT_EQ(c.text_model_type, "qwen3_5_moe_text");
  EXPECT_EQ(c.layout, ModelLayout::kQwen3_5Moe);
  EXPECT_EQ(c.tensor_prefix, "model.language_model.");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 40);
  ASSERT_EQ(c.layer_types.size(), 40u);
  EXPECT_EQ(c.full_attention_interval, 4);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_THAT(c.mrope_section, ElementsAre(11, 11, 10));
  EXPECT_TRUE(c.mrope_interleaved);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.mamba_ssm_dtype, "float32");
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);  // absent in the file; Qwen3.5 always renormalises
  EXPECT_EQ(c.decoder_sparse_step, 1);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_EQ(c.bos_token_id, 248044);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(248044));
  EXPECT_FALSE(c.pad_token_id.has_value());  // "pad_token_id": null
  EXPECT_EQ(c.mtp_num_hidden_layers, 1);
  EXPECT_FALSE(c.mtp_use_dedicated_embeddings);
  EXPECT_EQ(c.image_token_id, 248056);
  EXPECT_EQ(c.video_token_id, 248057);
  EXPECT_TRUE(c.has_vision_config);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfigTest, Qwen36DerivedHelpers) {
  const ModelConfig c = ModelConfig::load(kConfigs / "qwen3_6_35b_a3b");
  EXPECT_EQ(c.num_full_attention_layers(), 10);
  EXPECT_EQ(c.num_linear_attention_layers(), 30);
  EXPECT_THAT(c.full_attention_layers(), ElementsAre(3, 7, 11, 15, 19, 23, 27, 31, 35, 39));
  for (int l = 0; l < 40; ++l) EXPECT_EQ(c.is_full_attention(l), (l + 1) % 4 == 0) << l;
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.q_proj_out(), 8192);
  EXPECT_EQ(c.kv_dim(), 512);
  EXPECT_EQ(c.linear_key_dim(), 2048);
  EXPECT_EQ(c.linear_value_dim(), 4096);
  EXPECT_EQ(c.linear_conv_dim(), 8192);
  EXPECT_EQ(c.layer_prefix(3), "model.language_model.layers.3.");
  const std::string d = c.describe();
  EXPECT_THAT(d, HasSubstr("30 gated-deltanet + 10 full attention"));
  EXPECT_THAT(d, HasSubstr("256 experts, top 8"));
}

TEST(ModelConfigTest, Qwen3NextFlatLayout) {
  const ModelConfig c = ModelConfig::load(kConfigs / "qwen3_next_80b_a3b");
  EXPECT_EQ(c.architecture, "Qwen3NextForCausalLM");
  EXPECT_EQ(c.layout, ModelLayout::kQwen3Next);
  EXPECT_EQ(c.tensor_prefix, "model.");
  EXPECT_EQ(c.layer_prefix(0), "model.layers.0.");
  EXPECT_EQ(c.num_hidden_layers, 48);
  ASSERT_EQ(c.layer_types.size(), 48u);  // no layer_types in the file: derived from the interval
  EXPECT_EQ(c.num_full_attention_layers(), 12);
  EXPECT_TRUE(c.is_full_attention(47));
  EXPECT_FALSE(c.is_full_attention(0));
  EXPECT_EQ(c.num_experts, 512);
  EXPECT_EQ(c.num_experts_per_tok, 10);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);  // top-level rope_theta (old style), rope_scaling null
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_TRUE(c.mrope_section.empty());  // plain 1-D RoPE
  EXPECT_FALSE(c.mrope_interleaved);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(151645));
  EXPECT_EQ(c.mtp_num_hidden_layers, 0);
  EXPECT_FALSE(c.has_vision_config);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfigTest, TransformersDefaultsForAbsentFields) {
  const ModelConfig c = ModelConfig::parse(minimal_nested().dump());
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // PreTrainedConfig.default_theta
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_THAT(c.mrope_section, ElementsAre(11, 11, 10));
  EXPECT_EQ(c.mtp_num_hidden_layers, 0);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.bos_token_id.has_value());
  // (i + 1) % 4 == 0 -> full attention
  ASSERT_EQ(c.layer_types.size(), 8u);
  EXPECT_EQ(c.layer_types[3], LayerKind::kFullAttention);
  EXPECT_EQ(c.layer_types[7], LayerKind::kFullAttention);
  EXPECT_EQ(c.layer_types[0], LayerKind::kLinearAttention);
}

TEST(ModelConfigTest, FullAttentionIntervalDrivesDerivedLayerTypes) {
  auto j = minimal_nested();
  j["text_config"]["full_attention_interval"] = 2;
  const ModelConfig c = ModelConfig::parse(j.dump());
  EXPECT_EQ(c.num_full_attention_layers(), 4);
  EXPECT_TRUE(c.is_full_attention(1));
  EXPECT_FALSE(c.is_full_attention(2));
}

TEST(ModelConfigTest, OldStyleRopeScalingAndTopLevelTheta) {
  // A flat qwen3_5_moe_text config written before rope_parameters existed.
  auto j = minimal_nested()["text_config"];
  j["model_type"] = "qwen3_5_moe_text";
  j["rope_theta"] = 5000000;
  j["partial_rotary_factor"] = 0.5;
  j["head_dim"] = 64;
  j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {4, 6, 6}}, {"mrope_interleaved", true}};
  const ModelConfig c = ModelConfig::parse(j.dump());
  EXPECT_EQ(c.layout, ModelLayout::kQwen3_5Moe);
  EXPECT_EQ(c.tensor_prefix, "model.");
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.rotary_dim(), 32);
  EXPECT_THAT(c.mrope_section, ElementsAre(4, 6, 6));
  EXPECT_EQ(c.rope_type, "default");
}

TEST(ModelConfigTest, RopeParametersWinOverTopLevelFields) {
  auto j = minimal_nested();
  j["text_config"]["rope_theta"] = 1;
  j["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000}};
  EXPECT_DOUBLE_EQ(ModelConfig::parse(j.dump()).rope_theta, 1e6);
}

TEST(ModelConfigTest, LegacyLayerTypeNamesAreRemapped) {
  auto j = minimal_nested();
  j["text_config"]["num_hidden_layers"] = 4;
  j["text_config"]["layer_types"] = {"mamba", "mamba", "mamba", "attention"};
  const ModelConfig c = ModelConfig::parse(j.dump());
  EXPECT_EQ(c.layer_types[0], LayerKind::kLinearAttention);
  EXPECT_EQ(c.layer_types[3], LayerKind::kFullAttention);
}

TEST(ModelConfigTest, EosMayBeAList) {
  auto j = minimal_nested();
  j["text_config"]["eos_token_id"] = {5, 7};
  EXPECT_THAT(ModelConfig::parse(j.dump()).eos_token_ids, ElementsAre(5, 7));
}

TEST(ModelConfigTest, InvalidJsonNamesTheFile) {
  std::string msg;
  try {
    ModelConfig::parse("{\"model_type\": ", "/models/x/config.json");
  } catch (const CheckpointError& e) {
    msg = e.what();
  }
  EXPECT_THAT(msg, HasSubstr("/models/x/config.json"));
  EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(ModelConfigTest, MissingFileNamesThePath) {
  try {
    ModelConfig::load(kConfigs / "no_such_model");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no_such_model/config.json"));
  }
}

TEST(ModelConfigTest, MissingRequiredFieldNamesThePath) {
  for (const char* field : {"hidden_size", "num_hidden_layers", "num_experts", "vocab_size"}) {
    auto j = minimal_nested();
    j["text_config"].erase(field);
    EXPECT_EQ(model_error(j.dump()), std::string("config.json: text_config.") + field + ": missing");
  }
  auto flat = fixture("qwen3_next_80b_a3b/config.json");
  flat.erase("num_experts");
  EXPECT_EQ(model_error(flat.dump()), "config.json: num_experts: missing");
}

TEST(ModelConfigTest, NullRequiredFieldCountsAsMissing) {
  auto j = minimal_nested();
  j["text_config"]["hidden_size"] = nullptr;
  EXPECT_EQ(model_error(j.dump()), "config.json: text_config.hidden_size: missing");
}

TEST(ModelConfigTest, WrongTypeNamesPathAndType) {
  auto j = minimal_nested();
  j["text_config"]["num_experts"] = "256";
  EXPECT_EQ(model_error(j.dump()), "config.json: text_config.num_experts: expected an integer, got string");
  j = minimal_nested();
  j["text_config"]["hidden_size"] = 2048.5;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.hidden_size: expected an integer"));
  j = minimal_nested();
  j["text_config"]["tie_word_embeddings"] = 1;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.tie_word_embeddings: expected true or false"));
  j = minimal_nested();
  j["text_config"] = "oops";
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config: expected an object"));
  j = minimal_nested();
  j["text_config"]["layer_types"] = {"linear_attention", 3};
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.layer_types[1]: expected a string"));
}

TEST(ModelConfigTest, LayerTypesLengthMismatchRefused) {
  auto j = fixture("qwen3_6_35b_a3b/config.json");
  j["text_config"]["num_hidden_layers"] = 48;
  EXPECT_EQ(model_error(j.dump()),
            "config.json: text_config.layer_types: has 40 entries but num_hidden_layers is 48");
}

TEST(ModelConfigTest, UnknownLayerTypeRefused) {
  auto j = minimal_nested();
  j["text_config"]["num_hidden_layers"] = 2;
  j["text_config"]["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.layer_types[0]: unknown layer type 'sliding_attention'"));
}

TEST(ModelConfigTest, InconsistentHeadsRefused) {
  auto j = minimal_nested();
  j["text_config"]["num_key_value_heads"] = 3;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("num_attention_heads: 4 is not a multiple of num_key_value_heads 3"));
  j = minimal_nested();
  j["text_config"]["linear_num_value_heads"] = 24;
  j["text_config"]["linear_num_key_heads"] = 16;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("linear_num_value_heads: 24 is not a multiple of linear_num_key_heads 16"));
  j = minimal_nested();
  j["text_config"]["num_experts_per_tok"] = 9;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("num_experts_per_tok: 9 exceeds num_experts 8"));
  j = minimal_nested();
  j["text_config"]["num_attention_heads"] = 0;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.num_attention_heads: must be positive"));
}

TEST(ModelConfigTest, ShallowModelWithoutFullAttentionParses) {
  // transformers accepts a 2-layer hybrid with no full-attention layer (tiny test checkpoints).
  auto j = minimal_nested();
  j["text_config"]["num_hidden_layers"] = 2;
  const ModelConfig c = ModelConfig::parse(j.dump());
  EXPECT_EQ(c.num_full_attention_layers(), 0);
  EXPECT_EQ(c.num_linear_attention_layers(), 2);
}

TEST(ModelConfigTest, MropeSectionMustCoverRotaryDim) {
  auto j = fixture("qwen3_6_35b_a3b/config.json");
  j["text_config"]["rope_parameters"]["mrope_section"] = {16, 16, 16};
  EXPECT_THAT(model_error(j.dump()), HasSubstr("mrope_section: sums to 48 but rotary_dim/2 is 32"));
}

TEST(ModelConfigTest, UnsupportedChoicesRefused) {
  auto j = fixture("qwen3_6_35b_a3b/config.json");
  j["text_config"]["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THAT(model_error(j.dump()), HasSubstr("rope_parameters.rope_type: rope type 'yarn' is not supported"));
  j = fixture("qwen3_6_35b_a3b/config.json");
  j["model_type"] = "llama";
  EXPECT_THAT(model_error(j.dump()), HasSubstr("config.json: model_type: 'llama' is not supported"));
  j = fixture("qwen3_6_35b_a3b/config.json");
  j["text_config"]["attn_output_gate"] = false;
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config.attn_output_gate: false is not supported"));
  auto next = fixture("qwen3_next_80b_a3b/config.json");
  next["mlp_only_layers"] = {0};
  EXPECT_THAT(model_error(next.dump()), HasSubstr("mlp_only_layers: dense MLP layers are not supported"));
  next = fixture("qwen3_next_80b_a3b/config.json");
  next["decoder_sparse_step"] = 2;
  EXPECT_THAT(model_error(next.dump()), HasSubstr("decoder_sparse_step: 2"));
  j = fixture("qwen3_6_35b_a3b/config.json");
  j.erase("text_config");
  EXPECT_THAT(model_error(j.dump()), HasSubstr("text_config: missing"));
}

TEST(ModelConfigTest, ModelTypeInferredFromArchitecture) {
  auto j = fixture("qwen3_next_80b_a3b/config.json");
  j.erase("model_type");
  EXPECT_EQ(ModelConfig::parse(j.dump()).layout, ModelLayout::kQwen3Next);
  j.erase("architectures");
  EXPECT_THAT(model_error(j.dump()), HasSubstr("model_type: missing"));
}

TEST(GenerationConfigTest, Qwen36EveryField) {
  const GenerationConfig g = GenerationConfig::load(kConfigs / "qwen3_6_35b_a3b");
  EXPECT_THAT(g.eos_token_ids, ElementsAre(248046, 248044));
  EXPECT_EQ(g.bos_token_id, 248044);
  EXPECT_EQ(g.pad_token_id, 248044);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_EQ(g.temperature, 1.0);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_EQ(g.top_p, 0.95);
  EXPECT_FALSE(g.min_p.has_value());
  EXPECT_FALSE(g.repetition_penalty.has_value());
  EXPECT_FALSE(g.max_new_tokens.has_value());
  EXPECT_THAT(g.describe(), HasSubstr("eos [248046, 248044]"));
}

TEST(GenerationConfigTest, AllOptionalFields) {
  const GenerationConfig g = GenerationConfig::parse(
      R"({"eos_token_id": 7, "min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 256,
          "presence_penalty": 1.5, "temperature": 0.7, "top_k": 0})");
  EXPECT_THAT(g.eos_token_ids, ElementsAre(7));
  EXPECT_EQ(g.min_p, 0.05);
  EXPECT_EQ(g.repetition_penalty, 1.1);
  EXPECT_EQ(g.max_new_tokens, 256);
  EXPECT_EQ(g.presence_penalty, 1.5);
  EXPECT_EQ(g.top_k, 0);
  EXPECT_FALSE(g.do_sample.has_value());
  EXPECT_FALSE(GenerationConfig::parse("{}").temperature.has_value());
}

TEST(GenerationConfigTest, AbsentFileIsEmpty) {
  const GenerationConfig g = GenerationConfig::load(kConfigs / "qwen3_next_80b_a3b");
  EXPECT_TRUE(g.eos_token_ids.empty());
  EXPECT_FALSE(g.top_p.has_value());
}

TEST(GenerationConfigTest, MalformedRefused) {
  EXPECT_THAT(generation_error("[1, 2"), HasSubstr("generation_config.json: invalid JSON"));
  EXPECT_EQ(generation_error(R"({"top_k": "20"})"), "generation_config.json: top_k: expected an integer, got string");
  EXPECT_EQ(generation_error(R"({"eos_token_id": ["a"]})"),
            "generation_config.json: eos_token_id[0]: expected an integer, got string");
  EXPECT_EQ(generation_error(R"({"top_p": 1.5})"), "generation_config.json: top_p: must be in (0, 1]");
  EXPECT_EQ(generation_error(R"({"do_sample": "yes"})"),
            "generation_config.json: do_sample: expected true or false, got string");
  EXPECT_EQ(generation_error(R"({"temperature": -1})"), "generation_config.json: temperature: must not be negative");
}

}  // namespace
}  // namespace fp4serve
