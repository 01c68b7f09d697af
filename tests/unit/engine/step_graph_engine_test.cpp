// The engine with step graphs (cudagraph_mode FULL, captured at start-up through a backend that
// holds replays to their captures) gives the tokens and logprobs of the engine without them, bit
// for bit, over concurrent requests that join and leave (decode batches of every size, padded),
// greedy and seeded sampling alike.

#include <gtest/gtest.h>

#include <random>

#include "engine_model_util.h"
#include "graph_recording_backend.h"

namespace fp4serve::engine {
namespace {

using testing::collect;
using testing::Finished;
using testing::greedy_request;
using testing::random_prompt;
using testing::recording_model;

std::vector<Finished> run(CudaGraphMode mode) {
  EngineConfig c = testing::small_engine_config();
  c.max_num_seqs = 6;
  c.cuda_graphs.mode = mode;
  Engine engine(recording_model().model, testing::qwen_tokenizer(), c);
  EXPECT_EQ(engine.info().cuda_graph_sizes.empty(), mode == CudaGraphMode::kNone);
  std::mt19937 rng(5);
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (int i = 0; i < 7; ++i) {
    EngineRequest r = greedy_request("g" + std::to_string(i), random_prompt(rng, 3 + 11 * i), 6 + 5 * i);
    if (i % 2 == 1) {
      r.params.temperature = 0.8;
      r.params.seed = 100 + i;
    }
    r.params.logprobs = 2;
    channels.push_back(engine.submit(std::move(r)));
  }
  std::vector<Finished> out;
  for (auto& ch : channels) out.push_back(collect(*ch));
  testing::expect_no_leaks(engine);
  return out;
}

TEST(StepGraphEngine, GraphsOnEqualsGraphsOffBitForBit) {
  auto& backend = recording_model().backend;
  const std::vector<Finished> eager = run(CudaGraphMode::kNone);
  const int replays_before = backend.replays, captures_before = backend.captures;
  const std::vector<Finished> graphs = run(CudaGraphMode::kFull);
  EXPECT_EQ(backend.captures - captures_before, 4);  // 1, 2, 4, 8 for max_num_seqs 6
  EXPECT_GE(backend.replays - replays_before, 20) << "decode steps should replay graphs";
  ASSERT_EQ(eager.size(), graphs.size());
  for (std::size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(eager[i].tokens, graphs[i].tokens) << "request " << i;
    ASSERT_EQ(eager[i].logprobs[0].size(), graphs[i].logprobs[0].size());
    for (std::size_t t = 0; t < eager[i].logprobs[0].size(); ++t) {
      const auto& a = eager[i].logprobs[0][t];
      const auto& b = graphs[i].logprobs[0][t];
      EXPECT_EQ(a.sampled.logprob, b.sampled.logprob) << "request " << i << " token " << t;
      ASSERT_EQ(a.top.size(), b.top.size());
      for (std::size_t k = 0; k < a.top.size(); ++k) EXPECT_EQ(a.top[k].logprob, b.top[k].logprob);
    }
  }
}

}  // namespace
}  // namespace fp4serve::engine
