// `fp4serve bench model` (tools/bench/model_bench.h) and the active-bytes figure it shares with
// `fp4serve inspect`, on the tiny reference models. No timing is asserted: only that every figure is
// there, finite, and that the byte counts are the hand-counted ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "checkpoint/tensor_plan.h"
#include "kernels/cpu/cpu_features.h"
#include "tools/bench/roofline.h"
#include "checkpoint/weight_loader.h"
#include "cli_test_util.h"
#include "tools/bench/active_bytes.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using testing::run_fp4serve;

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";

// tiny-bf16 (config.json): hidden 256, vocab 512, layers L L L F, 8 experts top-2 of width 128,
// shared expert 128, GDN 4 k heads / 8 v heads of 32 (conv_dim 512, value_dim 256), attention
// 4 q heads (+ gate) / 2 kv heads of 64. Every linear bf16 (2 bytes); A_log and the GDN norm F32.
constexpr uint64_t kBf = 2;
constexpr uint64_t kNorms = 2 * 256 * kBf;  // input + post-attention layernorm
constexpr uint64_t kGdnLinears = (512 + 256 + 8 + 8) * 256 * kBf + 256 * 256 * kBf;  // qkv, z, b, a; out_proj
constexpr uint64_t kGdnDense = 512 * 4 * kBf + 8 * kBf + 8 * 4 + 32 * 4;             // conv1d, dt_bias, A_log, norm
constexpr uint64_t kAttn = (512 + 128 + 128) * 256 * kBf + 256 * 256 * kBf + 2 * 64 * kBf;  // q,k,v; o; q/k norm
constexpr uint64_t kOneExpert = 3 * 128 * 256 * kBf;
constexpr uint64_t kRoutedActive = 2 * kOneExpert;  // top-2 of 8
constexpr uint64_t kMoeShared = 8 * 256 * kBf + 3 * 128 * 256 * kBf + 256 * kBf;  // router, shared expert, its gate
constexpr uint64_t kEmbedRow = 256 * kBf;
constexpr uint64_t kLmHead = 512 * 256 * kBf;
constexpr uint64_t kFinalNorm = 256 * kBf;
constexpr uint64_t kHandCount = 3 * (kNorms + kGdnLinears + kGdnDense) + (kNorms + kAttn) +
                                4 * (kMoeShared + kRoutedActive) + kEmbedRow + kFinalNorm + kLmHead;

TEST(ActiveBytes, TinyBf16MatchesHandCount) {
  const LoadedCheckpoint ck = LoadedCheckpoint::open(kModels + "tiny-bf16");
  EXPECT_EQ(ck.plan().active_bytes_per_token(), kHandCount);
  const tools::bench::ActiveBytes a = tools::bench::active_bytes(ck.plan(), ck.config());
  EXPECT_EQ(a.per_token, kHandCount);
  EXPECT_EQ(a.routed_experts, 4 * kRoutedActive);
  EXPECT_EQ(a.one_expert_all_layers, 4 * kOneExpert);
  EXPECT_EQ(a.embedding_row, kEmbedRow);
  EXPECT_EQ(a.shared, kHandCount - 4 * kRoutedActive - kEmbedRow);
  EXPECT_EQ(a.num_experts, 8);
  EXPECT_EQ(a.top_k, 2);
}

TEST(ActiveBytes, TiedEmbeddingsReadTheWholeTableOnce) {
  // The same model with tie_word_embeddings: no lm_head tensor, and the lm_head matmul reads the
  // whole embedding table (512 x 256 bf16, the same size as the untied lm_head) every token.
  std::ifstream f(kModels + "tiny-bf16/config.json");
  nlohmann::json cfg = nlohmann::json::parse(f);
  cfg["tie_word_embeddings"] = true;
  if (cfg.contains("text_config")) cfg["text_config"]["tie_word_embeddings"] = true;
  const ModelConfig c = ModelConfig::parse(cfg.dump());
  ASSERT_TRUE(c.tie_word_embeddings);
  const TensorPlan plan = make_tensor_plan(c, [](std::string_view) { return WeightFormat::bf16(); },
                                           ExpertStorage::kPerExpert);
  EXPECT_EQ(plan.active_bytes_per_token(), kHandCount - kLmHead - kEmbedRow + 512 * 256 * kBf);
}

TEST(ActiveBytes, ExpectedStepBytesGrowsToEveryExpert) {
  const LoadedCheckpoint ck = LoadedCheckpoint::open(kModels + "tiny-bf16");
  const tools::bench::ActiveBytes a = tools::bench::active_bytes(ck.plan(), ck.config());
  EXPECT_DOUBLE_EQ(tools::bench::expected_step_bytes(a, 1), static_cast<double>(kHandCount));
  // Batch 2, uniform routing: 8 x (1 - (6/8)^2) = 3.5 distinct experts per layer.
  EXPECT_NEAR(tools::bench::expected_step_bytes(a, 2),
              static_cast<double>(a.shared + 2 * kEmbedRow) + 3.5 * static_cast<double>(4 * kOneExpert), 1.0);
  // A huge batch reads every expert once.
  EXPECT_NEAR(tools::bench::expected_step_bytes(a, 10000),
              static_cast<double>(a.shared + 10000 * kEmbedRow) + 8.0 * static_cast<double>(4 * kOneExpert), 1.0);
}

TEST(InspectCli, PrintsTheHandCountedActiveBytes) {
  const auto r = run_fp4serve("inspect " + kModels + "tiny-bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("active bytes per token: " + std::to_string(kHandCount) + "\n"));
}

TEST(BenchModelCli, TinyNvfp4ReportsEveryFigure) {
  const std::filesystem::path json = std::filesystem::temp_directory_path() / "fp4serve_bench_model_test.json";
  std::filesystem::remove(json);
  const auto r = run_fp4serve("bench model --model " + kModels +
                              "tiny-nvfp4 --prompt-len 16 --batch 1,2 --decode-steps 2 --bandwidth-buffer-mib 8 "
                              "--threads 2 --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("roofline: read bandwidth"));
  EXPECT_THAT(r.output, HasSubstr("prefill: 16 tokens"));
  // The same number inspect prints, from the same function.
  const LoadedCheckpoint ck = LoadedCheckpoint::open(kModels + "tiny-nvfp4");
  const uint64_t active = ck.plan().active_bytes_per_token();
  EXPECT_THAT(r.output, HasSubstr("active bytes per token: " + std::to_string(active) + " "));
  const auto inspect = run_fp4serve("inspect " + kModels + "tiny-nvfp4");
  EXPECT_THAT(inspect.output, HasSubstr("active bytes per token: " + std::to_string(active) + "\n"));

  std::ifstream f(json);
  ASSERT_TRUE(f) << "no JSON written at " << json;
  const nlohmann::json j = nlohmann::json::parse(f);
  for (const char* k : {"model", "description", "threads", "isa", "load_average", "roofline", "active_bytes_per_token", "active_bytes",
                        "prefill", "decode"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["active_bytes_per_token"].get<uint64_t>(), active);
  for (const char* k : {"read_bandwidth_gbs", "buffer_bytes", "fp32_fma_gflops", "fma_isa", "bf16_dot_gflops"}) {
    EXPECT_TRUE(j["roofline"].contains(k)) << k;
  }
  EXPECT_GT(j["roofline"]["read_bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_GT(j["roofline"]["fp32_fma_gflops"].get<double>(), 0.0);
  EXPECT_EQ(j["roofline"]["buffer_bytes"].get<uint64_t>(), uint64_t{8} << 20);
  for (const char* k : {"routed_experts", "one_expert_all_layers", "embedding_row", "other", "num_experts", "top_k"}) {
    EXPECT_TRUE(j["active_bytes"].contains(k)) << k;
  }
  const char* layer_keys[] = {"step_ms", "gdn_ms_per_layer", "attention_ms_per_layer", "moe_ms_per_block",
                              "lm_head_ms", "other_ms"};
  EXPECT_EQ(j["prefill"]["prompt_len"], 16);
  for (const char* k : {"seconds", "tok_s"}) EXPECT_GT(j["prefill"][k].get<double>(), 0.0) << k;
  for (const char* k : layer_keys) EXPECT_TRUE(j["prefill"]["layers"].contains(k)) << k;
  ASSERT_EQ(j["decode"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& d = j["decode"][i];
    EXPECT_EQ(d["batch"], static_cast<int>(i + 1));
    EXPECT_EQ(d["steps"], 2);
    for (const char* k : {"seconds", "tok_s", "efficiency", "expected_step_bytes", "bandwidth_utilization"}) {
      ASSERT_TRUE(d.contains(k)) << k;
      EXPECT_TRUE(std::isfinite(d[k].get<double>())) << k;
      EXPECT_GT(d[k].get<double>(), 0.0) << k;
    }
    for (const char* k : layer_keys) EXPECT_TRUE(d["layers"].contains(k)) << k;
    // tiny-nvfp4 has 3 GDN layers and 1 attention layer: every kind ran.
    EXPECT_GT(d["layers"]["gdn_ms_per_layer"].get<double>(), 0.0);
    EXPECT_GT(d["layers"]["attention_ms_per_layer"].get<double>(), 0.0);
    EXPECT_GT(d["layers"]["moe_ms_per_block"].get<double>(), 0.0);
    EXPECT_GT(d["layers"]["lm_head_ms"].get<double>(), 0.0);
  }
  std::filesystem::remove(json);
}

TEST(BenchModelCli, RefusesANonPositiveBatchSize) {
  const auto r = run_fp4serve("bench model --model " + kModels + "tiny-nvfp4 --batch 0 --bandwidth-buffer-mib 8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--batch sizes must be positive"));
}

// The roofline's default buffer: 4x the last-level cache, at least 1 GiB (a buffer only twice a
// large L3 is partly served by it). Huge-page backed and readable.
TEST(BenchModel, DefaultBandwidthBufferIsFourTimesTheLastLevelCache) {
  const uint64_t llc = static_cast<uint64_t>(kernels::cpu::last_level_cache_bytes());
  EXPECT_EQ(tools::bench::default_bandwidth_buffer_bytes(), std::max<uint64_t>(uint64_t{1} << 30, 4 * llc));
  const tools::bench::ReadBuffer buf(uint64_t{8} << 20);
  EXPECT_EQ(buf.words(), (int64_t{8} << 20) / 8);
  EXPECT_EQ(tools::bench::parallel_sum_words(buf.data(), 4), 0u + 1u + 2u + 3u);  // first touch wrote w -> w
}

}  // namespace
}  // namespace fp4serve
