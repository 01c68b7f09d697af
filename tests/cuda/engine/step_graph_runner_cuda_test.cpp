// Step graphs on the device (issue 16 point 3; label gpu, full CUDA builds only): the runner with
// CUDA graphs of padded pure-decode steps gives the eager runner's logits bit for bit, on the tiny
// BF16 model, over the join/leave scenario of the CPU suite (tests/unit/engine/step_graph_twin.h).
// With a backend that cannot capture yet, the runner runs eagerly and the test says so (skip).

#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/weight_loader.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/qwen3_5_moe.h"
#include "unit/engine/step_graph_twin.h"

namespace fp4serve::engine {
namespace {

TEST(StepGraphRunnerCuda, ReplayedDecodeStepsEqualEagerBitForBit) {
  std::shared_ptr<kernels::Backend> backend = kernels::cuda::make_cuda_backend_if_present(0);
  ASSERT_NE(backend, nullptr) << "no CUDA device";
  const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
  model::Qwen35MoeModel model(std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string())), backend);
  testing::StepGraphTwin t(model, 64, {1, 2, 4, 8});
  if (t.graphs.captured_graph_sizes().empty()) GTEST_SKIP() << "the CUDA backend captured no graphs";
  t.run_join_leave_scenario();
  EXPECT_GE(t.decode_steps, 20);
  EXPECT_GE(t.batch_sizes.size(), 4u);
}

}  // namespace
}  // namespace fp4serve::engine
