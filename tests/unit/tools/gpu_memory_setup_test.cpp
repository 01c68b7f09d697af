// gpu_memory_setup's cache plan input is the engine's: the split the GPU plan logs (KV tokens,
// slots, snapshots, concurrency) is the one the engine then allocates. Checked on the CPU with a
// tiny checkpoint (the measuring half of plan_device_memory needs a GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "checkpoint/weight_loader.h"
#include "engine/engine.h"
#include "tools/gpu_memory_setup.h"

namespace fp4serve::tools {
namespace {

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";
const std::string kTokenizer = std::string(FP4SERVE_SOURCE_DIR) + "/.cache/tokenizers/qwen3.5";

void expect_same_split(const engine::CachePlan& a, const engine::CachePlan& b) {
  EXPECT_EQ(a.max_num_seqs, b.max_num_seqs);
  EXPECT_EQ(a.num_state_slots, b.num_state_slots);
  EXPECT_EQ(a.num_snapshots, b.num_snapshots);
  EXPECT_EQ(a.num_kv_blocks, b.num_kv_blocks);
  EXPECT_EQ(a.num_rollback_entries, b.num_rollback_entries);
  EXPECT_EQ(a.kv_tokens, b.kv_tokens);
  EXPECT_DOUBLE_EQ(a.max_concurrency, b.max_concurrency);
}

TEST(GpuMemorySetup, CachePlanInputIsTheEnginesOwn) {
  if (!std::filesystem::exists(kTokenizer + "/tokenizer.json")) GTEST_SKIP() << "no " << kTokenizer;
  // Two cases (each loads the real tokenizer: about 0.7 s): the plan choosing max_num_seqs with
  // snapshots, and an explicit max_num_seqs without prefix caching.
  for (const auto& [prefix, seqs] : {std::pair{true, 0}, std::pair{false, 3}}) {
    {
      EngineFlags f;
      f.device = "cpu";
      f.tokenizer = kTokenizer;
      f.kv_cache_memory = "24MiB";
      f.max_model_len = 256;
      f.max_num_seqs = seqs;
      f.enable_prefix_caching = prefix;
      f.weight_cache = false;
      ServingModel sm = load_serving_model(kModels + "tiny-nvfp4", f, nullptr, VisionChoice{false, false, "test"});
      engine::CachePlanInput in = cache_plan_input(*sm.model, sm.config);
      in.budget_bytes = sm.config.cache_memory_bytes;
      const engine::CachePlan mine = engine::plan_cache(in);
      engine::Engine eng(sm.model, sm.tokenizer, sm.config);
      SCOPED_TRACE(::testing::Message() << "prefix caching " << prefix << ", max_num_seqs " << seqs);
      expect_same_split(mine, eng.info().cache);
      EXPECT_GT(mine.kv_tokens, 0);
      // The GPU planner over the same input reports the same capacity.
      GpuMemoryPlanInput g;
      g.total_bytes = 1ull << 30;
      g.kv_cache_memory_bytes = sm.config.cache_memory_bytes;
      g.cache = in;
      const GpuMemoryPlan p = plan_gpu_memory(g);
      expect_same_split(p.cache, eng.info().cache);
      EXPECT_EQ(p.kv_tokens, eng.info().cache.kv_tokens);
    }
  }
}

TEST(GpuMemorySetup, DoctorsEstimateUsesTheCheckpointsShapes) {
  LoadOptions opts;
  opts.touch_pages = false;
  opts.show_progress = false;
  const LoadedCheckpoint ck = LoadedCheckpoint::open(kModels + "tiny-nvfp4", opts);
  const ModelFacts m = model_facts(ck, kTokenizer);
  EngineFlags f;
  f.max_model_len = 4096;
  DeviceMemory h200{139ull << 30, 140ull << 30, 139ull << 30, "NVIDIA H200"};
  const GpuMemoryPlan p = preview_gpu_memory_plan(m, f, h200, 22'000'000'000ull);
  // Budget = 0.9 x 140 GiB - the weights; the KV capacity follows the tiny model's KV bytes per token.
  EXPECT_EQ(p.cache_budget_bytes, static_cast<std::uint64_t>(0.9 * static_cast<double>(140ull << 30)) - 22'000'000'000ull);
  EXPECT_GT(p.kv_tokens, 4096);
  EXPECT_THAT(p.log_lines.back(), ::testing::HasSubstr("Maximum concurrency for 4,096 tokens per request: "));
  // The 35B checkpoint's size on a 16 GB card: refused before anything is loaded.
  DeviceMemory rtx{15ull << 30, 16'303ull << 20, 15ull << 30, "NVIDIA GeForce RTX 5070 Ti"};
  EXPECT_THROW(preview_gpu_memory_plan(m, f, rtx, 22'000'000'000ull), GpuMemoryPlanError);
}

}  // namespace
}  // namespace fp4serve::tools
