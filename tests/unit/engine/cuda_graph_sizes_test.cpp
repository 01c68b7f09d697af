// The CUDA-graph capture sizes against the numbers vLLM's VllmConfig._set_cudagraph_sizes gives, and
// the padding rule of a pure-decode step.

#include "engine/cuda_graph_sizes.h"

#include <gtest/gtest.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {
namespace {

CudaGraphSettings full() {
  CudaGraphSettings s;
  s.mode = CudaGraphMode::kFullAndPiecewise;
  return s;
}

std::vector<int> vllm_default(int max) {
  // [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max + 1, 16)), cut at max.
  std::vector<int> v;
  for (int x : {1, 2, 4})
    if (x <= max) v.push_back(x);
  for (int x = 8; x < 256 && x <= max; x += 8) v.push_back(x);
  for (int x = 256; x <= max; x += 16) v.push_back(x);
  return v;
}

TEST(CudaGraphSizes, DefaultSizesFollowMaxNumSeqsAsVllm) {
  // max = min(max_num_seqs * 2, 512), then at most max_num_batched_tokens.
  EXPECT_EQ(plan_cuda_graphs(full(), 1, 2048).sizes, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan_cuda_graphs(full(), 8, 2048).sizes, (std::vector<int>{1, 2, 4, 8, 16}));
  const CudaGraphPlan p256 = plan_cuda_graphs(full(), 256, 8192);
  EXPECT_EQ(p256.sizes.size(), 51u);  // 3 + 31 (8..248) + 17 (256..512)
  EXPECT_EQ(p256.sizes, vllm_default(512));
  EXPECT_EQ(p256.max_size, 512);
  EXPECT_EQ(plan_cuda_graphs(full(), 1024, 8192).sizes, vllm_default(512));
  EXPECT_EQ(plan_cuda_graphs(full(), 256, 64).sizes, (std::vector<int>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}));
  EXPECT_EQ(plan_cuda_graphs(full(), 3, 2048).sizes, (std::vector<int>{1, 2, 4}));  // max 6
  // Speculative decoding: decode_query_len = 1 + drafts.
  EXPECT_EQ(plan_cuda_graphs(full(), 8, 2048, 3).max_size, 64);
  EXPECT_TRUE(plan_cuda_graphs(full(), 8, 2048).warnings.empty());
}

TEST(CudaGraphSizes, ExplicitMaxAndList) {
  CudaGraphSettings s = full();
  s.max_capture_size = 16;
  EXPECT_EQ(plan_cuda_graphs(s, 256, 2048).sizes, (std::vector<int>{1, 2, 4, 8, 16}));
  s.max_capture_size = 100;  // the list ends at 96: vLLM truncates with a warning
  const CudaGraphPlan p = plan_cuda_graphs(s, 256, 2048);
  EXPECT_EQ(p.sizes.back(), 96);
  EXPECT_EQ(p.max_size, 96);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], "Truncating max_cudagraph_capture_size to 96");

  CudaGraphSettings l = full();
  l.capture_sizes = std::vector<int>{4, 1, 4, 16, 9999};
  const CudaGraphPlan q = plan_cuda_graphs(l, 8, 2048);  // de-duplicated, sorted, cut at max_num_batched_tokens
  EXPECT_EQ(q.sizes, (std::vector<int>{1, 4, 16}));
  EXPECT_EQ(q.max_size, 16);
  EXPECT_EQ(q.warnings.size(), 1u);  // "... is overridden by config [1, 4, 16]"
  l.max_capture_size = 16;
  EXPECT_NO_THROW(plan_cuda_graphs(l, 8, 2048));
  l.max_capture_size = 8;
  try {
    plan_cuda_graphs(l, 8, 2048);
    ADD_FAILURE() << "inconsistent max and list accepted";
  } catch (const EngineConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "customized max_cudagraph_capture_size(=8) should be consistent with the max value of "
                 "cudagraph_capture_sizes(=16)");
  }
  l.max_capture_size.reset();
  l.capture_sizes = std::vector<int>{};
  EXPECT_THROW(plan_cuda_graphs(l, 8, 2048), EngineConfigError);
}

TEST(CudaGraphSizes, NoneAndEnforceEagerCaptureNothing) {
  CudaGraphSettings s;
  EXPECT_TRUE(plan_cuda_graphs(s, 256, 2048).sizes.empty());
  s = full();
  s.enforce_eager = true;
  EXPECT_TRUE(plan_cuda_graphs(s, 256, 2048).sizes.empty());
  EXPECT_EQ(plan_cuda_graphs(s, 256, 2048).max_size, 0);
  EXPECT_NE(describe_cuda_graphs(s, {}).find("eager"), std::string::npos);
}

TEST(CudaGraphSizes, EveryVllmModeIsAcceptedAndMeansDecodeGraphsOrNone) {
  for (const char* name : {"NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "full", "Piecewise"}) {
    const auto m = parse_cudagraph_mode(name);
    ASSERT_TRUE(m) << name;
    EXPECT_EQ(captures_decode_graphs(*m), std::string(name) != "NONE") << name;
  }
  EXPECT_FALSE(parse_cudagraph_mode("SOMETIMES"));
  EXPECT_EQ(cudagraph_mode_name(CudaGraphMode::kFullDecodeOnly), "FULL_DECODE_ONLY");
  CudaGraphSettings pw;
  pw.mode = CudaGraphMode::kPiecewise;
  const std::string line = describe_cuda_graphs(pw, plan_cuda_graphs(pw, 8, 2048));
  EXPECT_NE(line.find("no piecewise graphs"), std::string::npos) << line;
  EXPECT_NE(line.find("5 sizes (1 .. 16)"), std::string::npos) << line;
}

TEST(CudaGraphSizes, PaddingPicksTheSmallestSizeAtLeastTheBatch) {
  const std::vector<int> sizes{1, 2, 4, 8, 16};
  EXPECT_EQ(padded_graph_size(sizes, 1), 1);
  EXPECT_EQ(padded_graph_size(sizes, 3), 4);
  EXPECT_EQ(padded_graph_size(sizes, 8), 8);
  EXPECT_EQ(padded_graph_size(sizes, 9), 16);
  EXPECT_EQ(padded_graph_size(sizes, 17), 0);  // above the largest: eager
  EXPECT_EQ(padded_graph_size(sizes, 0), 0);
  EXPECT_EQ(padded_graph_size({}, 1), 0);
  // A runner of at most 6 sequences never replays 16.
  EXPECT_EQ(usable_capture_sizes(sizes, 6), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(usable_capture_sizes(sizes, 8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(usable_capture_sizes(sizes, 100), sizes);
}

}  // namespace
}  // namespace fp4serve::engine
