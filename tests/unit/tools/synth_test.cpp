// `fp4serve synth` on a tiny model in every format: the files open, every planned tensor is there
// with its dtype and shape, the configs parse and the quantization config agrees with what was
// written, the values are what the seed says, and the bytes do not depend on the thread count.
#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "model/vision_loader.h"
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/model_config.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/weight_loader.h"
#include "tensor/float_formats.h"
#include "tensor/fp8_block.h"
#include "tensor/int4_gptq.h"
#include "tensor/nvfp4.h"
#include "tools/synth_writer.h"

namespace fp4serve::synth {
namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("fp4serve-synth-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

SynthOptions tiny_options(SynthFormat format, const std::filesystem::path& dir, int64_t layers = 4, uint64_t seed = 5) {
  SynthOptions o;
  o.dims = SynthDims::tiny();
  o.dims.num_hidden_layers = layers;
  o.format = format;
  o.seed = seed;
  o.out_dir = dir;
  o.progress = ByteProgress::Mode::kOff;
  return o;
}

const std::vector<SynthFormat> kFormats = {SynthFormat::kBF16, SynthFormat::kFP8, SynthFormat::kNVFP4,
                                           SynthFormat::kInt4};

std::string label(SynthFormat f) { return std::string(synth_format_name(f)); }

TEST(SynthLayerTypes, KeepTheThreeToOnePatternAtAnyDepth) {
  EXPECT_EQ(layer_types(1), std::vector<std::string>{"linear_attention"});
  EXPECT_EQ(layer_types(2), (std::vector<std::string>{"linear_attention", "linear_attention"}));
  const auto five = layer_types(5);
  EXPECT_EQ(five[3], "full_attention");
  EXPECT_EQ(five[4], "linear_attention");
  const auto eight = layer_types(8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(eight[i], (i == 3 || i == 7) ? "full_attention" : "linear_attention") << i;
  const auto forty = layer_types(40);
  EXPECT_EQ(std::count(forty.begin(), forty.end(), "full_attention"), 10);
}

TEST(SynthConfig, ParsesBackAsTheRealModelAtEveryDepth) {
  for (int64_t n : {4, 5, 8, 40}) {
    SynthDims d = SynthDims::qwen36_35b_a3b();
    d.num_hidden_layers = n;
    const ModelConfig c = ModelConfig::parse(hf_json_text(config_json(d)));
    EXPECT_EQ(c.num_hidden_layers, n);
    ASSERT_EQ(static_cast<int64_t>(c.layer_types.size()), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(c.is_full_attention(i), (i + 1) % 4 == 0) << n << " " << i;
    EXPECT_EQ(c.architecture, "Qwen3_5MoeForConditionalGeneration");
    EXPECT_EQ(c.tensor_prefix, "model.language_model.");
    EXPECT_EQ(c.hidden_size, 2048);
    EXPECT_EQ(c.vocab_size, 248320);
    EXPECT_EQ(c.num_experts, 256);
    EXPECT_EQ(c.num_experts_per_tok, 8);
    EXPECT_EQ(c.head_dim, 256);
    EXPECT_EQ(c.rotary_dim(), 64);
    EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{11, 11, 10}));
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
    EXPECT_EQ(c.linear_conv_dim(), 8192);
    EXPECT_TRUE(c.has_vision_config);
    EXPECT_EQ(c.bos_token_id, 248044);
    EXPECT_EQ(c.image_token_id, 248056);
    EXPECT_EQ(c.video_token_id, 248057);
  }
}

// --layers 1..3 gives a model of linear-attention layers only (the 3:1 pattern cut short), which
// ModelConfig must accept for synth to write it.
TEST(SynthConfig, ShallowModelsWithoutFullAttentionLayersParse) {
  for (int64_t n : {1, 2, 3}) {
    SynthDims d = SynthDims::qwen36_35b_a3b();
    d.num_hidden_layers = n;
    const ModelConfig c = ModelConfig::parse(hf_json_text(config_json(d)));
    EXPECT_EQ(c.num_full_attention_layers(), 0) << n;
    EXPECT_EQ(c.num_linear_attention_layers(), n);
  }
}

TEST(SynthConfig, FullModelPlanHasTheSpecCounts) {
  // The BF16 release's safetensors (docs/model-arch.md §4): 3 global (embed, norm, lm_head) + 30 GDN
  // layers x 18 (2 norms, 4 in_proj, conv1d, dt_bias, A_log, norm, out_proj, router, fused
  // gate_up/down, 3 shared-expert projections, shared_expert_gate) + 10 attention layers x 15
  // (2 norms, q/k/v/o, q_norm, k_norm + the same 7 MoE tensors) = 693. (The 733 often quoted counts GGUF
  // tensors, where gate and up are split: docs/model-arch.md §4.1.)
  SynthOptions o = tiny_options(SynthFormat::kBF16, "/nonexistent");
  o.dims = SynthDims::qwen36_35b_a3b();
  const SynthPlan sp = plan_synth(o);
  EXPECT_EQ(sp.plan.all_tensors().size(), 693u);
}

TEST(SynthFormats, QuantConfigWrittenAgreesWithTheResolverOnEveryModule) {
  for (SynthFormat f : kFormats) {
    SCOPED_TRACE(label(f));
    const SynthPlan sp = plan_synth(tiny_options(f, "/nonexistent", 4));
    std::optional<std::string> hf_quant;
    for (const auto& [name, text] : sp.extra_files) {
      if (name == "hf_quant_config.json") hf_quant = text;
    }
    const QuantConfig qc = QuantConfig::parse(sp.config_text, hf_quant ? std::optional<std::string_view>(*hf_quant)
                                                                        : std::nullopt);
    EXPECT_EQ(qc.is_quantized(), f != SynthFormat::kBF16);
    if (f == SynthFormat::kNVFP4) EXPECT_EQ(qc.kv_cache(), KvCacheQuant::kFP8);
    int checked = 0;
    for (const auto& m : sp.plan.modules) {
      std::vector<std::string> paths;
      if (m.kind == ModuleKind::kLinear) paths.push_back(m.path);
      if (m.kind == ModuleKind::kRoutedExperts) {
        for (int64_t e = 0; e < m.num_experts; ++e) {
          for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
            paths.push_back(m.path + "." + std::to_string(e) + "." + proj);
          }
        }
      }
      for (const auto& p : paths) {
        EXPECT_EQ(qc.format_for(p).name(), release_format(f, p).name()) << p;
        ++checked;
      }
    }
    EXPECT_GT(checked, 100);
  }
}

TEST(SynthFormats, ModulesHaveTheReleaseFormats) {
  const std::string L = "model.language_model.layers.3.";
  const std::string G = "model.language_model.layers.0.";
  // NVFP4: ModelOpt recipe w4a16_nvfp4-fp8_attn-kv_fp8_cast.
  EXPECT_EQ(release_format(SynthFormat::kNVFP4, G + "mlp.experts.5.down_proj").name(), "nvfp4_w4a16_g16");
  EXPECT_EQ(release_format(SynthFormat::kNVFP4, G + "mlp.shared_expert.up_proj").name(), "nvfp4_w4a16_g16");
  EXPECT_EQ(release_format(SynthFormat::kNVFP4, "lm_head").name(), "nvfp4_w4a16_g16");
  EXPECT_EQ(release_format(SynthFormat::kNVFP4, L + "self_attn.k_proj").kind, WeightFormatKind::kFP8PerTensor);
  EXPECT_EQ(release_format(SynthFormat::kNVFP4, G + "linear_attn.out_proj").kind, WeightFormatKind::kFP8PerTensor);
  for (const char* bf16 : {"linear_attn.in_proj_a", "linear_attn.in_proj_b", "mlp.gate", "mlp.shared_expert_gate"}) {
    EXPECT_FALSE(release_format(SynthFormat::kNVFP4, G + bf16).is_quantized()) << bf16;
    EXPECT_FALSE(release_format(SynthFormat::kFP8, G + bf16).is_quantized()) << bf16;
  }
  // FP8: Qwen block FP8; lm_head stays bf16.
  EXPECT_EQ(release_format(SynthFormat::kFP8, L + "self_attn.o_proj").name(), "fp8_block_128x128");
  EXPECT_EQ(release_format(SynthFormat::kFP8, G + "mlp.experts.0.gate_proj").name(), "fp8_block_128x128");
  EXPECT_FALSE(release_format(SynthFormat::kFP8, "lm_head").is_quantized());
  // INT4: everything in the decoder layers but the routers.
  EXPECT_EQ(release_format(SynthFormat::kInt4, G + "linear_attn.in_proj_qkv").name(), "int4_gptq_g128_sym");
  EXPECT_FALSE(release_format(SynthFormat::kInt4, G + "mlp.gate").is_quantized());
  EXPECT_FALSE(release_format(SynthFormat::kInt4, G + "mlp.shared_expert_gate").is_quantized());
  EXPECT_FALSE(release_format(SynthFormat::kInt4, "lm_head").is_quantized());
}

// Writes a tiny model of each format and checks the files against the plan and the loader.
class SynthWrite : public ::testing::TestWithParam<SynthFormat> {};

TEST_P(SynthWrite, CheckpointHoldsEveryPlannedTensorAndLoads) {
  TempDir dir;
  const SynthOptions o = tiny_options(GetParam(), dir.path());
  const SynthResult r = synthesize(o);
  EXPECT_TRUE(r.config_disagreements.empty()) << r.config_disagreements.front();
  const SynthPlan sp = plan_synth(o);
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir.path());
  size_t expected = 0;
  std::vector<const PlannedTensor*> planned = sp.plan.all_tensors();
  for (const PlannedTensor* t : sp.mtp_plan.all_tensors()) planned.push_back(t);  // the MTP block, BF16
  ASSERT_FALSE(sp.mtp_plan.modules.empty());
  for (const PlannedTensor* t : sp.vision_plan.all_tensors()) planned.push_back(t);  // the vision tower, BF16
  EXPECT_EQ(sp.vision_plan.modules.size(), 21u);  // patch embed 2 + pos 1 + 12 per block + merger 6
  for (const PlannedTensor* t : planned) {
    if (t->optional && !t->name.ends_with("input_scale")) {
      EXPECT_FALSE(ck.contains(t->name)) << t->name;
      continue;
    }
    ++expected;
    const auto e = ck.find(t->name);
    ASSERT_NE(e.info, nullptr) << "missing " << t->name;
    EXPECT_EQ(e.info->shape, t->shape) << t->name;
    const bool dtype_ok = e.info->dtype == t->dtype ||
                          std::find(t->also_accepted.begin(), t->also_accepted.end(), e.info->dtype) !=
                              t->also_accepted.end();
    EXPECT_TRUE(dtype_ok) << t->name << " " << dtype_name(e.info->dtype);
  }
  EXPECT_EQ(ck.tensor_count(), expected);
  EXPECT_EQ(r.tensor_count, expected);
  EXPECT_TRUE(check_against_plan(ck, sp.plan).empty());
  const LoadedCheckpoint loaded = LoadedCheckpoint::open(dir.path().string());
  EXPECT_EQ(loaded.config().num_hidden_layers, 4);
  EXPECT_EQ(loaded.expert_storage(), expert_storage_for(GetParam()));
  EXPECT_TRUE(loaded.has_mtp()) << loaded.mtp_unavailable_reason();
  EXPECT_EQ(loaded.mtp_tensors_on_disk(), 19u);  // the releases' count (fused experts)
  EXPECT_EQ(loaded.mtp_expert_storage(), ExpertStorage::kFused);
  for (const auto& m : loaded.mtp_plan().modules) EXPECT_FALSE(m.format.is_quantized()) << m.path;
  EXPECT_EQ(loaded.generation_config().eos_token_ids, (std::vector<int64_t>{492, 490}));  // tiny ids
  EXPECT_EQ(loaded.plan().modules.size(), sp.plan.modules.size());  // the loader plans what was written
  // The tower loads and encodes (every format keeps it BF16).
  const auto tower = model::load_vision_tower(dir.path(), kernels::default_backend());
  ASSERT_NE(tower, nullptr);
  vision::PixelPatches im;
  im.grid = {1, 4, 6};
  im.patch_dim = 1536;
  im.values.assign(24 * 1536, 0.5f);
  const auto features = tower->encode(im);
  ASSERT_EQ(features.size(), 6u * 128);  // 6 merged tokens x the text hidden size
  for (float f : features) ASSERT_TRUE(std::isfinite(f));
}

TEST_P(SynthWrite, SameSeedSameBytesWhateverTheThreadCount) {
  TempDir a, b, c;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  synthesize(tiny_options(GetParam(), a.path(), 4, 9));
  omp_set_num_threads(std::max(2, threads));
  SynthOptions sharded = tiny_options(GetParam(), b.path(), 4, 9);
  synthesize(sharded);
  synthesize(tiny_options(GetParam(), c.path(), 4, 10));
  omp_set_num_threads(threads);
  for (const auto& entry : std::filesystem::directory_iterator(a.path())) {
    const auto name = entry.path().filename();
    EXPECT_EQ(read_file(entry.path()), read_file(b.path() / name)) << name;
  }
  EXPECT_NE(read_file(a.path() / "model.safetensors"), read_file(c.path() / "model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(AllFormats, SynthWrite, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return label(info.param); });

TEST(SynthWrite, ShardsLikeHuggingFaceAndStillLoads) {
  TempDir dir;
  SynthOptions o = tiny_options(SynthFormat::kNVFP4, dir.path());
  o.max_shard_bytes = 200'000;
  const SynthResult r = synthesize(o);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "model.safetensors"));
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), ShardedCheckpoint::Layout::kIndexed);
  EXPECT_GT(ck.files().size(), 2u);
  EXPECT_EQ(ck.tensor_count(), r.tensor_count);
  EXPECT_EQ(ck.index_total_size(), r.tensor_bytes);
}

// The values: regenerate the weights from the seed and compare with what the files hold.
class SynthValues : public ::testing::Test {
 protected:
  static const std::filesystem::path& dir(SynthFormat f) {
    static std::map<SynthFormat, std::unique_ptr<TempDir>> dirs;
    auto& d = dirs[f];
    if (!d) {
      d = std::make_unique<TempDir>();
      synthesize(tiny_options(f, d->path(), 4, 3));
    }
    return d->path();
  }
  template <class T>
  static std::vector<T> tensor(const ShardedCheckpoint& ck, const std::string& name) {
    const auto bytes = ck.bytes(name);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  static float scalar(const ShardedCheckpoint& ck, const std::string& name) { return tensor<float>(ck, name).at(0); }
};

const std::string kL0 = "model.language_model.layers.0.";
const std::string kL3 = "model.language_model.layers.3.";

TEST_F(SynthValues, Nvfp4ExpertsAreTheReferenceQuantizationOfTheSeededWeights) {
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir(SynthFormat::kNVFP4));
  const SynthDims d = SynthDims::tiny();
  const int64_t H = d.hidden_size, I = d.moe_intermediate_size;
  // down_proj has its own global scale: the bytes are exactly nvfp4_quantize's.
  const std::string down = kL0 + "mlp.experts.5.down_proj";
  const auto w = synth_weight_rows(3, down, I, 0, H);
  const Nvfp4Weight ref = nvfp4_quantize(w.data(), H, I);
  EXPECT_EQ(tensor<uint8_t>(ck, down + ".weight"), ref.packed);
  EXPECT_EQ(tensor<uint8_t>(ck, down + ".weight_scale"), ref.block_scales);
  EXPECT_EQ(scalar(ck, down + ".weight_scale_2"), ref.global_scale);
  // gate and up share one weight_scale_2 (max of both amaxes); both dequantize close to the weights.
  const std::string gate = kL0 + "mlp.experts.2.gate_proj", up = kL0 + "mlp.experts.2.up_proj";
  EXPECT_EQ(scalar(ck, gate + ".weight_scale_2"), scalar(ck, up + ".weight_scale_2"));
  for (const std::string& p : {gate, up}) {
    const auto wp = synth_weight_rows(3, p, H, 0, I);
    std::vector<float> deq(wp.size());
    nvfp4_dequantize(tensor<uint8_t>(ck, p + ".weight").data(), tensor<uint8_t>(ck, p + ".weight_scale").data(),
                     scalar(ck, p + ".weight_scale_2"), I, H, deq.data());
    double err = 0, norm = 0;
    for (size_t i = 0; i < wp.size(); ++i) {
      err += (deq[i] - wp[i]) * (deq[i] - wp[i]);
      norm += wp[i] * wp[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 0.15) << p;  // e2m1 with per-16 scales: ~10 % RMS error
    EXPECT_GT(norm / static_cast<double>(wp.size()), 0.018 * 0.018);  // weights ~N(0, 0.02)
    EXPECT_LT(norm / static_cast<double>(wp.size()), 0.022 * 0.022);
  }
  // Input scales: one per projection type, shared by all experts, plausible.
  const float in0 = scalar(ck, kL0 + "mlp.experts.0.gate_proj.input_scale");
  EXPECT_EQ(in0, scalar(ck, kL0 + "mlp.experts.7.gate_proj.input_scale"));
  EXPECT_GT(in0, 0.01f / 6);
  EXPECT_LT(in0, 0.1f / 6);
}

TEST_F(SynthValues, Nvfp4AttentionIsFp8PerTensor) {
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir(SynthFormat::kNVFP4));
  const SynthDims d = SynthDims::tiny();
  const std::string q = kL3 + "self_attn.q_proj";
  const int64_t rows = d.num_attention_heads * d.head_dim * 2, cols = d.hidden_size;
  const auto w = synth_weight_rows(3, q, cols, 0, rows);
  float amax = 0;
  for (float x : w) amax = std::max(amax, std::fabs(x));
  const float scale = scalar(ck, q + ".weight_scale");
  EXPECT_EQ(scale, amax / 448.0f);
  const auto data = tensor<uint8_t>(ck, q + ".weight");
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(data[i], f32_to_e4m3(w[i] / scale)) << i;
  const float in = scalar(ck, q + ".input_scale");
  EXPECT_GE(in, 0.01f);
  EXPECT_LE(in, 0.1f);
}

TEST_F(SynthValues, Fp8BlockScalesAreBf16AndDequantizeClose) {
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir(SynthFormat::kFP8));
  const SynthDims d = SynthDims::tiny();
  const std::string p = kL0 + "linear_attn.in_proj_qkv";
  const int64_t rows = 2 * d.linear_num_key_heads * d.linear_key_head_dim +
                       d.linear_num_value_heads * d.linear_value_head_dim,
                cols = d.hidden_size;
  EXPECT_EQ(ck.at(p + ".weight_scale_inv").info->dtype, DType::kBF16);
  const auto w = synth_weight_rows(3, p, cols, 0, rows);
  const auto sc = tensor<uint16_t>(ck, p + ".weight_scale_inv");
  std::vector<float> scales;
  for (uint16_t s : sc) scales.push_back(bf16_to_f32(s));
  std::vector<float> deq(w.size());
  fp8_block_dequantize(tensor<uint8_t>(ck, p + ".weight").data(), scales.data(), rows, cols, deq.data());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(deq[i], w[i], std::fabs(w[i]) * 0.07 + 1e-4) << i;
}

TEST_F(SynthValues, Int4IsTheReferenceGptqPacking) {
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir(SynthFormat::kInt4));
  const SynthDims d = SynthDims::tiny();
  const std::string p = kL0 + "mlp.experts.1.up_proj";
  const int64_t rows = d.moe_intermediate_size, cols = d.hidden_size;
  const auto w = synth_weight_rows(3, p, cols, 0, rows);
  const Int4GptqWeight ref = int4_gptq_quantize(w.data(), rows, cols, 128);
  EXPECT_EQ(tensor<int32_t>(ck, p + ".qweight"), ref.qweight);
  EXPECT_EQ(tensor<uint16_t>(ck, p + ".scales"), ref.scales);
  EXPECT_EQ(tensor<int32_t>(ck, p + ".qzeros"), ref.qzeros);
  EXPECT_FALSE(ck.contains(p + ".g_idx"));
  EXPECT_FALSE(ck.contains(kL0 + "mlp.shared_expert_gate.qweight"));
  EXPECT_EQ(ck.at(kL0 + "mlp.shared_expert_gate.weight").info->dtype, DType::kBF16);
}

TEST_F(SynthValues, Bf16FusedExpertsHoldThePerExpertWeights) {
  const ShardedCheckpoint ck = ShardedCheckpoint::open(dir(SynthFormat::kBF16));
  const SynthDims d = SynthDims::tiny();
  const int64_t H = d.hidden_size, I = d.moe_intermediate_size;
  const auto gate_up = tensor<uint16_t>(ck, kL0 + "mlp.experts.gate_up_proj");  // [E, 2I, H]
  const int64_t e = 6;
  const auto up = synth_weight_rows(3, kL0 + "mlp.experts.6.up_proj", H, 0, I);
  for (int64_t r = 0; r < I; ++r) {
    for (int64_t c = 0; c < H; ++c) {
      ASSERT_EQ(gate_up[static_cast<size_t>((e * 2 * I + I + r) * H + c)], f32_to_bf16(up[static_cast<size_t>(r * H + c)]));
    }
  }
  // Real-looking small tensors: A_log = log(U(1, 16)) in F32, the gated norm's weight near 1.
  EXPECT_EQ(ck.at(kL0 + "linear_attn.A_log").info->dtype, DType::kF32);
  for (float a : tensor<float>(ck, kL0 + "linear_attn.A_log")) {
    EXPECT_GE(a, 0.0f);
    EXPECT_LE(a, std::log(16.0f));
  }
  for (float g : tensor<float>(ck, kL0 + "linear_attn.norm.weight")) EXPECT_NEAR(g, 1.0f, 0.15f);
  for (uint16_t n : tensor<uint16_t>(ck, kL0 + "input_layernorm.weight")) EXPECT_NEAR(bf16_to_f32(n), 0.0f, 0.15f);
}

}  // namespace
}  // namespace fp4serve::synth
