// Graphs on == graphs off, on any backend: two identical scheduler stacks drive an eager ModelRunner
// and one with step graphs over the same model; every step's logits (downloaded from the backend)
// must be equal bit for bit, the greedy tokens too (they feed both stacks), and every pure-decode step
// within the largest size must replay a graph. The CPU suite runs it through GraphRecordingBackend
// (step_graph_runner_test.cpp); a CUDA build runs it on the device (tests/cuda/engine/step_graph_runner_cuda_test.cpp, label gpu).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine_test_util.h"

namespace fp4serve::engine::testing {

inline StackConfig step_graph_stack_config(int num_blocks, int max_model_len = 256) {
  StackConfig c;
  c.block_size = 16;
  c.num_blocks = num_blocks;
  c.max_model_len = max_model_len;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 6;
  c.num_slots = 6;
  c.num_snapshots = 64;
  c.snapshot_interval = 16;
  return c;
}

inline ModelRunnerConfig step_graph_runner_config(const StackConfig& c, std::vector<int> graph_sizes) {
  ModelRunnerConfig r{c.num_blocks, c.block_size, kernels::KvDtype::kBf16, c.num_slots, c.num_snapshots,
                      c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len};
  r.graph_sizes = std::move(graph_sizes);
  return r;
}

// Greedy tokens from host logits rows [rows, V], in the scheduler's order (-1 where nothing is sampled).
inline std::vector<std::int32_t> greedy_tokens(const SchedulerOutput& out, const std::vector<float>& logits, int64_t V) {
  std::vector<std::int32_t> tokens;
  int64_t row = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.needs_logits) {
      tokens.push_back(-1);
      continue;
    }
    const float* r = logits.data() + row++ * V;
    tokens.push_back(static_cast<std::int32_t>(std::max_element(r, r + V) - r));
  }
  return tokens;
}

inline bool pure_decode(const SchedulerOutput& out) {
  if (out.scheduled.empty()) return false;
  for (const ScheduledRequest& s : out.scheduled)
    if (s.num_scheduled_tokens != 1 || !s.needs_logits) return false;
  return true;
}

struct StepGraphTwin {
  StepGraphTwin(const model::Qwen35MoeModel& model, int num_blocks, std::vector<int> sizes, int max_model_len = 256)
      : model(model),
        cfg(step_graph_stack_config(num_blocks, max_model_len)),
        eager_stack(cfg),
        graph_stack(cfg),
        eager(model, step_graph_runner_config(cfg, {})),
        graphs(model, step_graph_runner_config(cfg, std::move(sizes))) {
    graphs.capture_graphs();
  }
  void add(const std::string& id, std::vector<std::int32_t> prompt, int max_tokens) {
    eager_stack.sched.add_request(id, prompt, max_tokens);
    graph_stack.sched.add_request(id, std::move(prompt), max_tokens);
  }
  std::vector<float> host(const kernels::TensorView& v) {
    std::vector<float> h(static_cast<std::size_t>(v.numel()));
    if (!h.empty()) model.backend().download(h.data(), v);
    return h;
  }
  // One step on both; returns whether the graph runner replayed a graph.
  bool step() {
    const SchedulerOutput& a = eager_stack.sched.schedule();
    const SchedulerOutput& b = graph_stack.sched.schedule();
    EXPECT_EQ(a.scheduled.size(), b.scheduled.size());
    const long before = graphs.graph_steps();
    const kernels::TensorView la = eager.execute(a);
    const std::vector<float> ha = host(la);
    const int64_t V = la.rank == 2 ? la.dim(1) : 0;
    const std::vector<std::int32_t> ta = greedy_tokens(a, ha, V);
    const kernels::TensorView lb = graphs.execute(b);
    const std::vector<float> hb = host(lb);
    const bool decode = !graphs.captured_graph_sizes().empty() && pure_decode(b) &&
                        static_cast<int>(b.scheduled.size()) <= graphs.captured_graph_sizes().back();
    EXPECT_EQ(graphs.graph_steps() - before, decode ? 1 : 0) << "step " << steps;
    if (decode) ++decode_steps, batch_sizes[static_cast<int>(b.scheduled.size())]++;
    EXPECT_EQ(ha.size(), hb.size());
    EXPECT_TRUE(ha.size() == hb.size() && std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float)) == 0)
        << "logits differ at step " << steps << " (" << b.scheduled.size() << " sequences)";
    const std::vector<std::int32_t> tb = greedy_tokens(b, hb, V);
    EXPECT_EQ(ta, tb);
    for (std::size_t i = 0; i < a.scheduled.size(); ++i) {
      if (ta[i] < 0) continue;
      const Request& r = *a.scheduled[i].request;
      std::vector<std::int32_t>& h = history[r.id()];
      h.assign(r.all_token_ids().begin(), r.all_token_ids().end());
      h.push_back(ta[i]);
    }
    eager_stack.sched.update_from_output(ta);
    graph_stack.sched.update_from_output(tb);
    ++steps;
    return decode;
  }
  bool busy() const { return eager_stack.sched.has_unfinished_requests(); }

  // The scenario both suites run: 7 requests joining every 6 steps with prompts of 5 .. 59 tokens,
  // leaving after 10 .. 52 tokens (decode batches of every size up to 6, padded to 1, 2, 4, 8).
  void run_join_leave_scenario() {
    int added = 0;
    for (int i = 0; i < 200 && (busy() || added < 7); ++i) {
      if (i % 6 == 0 && added < 7) {
        add("r" + std::to_string(added), iota_tokens(5 + 9 * added, 11 + added), 10 + 7 * added);
        ++added;
      }
      step();
    }
    EXPECT_FALSE(busy());
  }

  const model::Qwen35MoeModel& model;
  StackConfig cfg;
  Stack eager_stack, graph_stack;
  ModelRunner eager, graphs;
  int steps = 0, decode_steps = 0;
  std::map<int, int> batch_sizes;                             // decode steps replayed, by batch size
  std::map<std::string, std::vector<std::int32_t>> history;  // a request's tokens so far (eager side)
};

}  // namespace fp4serve::engine::testing
