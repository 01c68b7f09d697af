// QuantConfig: per-module formats for the NVFP4 (ModelOpt MIXED_PRECISION), Qwen block-FP8, AutoRound
// and GPTQ releases of Qwen3.6-35B-A3B, the uniform ModelOpt form, and the malformed cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/model_config.h"
#include "checkpoint/module_pattern.h"
#include "checkpoint/quant_config.h"
#include "tensor/weight_format.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kConfigs = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "configs";
const std::string P = "model.language_model.layers.";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json fixture(const std::string& rel) {
  return nlohmann::ordered_json::parse(read_file(kConfigs / rel));
}

// config.json text holding only a quantization_config.
std::string with_section(const nlohmann::ordered_json& section) {
  nlohmann::ordered_json j;
  j["quantization_config"] = section;
  return j.dump();
}

std::string quant_error(const std::string& config, std::optional<std::string> hf = std::nullopt) {
  try {
    std::optional<std::string_view> view;
    if (hf) view = *hf;
    QuantConfig::parse(config, view);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

std::string fmt(const QuantConfig& q, const std::string& module) { return q.format_for(module).name(); }

const WeightFormat kFp8 = WeightFormat::fp8_per_tensor(true);
const WeightFormat kW4A16 = WeightFormat::nvfp4(16, false);
const WeightFormat kBf16 = WeightFormat::bf16();

// The checks docs/quant-formats.md §2.3 / §3.5 make for nvidia/Qwen3.6-35B-A3B-NVFP4.
void expect_nvfp4_release_formats(const QuantConfig& q) {
  EXPECT_EQ(q.method(), QuantMethod::kModelOpt);
  EXPECT_EQ(q.algo(), "MIXED_PRECISION");
  EXPECT_EQ(q.kv_cache(), KvCacheQuant::kFP8);
  // Attention and GDN projections: FP8 W8A8 static.
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), kFp8);
  EXPECT_EQ(q.format_for(P + "39.self_attn.o_proj"), kFp8);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_qkv"), kFp8);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_z"), kFp8);
  EXPECT_EQ(q.format_for(P + "38.linear_attn.out_proj"), kFp8);
  // GDN gates and conv, router, shared-expert gate: dense.
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_a"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_b"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.conv1d"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert_gate"), kBf16);
  // Experts: aggregate key and per-expert tensors; shared expert; lm_head: W4A16 NVFP4.
  EXPECT_EQ(q.format_for(P + "0.mlp.experts"), kW4A16);
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.0.gate_proj"), kW4A16);
  EXPECT_EQ(q.format_for(P + "17.mlp.experts.255.down_proj"), kW4A16);
  EXPECT_EQ(q.format_for(P + "5.mlp.shared_expert.up_proj"), kW4A16);
  EXPECT_EQ(q.format_for("lm_head"), kW4A16);
  // Not listed: embeddings, MTP, vision.
  EXPECT_EQ(q.format_for("model.language_model.embed_tokens"), kBf16);
  EXPECT_EQ(q.format_for("mtp.fc"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.self_attn.q_proj"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.mlp.experts.3.gate_proj"), kBf16);
  EXPECT_EQ(q.format_for("model.visual.blocks.0.attn.qkv"), kBf16);
  EXPECT_EQ(q.format_for("mtp.pre_fc_norm_hidden"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.norm"), kBf16);
  // vLLM's spelling of the same module.
  EXPECT_EQ(q.format_for("language_model.model.layers.3.self_attn.k_proj"), kFp8);
}

TEST(QuantConfigTest, Nvfp4ReleaseFromConfigJson) {
  const QuantConfig q = QuantConfig::load(kConfigs / "qwen3_6_35b_a3b_nvfp4");
  EXPECT_THAT(q.source(), HasSubstr("config.json: quantization_config"));
  expect_nvfp4_release_formats(q);
  const std::string d = q.describe();
  EXPECT_THAT(d, HasSubstr("291 modules"));
  EXPECT_THAT(d, HasSubstr("130 fp8"));
  EXPECT_THAT(d, HasSubstr("161 nvfp4_w4a16_g16"));
  EXPECT_THAT(d, HasSubstr("fp8_e4m3"));
}

TEST(QuantConfigTest, Nvfp4ReleaseFromHfQuantConfigFallback) {
  auto config = fixture("qwen3_6_35b_a3b_nvfp4/config.json");
  config.erase("quantization_config");
  const QuantConfig q =
      QuantConfig::parse(config.dump(), read_file(kConfigs / "qwen3_6_35b_a3b_nvfp4/hf_quant_config.json"));
  EXPECT_EQ(q.source(), "hf_quant_config.json: quantization");
  expect_nvfp4_release_formats(q);
}

TEST(QuantConfigTest, KvCacheAlgoOnlyInHfQuantConfigIsRead) {
  // As in the published NVFP4 release: config.json's quantization_config has no kv_cache_scheme,
  // hf_quant_config.json says kv_cache_quant_algo FP8.
  auto config = fixture("qwen3_6_35b_a3b_nvfp4/config.json");
  config["quantization_config"].erase("kv_cache_scheme");
  const std::string hf = R"({"producer": {"name": "modelopt"},
      "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8", "quantized_layers": {}}})";
  EXPECT_EQ(QuantConfig::parse(config.dump(), std::nullopt).kv_cache(), KvCacheQuant::kNone);
  const QuantConfig q = QuantConfig::parse(config.dump(), hf);
  EXPECT_THAT(q.source(), HasSubstr("config.json: quantization_config"));
  EXPECT_EQ(q.kv_cache(), KvCacheQuant::kFP8);
  // The tiny NVFP4 reference checkpoint is laid out that way.
  EXPECT_EQ(QuantConfig::load(std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models/tiny-nvfp4").kv_cache(),
            KvCacheQuant::kFP8);
}

TEST(QuantConfigTest, ConfigJsonSectionIsPreferred) {
  const std::string hf = R"({"producer": {"name": "modelopt"},
      "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16,
                       "exclude_modules": ["lm_head"]}})";
  const QuantConfig q = QuantConfig::parse(read_file(kConfigs / "qwen3_6_35b_a3b_nvfp4/config.json"), hf);
  EXPECT_EQ(q.algo(), "MIXED_PRECISION");
  // Without the config.json section the legacy file is used.
  const QuantConfig legacy = QuantConfig::parse(R"({"model_type": "qwen3_5_moe"})", hf);
  EXPECT_EQ(legacy.algo(), "NVFP4");
  EXPECT_EQ(legacy.kv_cache(), KvCacheQuant::kNone);
}

TEST(QuantConfigTest, UniformModelOptLlamaFp4) {
  // nvidia/Llama-3.3-70B-Instruct-FP4 hf_quant_config.json, verbatim (docs/quant-formats.md §2.1).
  const std::string hf = R"({"producer": {"name": "modelopt", "version": "0.23.0"},
      "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                       "exclude_modules": ["lm_head"]}})";
  const QuantConfig q = QuantConfig::parse("{}", hf);
  EXPECT_EQ(q.method(), QuantMethod::kModelOpt);
  EXPECT_EQ(q.kv_cache(), KvCacheQuant::kFP8);
  EXPECT_EQ(q.format_for("model.layers.0.self_attn.q_proj"), WeightFormat::nvfp4(16, true));
  EXPECT_TRUE(q.format_for("model.layers.0.mlp.down_proj").activations_quantized);
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
  EXPECT_EQ(q.default_format().name(), "nvfp4_w4a4_g16");
}

TEST(QuantConfigTest, ModelOptExcludeWildcards) {
  const QuantConfig q = QuantConfig::parse(with_section({{"quant_method", "modelopt"},
                                                         {"quant_algo", "fp8"},
                                                         {"ignore", {"lm_head", "model.layers.*.mlp.gate", "mtp*"}}}));
  EXPECT_EQ(q.algo(), "FP8");  // upper-cased
  EXPECT_EQ(q.format_for("model.layers.7.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for("model.layers.7.mlp.gate_proj"), kFp8);  // the wildcard ends at ".gate"
  EXPECT_EQ(q.format_for("model.layers.7.mlp.experts.3.gate_proj"), kFp8);
  EXPECT_EQ(q.format_for("mtp.fc"), kBf16);
  EXPECT_EQ(q.format_for("mtp"), kBf16);
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
  EXPECT_EQ(q.format_for("model.visual.merger.linear_fc1"), kBf16);  // vision never quantized
}

TEST(QuantConfigTest, MixedPrecisionPerExpertKeys) {
  nlohmann::ordered_json ql = {
      {P + "0.mlp.experts.0.gate_proj", {{"quant_algo", "NVFP4"}, {"group_size", 16}}},
      {P + "0.mlp.experts.1.gate_proj", {{"quant_algo", "NVFP4"}, {"group_size", 16}}},
      {P + "1.mlp.experts.0.gate_proj", {{"quant_algo", "NVFP4"}, {"group_size", 16}}},
      {P + "1.mlp.experts.1.gate_proj", {{"quant_algo", "FP8"}}}};
  const QuantConfig q = QuantConfig::parse(
      with_section({{"quant_method", "modelopt"}, {"quant_algo", "MIXED_PRECISION"}, {"quantized_layers", ql}}));
  EXPECT_EQ(q.format_for(P + "0.mlp.experts"), WeightFormat::nvfp4(16, true));
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.1.gate_proj"), WeightFormat::nvfp4(16, true));
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.2.gate_proj"), kBf16);  // not listed
  try {
    q.format_for(P + "1.mlp.experts");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("use different formats"));
  }
}

TEST(QuantConfigTest, Fp8BlockRelease) {
  const QuantConfig q = QuantConfig::load(kConfigs / "qwen3_6_35b_a3b_fp8");
  const WeightFormat block = WeightFormat::fp8_block(128, 128);
  EXPECT_EQ(q.method(), QuantMethod::kFp8);
  EXPECT_EQ(q.algo(), "FP8_BLOCK");
  EXPECT_EQ(q.kv_cache(), KvCacheQuant::kNone);
  EXPECT_EQ(q.default_format().name(), "fp8_block_128x128");
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), block);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_qkv"), block);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.out_proj"), block);
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.12.up_proj"), block);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert.gate_proj"), block);
  EXPECT_EQ(q.format_for(P + "0.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert_gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_a"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_b"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.conv1d"), kBf16);
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
  EXPECT_EQ(q.format_for("model.visual.blocks.3.mlp.linear_fc1"), kBf16);
  EXPECT_EQ(q.format_for("mtp.fc"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.mlp.experts.0.gate_proj"), block);
}

TEST(QuantConfigTest, Fp8ModulesToNotConvertMatchWholeComponents) {
  const QuantConfig q = QuantConfig::parse(with_section(
      {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"modules_to_not_convert", {"mlp.gate"}}}));
  EXPECT_EQ(q.format_for(P + "4.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "4.mlp.gate_up_proj"), WeightFormat::fp8_block(128, 128));
}

TEST(QuantConfigTest, RouterAndSharedExpertGateAreAlwaysDense) {
  // A uniform config that excludes nothing still leaves them bf16 (vLLM builds them unquantized).
  const QuantConfig q = QuantConfig::parse(with_section({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}));
  EXPECT_EQ(q.format_for(P + "0.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert_gate"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.mlp.gate"), kBf16);
  EXPECT_TRUE(q.format_for(P + "0.mlp.shared_expert.gate_proj").is_quantized());
  EXPECT_TRUE(q.format_for(P + "0.mlp.experts.0.gate_proj").is_quantized());
}

TEST(QuantConfigTest, Fp8WithoutBlockIsPerTensor) {
  const QuantConfig q = QuantConfig::parse(with_section({{"quant_method", "fp8"}, {"activation_scheme", "static"}}));
  EXPECT_EQ(q.algo(), "FP8");
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), WeightFormat::fp8_per_tensor(true));
}

TEST(QuantConfigTest, AutoRoundRelease) {
  const QuantConfig q = QuantConfig::load(kConfigs / "qwen3_6_35b_a3b_autoround");
  const WeightFormat int4 = WeightFormat::int4_gptq(128, true, false, Int4ZeroConvention::kV1MinusOne);
  EXPECT_EQ(q.method(), QuantMethod::kAutoRound);
  EXPECT_EQ(q.default_format().name(), "int4_gptq_g128_sym");
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.3.gate_proj"), int4);
  EXPECT_EQ(q.format_for(P + "0.mlp.experts"), int4);
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), int4);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_qkv"), int4);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_a"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_b"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.conv1d"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert.down_proj"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert_gate"), kBf16);
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.mlp.experts.0.gate_proj"), kBf16);  // outside block_name_to_quantize
  EXPECT_EQ(q.format_for("mtp.fc"), kBf16);
  EXPECT_EQ(q.format_for("model.visual.blocks.0.attn.qkv"), kBf16);
}

TEST(QuantConfigTest, AutoRoundOverrides) {
  nlohmann::ordered_json extra = {
      {"model\\.language_model\\.layers\\.[0-9]+\\.self_attn\\..*", {{"bits", 16}, {"data_type", "float"}}},
      {P + "1.mlp.experts.0.gate_proj", {{"group_size", 32}}},
      {P + "1.mlp.experts.1.gate_proj", {{"group_size", 32}}},
      {P + "2.mlp.experts.0.gate_proj", {{"group_size", 32}}},
      {P + "2.mlp.experts.1.gate_proj", {{"group_size", 64}}},
      {"lm_head", {{"bits", 4}}}};
  const QuantConfig q = QuantConfig::parse(with_section({{"quant_method", "auto-round"},
                                                         {"bits", 4},
                                                         {"group_size", 128},
                                                         {"sym", false},
                                                         {"extra_config", extra}}));
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), kBf16);  // regex key
  EXPECT_EQ(fmt(q, P + "1.mlp.experts"), "int4_gptq_g32_asym_zv1");
  EXPECT_EQ(fmt(q, P + "0.mlp.experts.0.up_proj"), "int4_gptq_g128_asym_zv1");
  EXPECT_EQ(fmt(q, "lm_head"), "int4_gptq_g128_asym_zv1");
  EXPECT_THROW(q.format_for(P + "2.mlp.experts"), CheckpointError);
}

TEST(QuantConfigTest, GptqRelease) {
  const QuantConfig q = QuantConfig::load(kConfigs / "qwen3_6_35b_a3b_gptq");
  const WeightFormat int4 = WeightFormat::int4_gptq(128, true, false, Int4ZeroConvention::kV1MinusOne);
  EXPECT_EQ(q.method(), QuantMethod::kGptq);
  EXPECT_EQ(q.format_for(P + "0.mlp.experts.0.down_proj"), int4);
  EXPECT_EQ(q.format_for(P + "39.mlp.experts"), int4);
  EXPECT_EQ(q.format_for(P + "3.self_attn.q_proj"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_qkv"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_a"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert.gate_proj"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.shared_expert_gate"), kBf16);
  EXPECT_EQ(q.format_for(P + "0.mlp.gate"), kBf16);
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
  EXPECT_EQ(q.format_for("mtp.layers.0.mlp.experts.0.up_proj"), kBf16);
  EXPECT_EQ(q.format_for("model.visual.blocks.0.attn.qkv"), kBf16);
  EXPECT_THAT(q.describe(), HasSubstr("dynamic rules (6)"));
}

TEST(QuantConfigTest, GptqDynamicFirstMatchWinsInFileOrder) {
  auto section = [](nlohmann::ordered_json dynamic) {
    return with_section({{"quant_method", "gptq"},
                         {"bits", 4},
                         {"group_size", 128},
                         {"desc_act", false},
                         {"sym", true},
                         {"checkpoint_format", "gptq_v2"},
                         {"dynamic", dynamic}});
  };
  nlohmann::ordered_json neg_first;
  neg_first["-:.*experts.*"] = nlohmann::ordered_json::object();
  neg_first["+:.*experts\\.0\\..*"] = {{"group_size", 64}, {"desc_act", true}};
  nlohmann::ordered_json pos_first;
  pos_first["+:.*experts\\.0\\..*"] = {{"group_size", 64}, {"desc_act", true}};
  pos_first["-:.*experts.*"] = nlohmann::ordered_json::object();

  const QuantConfig a = QuantConfig::parse(section(neg_first));
  EXPECT_EQ(a.format_for(P + "0.mlp.experts.0.up_proj"), kBf16);
  const QuantConfig b = QuantConfig::parse(section(pos_first));
  EXPECT_EQ(fmt(b, P + "0.mlp.experts.0.up_proj"), "int4_gptq_g64_sym_actorder");
  EXPECT_EQ(b.format_for(P + "0.mlp.experts.1.up_proj"), kBf16);
  EXPECT_EQ(b.format_for(P + "3.self_attn.q_proj").zero_convention, Int4ZeroConvention::kV2);
}

TEST(QuantConfigTest, GptqLmHeadAndModulesInBlock) {
  const QuantConfig q = QuantConfig::parse(with_section({{"quant_method", "gptq"},
                                                         {"bits", 4},
                                                         {"group_size", -1},
                                                         {"sym", false},
                                                         {"lm_head", true},
                                                         {"modules_in_block_to_quantize", {{"self_attn.q_proj"}}}}));
  EXPECT_EQ(fmt(q, P + "3.self_attn.q_proj"), "int4_gptq_per_channel_asym_zv1");
  EXPECT_EQ(q.format_for(P + "3.self_attn.k_proj"), kBf16);
  EXPECT_TRUE(q.format_for("lm_head").is_quantized());
}

TEST(QuantConfigTest, StandaloneQuantizationConfigJsonFallback) {
  // AutoRound writes quantization_config.json beside config.json; used when config.json has no
  // section (the shape below is a real auto-round 0.12.3 export of a Qwen3.5 model, abridged).
  const auto dir = std::filesystem::temp_directory_path() / ("fp4serve_cfg_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen3_5_moe"})";
  std::ofstream(dir / "quantization_config.json") << R"({
      "bits": 4, "data_type": "int", "group_size": 128, "sym": true, "iters": 0,
      "autoround_version": "0.12.3", "block_name_to_quantize": "model.language_model.layers",
      "quant_method": "auto-round", "packing_format": "auto_round:auto_gptq",
      "extra_config": {"model.language_model.layers.0.linear_attn.in_proj_b": {"bits": 16, "data_type": "fp"},
                       "model.language_model.layers.0.linear_attn.in_proj_a": {"bits": 16, "data_type": "fp"}}})";
  const QuantConfig q = QuantConfig::load(dir);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(q.method(), QuantMethod::kAutoRound);
  EXPECT_THAT(q.source(), HasSubstr("quantization_config.json"));
  EXPECT_EQ(q.format_for(P + "0.linear_attn.in_proj_a"), kBf16);
  EXPECT_EQ(fmt(q, P + "0.linear_attn.in_proj_qkv"), "int4_gptq_g128_sym");
  EXPECT_EQ(q.format_for("lm_head"), kBf16);
}

TEST(QuantConfigTest, UnquantizedCheckpoint) {
  const QuantConfig q = QuantConfig::load(kConfigs / "qwen3_6_35b_a3b");
  EXPECT_EQ(q.method(), QuantMethod::kNone);
  EXPECT_FALSE(q.is_quantized());
  EXPECT_EQ(q.format_for(P + "0.mlp.experts"), kBf16);
  EXPECT_EQ(q.kv_cache(), KvCacheQuant::kNone);
  EXPECT_THAT(q.describe(), HasSubstr("none"));
}

TEST(QuantConfigTest, QuantizedFixturesAreStillValidModelConfigs) {
  for (const char* dir : {"qwen3_6_35b_a3b_nvfp4", "qwen3_6_35b_a3b_fp8", "qwen3_6_35b_a3b_autoround",
                          "qwen3_6_35b_a3b_gptq"}) {
    EXPECT_EQ(ModelConfig::load(kConfigs / dir).num_hidden_layers, 40) << dir;
  }
}

TEST(QuantConfigTest, UnknownQuantMethodRefused) {
  EXPECT_EQ(quant_error(with_section({{"quant_method", "awq"}, {"bits", 4}})),
            "config.json: quantization_config.quant_method: unknown quantization method 'awq' "
            "(supported: modelopt, fp8, auto-round, gptq)");
  EXPECT_THAT(quant_error(with_section({{"quant_method", "compressed-tensors"}})), HasSubstr("'compressed-tensors'"));
  EXPECT_EQ(quant_error(with_section({{"bits", 4}})), "config.json: quantization_config: quant_method: missing");
}

TEST(QuantConfigTest, MalformedJsonNamesTheFile) {
  EXPECT_THAT(quant_error("{\"quantization_config\": {"), HasSubstr("config.json: invalid JSON"));
  EXPECT_THAT(quant_error("{}", std::string("{\"quantization\": ")), HasSubstr("hf_quant_config.json: invalid JSON"));
  EXPECT_EQ(quant_error("{}", std::string("{\"producer\": {}}")), "hf_quant_config.json: quantization: missing");
}

TEST(QuantConfigTest, MissingAndWrongTypedFieldsRefused) {
  EXPECT_EQ(quant_error(with_section({{"quant_method", "modelopt"}})),
            "config.json: quantization_config.quant_algo: missing");
  EXPECT_EQ(quant_error(with_section({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", "lm_head"}})),
            "config.json: quantization_config.ignore: expected an array, got string");
  EXPECT_EQ(quant_error(with_section({{"quant_method", "gptq"}, {"bits", "4"}, {"group_size", 128}})),
            "config.json: quantization_config.bits: expected an integer, got string");
  EXPECT_EQ(quant_error(with_section({{"quant_method", "auto-round"}, {"bits", 4}})),
            "config.json: quantization_config.group_size: missing");
  EXPECT_EQ(quant_error(with_section({{"quant_method", "modelopt"},
                                      {"quant_algo", "MIXED_PRECISION"},
                                      {"quantized_layers", {{"lm_head", {{"group_size", 16}}}}}})),
            "config.json: quantization_config.quantized_layers.lm_head.quant_algo: missing");
}

TEST(QuantConfigTest, UnsupportedChoicesRefused) {
  EXPECT_THAT(quant_error(with_section({{"quant_method", "modelopt"},
                                        {"quant_algo", "MIXED_PRECISION"},
                                        {"quantized_layers", {{"lm_head", {{"quant_algo", "W4A8_AWQ"}}}}}})),
              HasSubstr("quantized_layers.lm_head.quant_algo: ModelOpt quant_algo 'W4A8_AWQ' is not supported"));
  EXPECT_THAT(quant_error("{}", std::string(R"({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "NVFP4"}})")),
              HasSubstr("hf_quant_config.json: quantization.kv_cache_quant_algo: KV cache quantization 'NVFP4'"));
  EXPECT_THAT(quant_error(with_section({{"quant_method", "fp8"}, {"fmt", "e5m2"}})),
              HasSubstr("quantization_config.fmt: FP8 format 'e5m2' is not supported"));
  EXPECT_THAT(quant_error(with_section(
                  {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"weight_block_size", {128, 128}}})),
              HasSubstr("static activation scales with block FP8"));
  EXPECT_THAT(quant_error(with_section({{"quant_method", "auto-round"},
                                        {"bits", 4},
                                        {"group_size", 128},
                                        {"packing_format", "auto_round:auto_awq"}})),
              HasSubstr("packing format 'auto_round:auto_awq' is not supported"));
  EXPECT_THAT(quant_error(with_section({{"quant_method", "gptq"}, {"bits", 8}, {"group_size", 128}})),
              HasSubstr("quantization_config.bits: 8-bit GPTQ weights are not supported"));
  EXPECT_THAT(quant_error(with_section({{"quant_method", "gptq"},
                                        {"bits", 4},
                                        {"group_size", 128},
                                        {"dynamic", {{"-:model.(layers", nlohmann::ordered_json::object()}}}})),
              HasSubstr("invalid regular expression 'model.(layers'"));
  EXPECT_THAT(quant_error(with_section({{"quant_method", "auto-round"},
                                        {"bits", 4},
                                        {"group_size", 128},
                                        {"extra_config", {{"lm_head", {{"bits", 8}}}}}})),
              HasSubstr("quantization_config.extra_config.lm_head.bits: 8-bit weights are not supported"));
}

TEST(QuantConfigPatternTest, FnmatchLikePython) {
  EXPECT_TRUE(fnmatch_case("model.visual.blocks.0", "model.visual*"));
  EXPECT_TRUE(fnmatch_case("model.visual", "model.visual*"));
  EXPECT_TRUE(fnmatch_case("model.layers.12.mlp.gate", "*mlp.gate"));
  EXPECT_FALSE(fnmatch_case("model.layers.12.mlp.gate_proj", "*mlp.gate"));
  EXPECT_TRUE(fnmatch_case("model.layers.3.x", "model.layers.?.x"));
  EXPECT_FALSE(fnmatch_case("model.layers.13.x", "model.layers.?.x"));
  EXPECT_TRUE(fnmatch_case("layers.5", "layers.[0-7]"));
  EXPECT_FALSE(fnmatch_case("layers.9", "layers.[0-7]"));
  EXPECT_TRUE(fnmatch_case("layers.9", "layers.[!0-7]"));
  EXPECT_TRUE(fnmatch_case("a[b", "a[b"));  // unterminated class is a literal
  EXPECT_TRUE(fnmatch_case("lm_head", "lm_head"));
  EXPECT_FALSE(fnmatch_case("lm_head.x", "lm_head"));
}

TEST(QuantConfigPatternTest, ComponentsAndSpellings) {
  EXPECT_TRUE(contains_components("model.layers.0.mlp.gate", "mlp.gate"));
  EXPECT_FALSE(contains_components("model.layers.0.mlp.gate_up_proj", "mlp.gate"));
  EXPECT_FALSE(contains_components("model.layers.0.xmlp.gate", "mlp.gate"));
  EXPECT_TRUE(contains_components("lm_head", "lm_head"));
  EXPECT_TRUE(is_within("a.b.c", "a.b"));
  EXPECT_FALSE(is_within("a.bc", "a.b"));
  auto s = module_path_spellings("model.language_model.layers.1.mlp");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], "language_model.model.layers.1.mlp");
}

TEST(QuantConfigPatternTest, WeightFormatNames) {
  EXPECT_EQ(WeightFormat::bf16().name(), "bf16");
  EXPECT_EQ(WeightFormat::fp8_per_tensor(true).name(), "fp8");
  EXPECT_EQ(WeightFormat::fp8_per_tensor(false).name(), "fp8_dynamic");
  EXPECT_EQ(WeightFormat::fp8_block(128, 128).name(), "fp8_block_128x128");
  EXPECT_EQ(WeightFormat::nvfp4(16, true).name(), "nvfp4_w4a4_g16");
  EXPECT_EQ(WeightFormat::nvfp4(16, false).name(), "nvfp4_w4a16_g16");
  EXPECT_EQ(WeightFormat::int4_gptq(128, true, false, Int4ZeroConvention::kV1MinusOne).name(), "int4_gptq_g128_sym");
  EXPECT_FALSE(WeightFormat::bf16().is_quantized());
  EXPECT_NE(WeightFormat::nvfp4(16, true), WeightFormat::nvfp4(16, false));
}

}  // namespace
}  // namespace fp4serve
