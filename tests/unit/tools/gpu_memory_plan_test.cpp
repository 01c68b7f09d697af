// gpu_memory_plan: vLLM's --gpu-memory-utilization / --kv-cache-memory-bytes arithmetic on fake
// devices (an H200 and a 16 GB RTX 5070 Ti) with Qwen3.6-35B-A3B's cache shapes, and its refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tools/gpu_memory_plan.h"

namespace fp4serve::tools {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kMiB = 1ull << 20;

// Qwen3.6-35B-A3B: 10 full-attention layers x K and V x 2 KV heads x 256 dims x 2 bytes (bf16) per
// token; 30 GDN layers x (32 heads x 128 x 128 fp32 recurrent state + 8192 channels x 3 bf16 conv
// taps) per sequence.
constexpr std::uint64_t kKvBytesPerToken = 10ull * 2 * 2 * 256 * 2;               // 20,480
constexpr std::uint64_t kGdnStateBytes = 30ull * (32 * 128 * 128 * 4 + 8192 * 3 * 2);  // 64,389,120
constexpr std::uint64_t kNvfp4WeightBytes = 22'000'000'000ull;                     // the 35B NVFP4 checkpoint

GpuMemoryPlanInput qwen_on(const std::string& name, std::uint64_t total, int max_model_len) {
  GpuMemoryPlanInput in;
  in.device_name = name;
  in.total_bytes = total;
  in.free_at_start = total - 512 * kMiB;  // the driver's own context
  in.weight_bytes = kNvfp4WeightBytes;
  in.activation_bytes = 2 * kGiB;
  in.cache.block_size = 16;
  in.cache.kv_block_bytes = kKvBytesPerToken * 16;
  in.cache.state_bytes_per_seq = kGdnStateBytes;
  in.cache.max_model_len = max_model_len;
  in.cache.kv_dtype_name = "bf16";
  in.cache.device_label = "GPU";
  return in;
}

const std::uint64_t kH200 = static_cast<std::uint64_t>(139.8 * kGiB);
const std::uint64_t kRtx5070Ti = 16'303ull * kMiB;  // 15.9 GiB

TEST(GpuMemoryPlan, H200AtTheDefaultUtilizationHoldsTheFullContextManyTimes) {
  const GpuMemoryPlanInput in = qwen_on("NVIDIA H200", kH200, 262144);
  const GpuMemoryPlan p = plan_gpu_memory(in);
  const auto requested = static_cast<std::uint64_t>(0.9 * static_cast<double>(kH200));
  EXPECT_EQ(p.requested_bytes, requested);
  EXPECT_EQ(p.cache_budget_bytes, requested - kNvfp4WeightBytes - 2 * kGiB);
  // The engine's own split of that budget: KV blocks + GDN slots/snapshots, never more than it.
  EXPECT_LE(p.cache.kv_bytes + p.gdn_state_bytes, p.cache_budget_bytes);
  EXPECT_GT(p.cache.kv_bytes, p.cache_budget_bytes / 3);
  EXPECT_EQ(p.kv_tokens, static_cast<std::int64_t>(p.cache.kv_bytes / kKvBytesPerToken));
  EXPECT_GE(p.kv_tokens, 262144 * 2);
  EXPECT_DOUBLE_EQ(p.max_concurrency, std::min(static_cast<double>(p.kv_tokens) / 262144, 256.0));
  EXPECT_EQ(p.cache.max_num_seqs, 256);  // max_num_seqs not given: as many as half the budget holds, at most 256
  ASSERT_EQ(p.log_lines.size(), 4u);
  EXPECT_THAT(p.log_lines[0], HasSubstr("Memory plan on NVIDIA H200 (139.80 GiB): --gpu-memory-utilization 0.90"));
  EXPECT_THAT(p.log_lines[0], HasSubstr("weights 20.49 GiB, activations 2.00 GiB, KV cache "));
  EXPECT_THAT(p.log_lines[0], HasSubstr("GDN state "));
  EXPECT_THAT(p.log_lines[1], HasSubstr("Available KV cache memory: "));
  EXPECT_EQ(p.log_lines[2], "GPU KV cache size: " + with_thousands(p.kv_tokens) + " tokens");
  EXPECT_THAT(p.log_lines[3], HasSubstr("Maximum concurrency for 262,144 tokens per request: "));
}

TEST(GpuMemoryPlan, LowerUtilizationLeavesLessCache) {
  GpuMemoryPlanInput in = qwen_on("NVIDIA H200", kH200, 32768);
  const GpuMemoryPlan full = plan_gpu_memory(in);
  in.gpu_memory_utilization = 0.5;
  const GpuMemoryPlan half = plan_gpu_memory(in);
  EXPECT_LT(half.cache_budget_bytes, full.cache_budget_bytes);
  EXPECT_LT(half.kv_tokens, full.kv_tokens);
}

TEST(GpuMemoryPlan, The35BNvfp4ModelIsRefusedOnA16GBCard) {
  const GpuMemoryPlanInput in = qwen_on("NVIDIA GeForce RTX 5070 Ti", kRtx5070Ti, 32768);
  try {
    plan_gpu_memory(in);
    FAIL() << "a 22 GB model planned on a 16 GB card";
  } catch (const GpuMemoryPlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the model's weights (20.49 GiB) are larger than the memory of NVIDIA GeForce "
                                    "RTX 5070 Ti (15.92 GiB)"));
    EXPECT_THAT(e.what(), HasSubstr("--device cpu"));
  }
  // The same refusal before the load, from the checkpoint's size.
  EXPECT_THROW(check_weights_fit("RTX 5070 Ti", kRtx5070Ti, 0.9, kNvfp4WeightBytes, false), GpuMemoryPlanError);
  // A model that fits the card passes the pre-load check.
  EXPECT_NO_THROW(check_weights_fit("RTX 5070 Ti", kRtx5070Ti, 0.9, 8 * kGiB, false));
}

TEST(GpuMemoryPlan, WeightsThatFitTheCardButNotTheUtilizationAreRefused) {
  try {
    check_weights_fit("RTX 5070 Ti", kRtx5070Ti, 0.5, 9 * kGiB, false);
    FAIL();
  } catch (const GpuMemoryPlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Try increasing `gpu_memory_utilization`"));
  }
}

TEST(GpuMemoryPlan, NoMemoryLeftForTheCacheIsVllmsError) {
  GpuMemoryPlanInput in = qwen_on("RTX 5070 Ti", kRtx5070Ti, 4096);
  in.weight_bytes = 13 * kGiB;
  in.activation_bytes = 2 * kGiB;  // 15 GiB > 0.9 x 15.92 GiB
  try {
    plan_gpu_memory(in);
    FAIL();
  } catch (const GpuMemoryPlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("No available memory for the cache blocks"));
    EXPECT_THAT(e.what(), HasSubstr("Try increasing `gpu_memory_utilization`"));
  }
}

TEST(GpuMemoryPlan, ACacheBelowOneMaxModelLenRequestNamesTheLongestThatFits) {
  // A 12 GiB model on the 16 GB card: about a GiB of cache, far from 262,144 tokens of KV.
  GpuMemoryPlanInput in = qwen_on("RTX 5070 Ti", kRtx5070Ti, 262144);
  in.weight_bytes = 12 * kGiB;
  in.activation_bytes = 1 * kGiB;
  in.cache.max_num_seqs = 4;
  in.cache.max_num_seqs_explicit = true;
  std::string message;
  try {
    plan_gpu_memory(in);
  } catch (const GpuMemoryPlanError& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty());
  EXPECT_THAT(message, HasSubstr("To serve at least one request with the model's max seq len (262144), (5.00 GiB KV "
                                 "cache is needed, which is larger than the available KV cache memory ("));
  EXPECT_THAT(message, HasSubstr("Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"));
  // The estimate it names is exact: at that max_model_len the plan starts.
  const std::string marker = "the estimated maximum model length is ";
  const auto at = message.find(marker);
  ASSERT_NE(at, std::string::npos);
  const int estimate = std::stoi(message.substr(at + marker.size()));
  EXPECT_GT(estimate, 0);
  EXPECT_LT(estimate, 262144);
  in.cache.max_model_len = estimate;
  const GpuMemoryPlan p = plan_gpu_memory(in);
  EXPECT_EQ(p.kv_tokens, estimate);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 1.0);
  in.cache.max_model_len = estimate + 16;
  EXPECT_THROW(plan_gpu_memory(in), GpuMemoryPlanError);
}

TEST(GpuMemoryPlan, KvCacheMemoryBytesIsTheBudgetAndOverridesTheUtilization) {
  GpuMemoryPlanInput in = qwen_on("NVIDIA H200", kH200, 32768);
  in.gpu_memory_utilization = 0.05;  // would leave nothing: not used
  in.kv_cache_memory_bytes = 8 * kGiB;
  const GpuMemoryPlan p = plan_gpu_memory(in);
  EXPECT_EQ(p.cache_budget_bytes, 8 * kGiB);
  EXPECT_EQ(p.requested_bytes, kNvfp4WeightBytes + 2 * kGiB + 8 * kGiB);
  EXPECT_THAT(p.log_lines[0], HasSubstr("--kv-cache-memory-bytes 8.00 GiB (--gpu-memory-utilization not used)"));
  // More than the device holds is refused.
  in.kv_cache_memory_bytes = 200 * kGiB;
  EXPECT_THROW(plan_gpu_memory(in), GpuMemoryPlanError);
  // Too small for one request: vLLM's message, naming the flag to raise.
  in.kv_cache_memory_bytes = 256 * kMiB;
  try {
    plan_gpu_memory(in);
    FAIL();
  } catch (const GpuMemoryPlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Try increasing `kv_cache_memory_bytes`"));
  }
}

TEST(GpuMemoryPlan, FreeMemoryBelowTheUtilizationAtStartIsRefused) {
  GpuMemoryPlanInput in = qwen_on("NVIDIA H200", kH200, 32768);
  in.free_at_start = 100 * kGiB;  // another process holds ~40 GiB
  try {
    plan_gpu_memory(in);
    FAIL();
  } catch (const GpuMemoryPlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Free memory on device NVIDIA H200 (100.00/139.80 GiB) on startup is less than "
                                    "desired GPU memory utilization (0.90, 125.82 GiB)"));
  }
  in.gpu_memory_utilization = 0.7;  // 97.9 GiB: fits what is free
  EXPECT_NO_THROW(plan_gpu_memory(in));
}

TEST(GpuMemoryPlan, UtilizationText) {
  EXPECT_DOUBLE_EQ(parse_gpu_memory_utilization(""), 0.9);
  EXPECT_DOUBLE_EQ(parse_gpu_memory_utilization("0.5"), 0.5);
  EXPECT_DOUBLE_EQ(parse_gpu_memory_utilization("1"), 1.0);
  for (const char* bad : {"0", "1.5", "-0.2", "abc", "0.5x"})
    EXPECT_THROW(parse_gpu_memory_utilization(bad), GpuMemoryPlanError) << bad;
  EXPECT_EQ(with_thousands(0), "0");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(1000), "1,000");
  EXPECT_EQ(with_thousands(2902470), "2,902,470");
}

}  // namespace
}  // namespace fp4serve::tools
