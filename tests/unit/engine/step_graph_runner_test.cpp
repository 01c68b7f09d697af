// Step graphs in the model runner (issue 16 point 3), on the CPU through GraphRecordingBackend,
// which holds the runner to the seam's contract: a replay must call exactly the ops of its capture
// with the same buffers, shapes and descriptor counts. The runner with graphs must give the eager
// runner's logits bit for bit over decode steps of every batch size (padding), with requests joining
// and leaving, prefix hits (snapshots taken during replayed steps, then restored), and preemption.

#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "engine_model_util.h"
#include "engine_test_util.h"
#include "graph_recording_backend.h"
#include "step_graph_twin.h"

namespace fp4serve::engine {
namespace {

using testing::GraphRecordingBackend;
using testing::recording_model;
using testing::RecordingModel;
using testing::iota_tokens;
using testing::Stack;
using testing::StackConfig;

StackConfig stack_config(int num_blocks) { return testing::step_graph_stack_config(num_blocks); }

ModelRunnerConfig runner_config(const StackConfig& c, std::vector<int> sizes) {
  return testing::step_graph_runner_config(c, std::move(sizes));
}

// Greedy tokens of a host-memory backend's logits view.
std::vector<std::int32_t> greedy(const SchedulerOutput& out, const kernels::TensorView& logits) {
  const int64_t V = logits.rank == 2 ? logits.dim(1) : 0;
  return testing::greedy_tokens(out, std::vector<float>(logits.as<const float>(), logits.as<const float>() + logits.numel()), V);
}

struct Twin : testing::StepGraphTwin {
  Twin(int num_blocks, std::vector<int> sizes, int max_model_len = 256)
      : StepGraphTwin(*recording_model().model, num_blocks, std::move(sizes), max_model_len) {}
};

TEST(StepGraphRunner, CapturesEachUsableSizeLargestFirstAndLogs) {
  RecordingModel& m = recording_model();
  const int before = m.backend.captures;
  const StackConfig c = stack_config(64);
  // 8 covers max_num_seqs 6; 16 could never be replayed and is not captured.
  ModelRunner r(*m.model, runner_config(c, {1, 2, 4, 8, 16}));
  EXPECT_TRUE(r.captured_graph_sizes().empty());
  r.capture_graphs();
  EXPECT_EQ(r.captured_graph_sizes(), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(m.backend.captures - before, 4);
  EXPECT_EQ(r.padding_kv_block(), 64);
  EXPECT_EQ(r.padding_state_slot(), 6);
}

TEST(StepGraphRunner, BackendWithoutGraphsRunsEagerly) {
  RecordingModel& m = recording_model();
  m.backend.graphs_enabled = false;
  const StackConfig c = stack_config(64);
  ModelRunner r(*m.model, runner_config(c, {1, 2, 4, 8}));
  r.capture_graphs();
  m.backend.graphs_enabled = true;
  EXPECT_TRUE(r.captured_graph_sizes().empty());
  Stack st(c);
  st.sched.add_request("a", iota_tokens(5, 3), 3);
  while (st.sched.has_unfinished_requests()) {
    const SchedulerOutput& out = st.sched.schedule();
    st.sched.update_from_output(greedy(out, r.execute(out)));
  }
  EXPECT_EQ(r.graph_steps(), 0);
}

TEST(StepGraphRunner, ReplayedDecodeStepsEqualEagerBitForBit) {
  // Sizes 1, 2, 4, 8 for at most 6 sequences: batches of 3, 5 and 6 are padded.
  Twin t(64, {1, 2, 4, 8});
  ASSERT_EQ(t.graphs.captured_graph_sizes().size(), 4u);
  // Requests join while others decode (mixed steps run eagerly), leave at different lengths, and
  // cross block boundaries during decode (snapshot copies after a replay).
  t.run_join_leave_scenario();
  EXPECT_GE(t.decode_steps, 20);
  EXPECT_GE(t.batch_sizes.size(), 4u) << "decode steps should come in several batch sizes";
}

TEST(StepGraphRunner, PrefixHitOnStateSnapshottedDuringReplayedSteps) {
  Twin t(64, {1, 2, 4, 8});
  std::vector<std::int32_t> prompt = iota_tokens(7, 40);
  t.add("turn1", prompt, 30);  // decodes from 7 to 37 tokens: crosses 16 and 32 in replayed steps
  while (t.busy()) t.step();
  std::vector<std::int32_t> turn2 = t.history["turn1"];  // the conversation so far, as a multi-turn chat
  ASSERT_GE(turn2.size(), 36u);
  turn2.push_back(5);
  const auto hits_before = t.graph_stack.sched.metrics().prefix_cache_hits;
  t.add("turn2", turn2, 12);
  while (t.busy()) t.step();
  EXPECT_GT(t.graph_stack.sched.metrics().prefix_cache_hits, hits_before);
  EXPECT_GT(t.decode_steps, 30);
}

TEST(StepGraphRunner, PreemptionKeepsGraphStepsBitIdentical) {
  // 12 blocks of 16 tokens for 6 requests growing to ~60 tokens: the newest get preempted.
  Twin t(12, {1, 2, 4, 8}, 128);
  for (int i = 0; i < 6; ++i) t.add("p" + std::to_string(i), iota_tokens(20 + i, 100 + 13 * i), 40);
  for (int i = 0; i < 600 && t.busy(); ++i) t.step();
  EXPECT_FALSE(t.busy());
  EXPECT_GT(t.graph_stack.sched.metrics().num_preemptions, 0);
  EXPECT_GE(t.decode_steps, 30);
}

TEST(StepGraphRunner, ReplayThatChangesTheOpSequenceIsCaught) {
  // The mutation a graph backend would miss silently: a forward whose shapes vary per step (here,
  // replaying the 4-sequence graph with a 3-sequence forward, i.e. without the padding).
  RecordingModel& m = recording_model();
  const StackConfig c = stack_config(64);
  ModelRunner r(*m.model, runner_config(c, {4}));
  r.capture_graphs();
  ASSERT_EQ(r.captured_graph_sizes(), std::vector<int>{4});
  model::StepWorkspace ws(m.backend, m.model->config(), kernels::StepLimits{8, 8, 8, 64});
  model::GdnStateArena slots(m.backend, 4, static_cast<int>(m.model->config().num_linear_attention_layers()),
                             m.model->gdn_dims());
  model::PagedKvCache kv(m.backend, static_cast<int>(m.model->config().num_full_attention_layers()), 4, 16,
                         static_cast<int>(m.model->config().num_key_value_heads),
                         static_cast<int>(m.model->config().head_dim), kernels::KvDtype::kBf16);
  const int G = static_cast<int>(m.model->config().num_linear_attention_layers());
  const int A = static_cast<int>(m.model->config().num_full_attention_layers());
  std::vector<std::vector<kernels::GdnStateRef>> gdn(4, std::vector<kernels::GdnStateRef>(static_cast<std::size_t>(G)));
  std::vector<std::vector<int32_t>> tables(4);
  std::vector<std::vector<kernels::KvView>> views(4);
  static const int32_t token = 1;
  auto batch_of = [&](int n) {
    std::vector<model::BatchSequence> b(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      slots.refs(i, gdn[u]);
      tables[u] = {i};
      views[u].clear();
      for (int l = 0; l < A; ++l) views[u].push_back(kv.view(l, tables[u], 1.0f, 1.0f));
      b[u].tokens = std::span<const int32_t>(&token, 1);
      b[u].gdn = gdn[u];
      b[u].kv = views[u];
      b[u].logits = model::BatchSequence::Logits::kLast;
    }
    return b;
  };
  auto four = batch_of(4);
  auto graph = m.backend.capture_step([&] { m.model->forward_step(four, ws); });
  ASSERT_NE(graph, nullptr);
  EXPECT_NO_THROW(m.backend.replay_step(*graph, [&] { m.model->forward_step(four, ws); }));
  auto three = batch_of(3);
  try {
    m.backend.replay_step(*graph, [&] { m.model->forward_step(three, ws); });
    ADD_FAILURE() << "a replay with another batch shape was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("upload"), std::string::npos) << e.what();  // the token ids, first
  }
  // A per-step tensor the capture did not see (another output buffer) is caught too.
  model::StepWorkspace other(m.backend, m.model->config(), kernels::StepLimits{8, 8, 8, 64});
  EXPECT_THROW(m.backend.replay_step(*graph, [&] { m.model->forward_step(four, other); }), std::logic_error);
}

}  // namespace
}  // namespace fp4serve::engine
