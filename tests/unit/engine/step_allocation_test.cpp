// A model step allocates nothing on the heap (issue 14): the step workspace, the KV cache and the GDN
// arenas are allocated through the backend when the model runner is built, the step's descriptors
// live in storage reserved then, and each thread allocates its kernel scratch once, on first use, at
// the size the step limits imply (CpuBackend::reserve). After a warm-up that only lets every thread
// run every op once (a short request: one full prefill chunk, a few decodes), 100 steps with longer
// contexts, more sequences and new prefills through ModelRunner::execute count zero operator new calls.
//
// This binary replaces the global operator new to count (unit/allocation_counter.h); counting is on
// only inside the measured window.

#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "engine_model_util.h"
#include "engine_test_util.h"
#include "unit/allocation_counter.h"

namespace fp4serve::engine {
namespace {

using testing::iota_tokens;
using testing::Stack;
using testing::StackConfig;

// Greedy tokens from the step's logits rows, in the scheduler's order (-1 where nothing is sampled).
std::vector<std::int32_t> greedy(const SchedulerOutput& out, const kernels::TensorView& logits) {
  std::vector<std::int32_t> tokens;
  const int64_t V = logits.rank == 2 ? logits.dim(1) : 0;
  int64_t row = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.needs_logits) {
      tokens.push_back(-1);
      continue;
    }
    const float* r = logits.as<const float>() + row++ * V;
    tokens.push_back(static_cast<std::int32_t>(std::max_element(r, r + V) - r));
  }
  return tokens;
}

TEST(StepAllocation, PrefillAndDecodeStepsAllocateNothingAfterWarmUp) {
  auto model = testing::tiny_model();
  StackConfig c;
  c.block_size = 16;
  c.num_blocks = 128;
  c.max_model_len = 512;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.num_slots = 8;
  c.num_snapshots = 64;
  c.snapshot_interval = 32;
  Stack st(c);
  ModelRunner runner(*model, ModelRunnerConfig{c.num_blocks, c.block_size, kernels::KvDtype::kBf16, c.num_slots,
                                               c.num_snapshots, c.max_num_batched_tokens, c.max_num_seqs,
                                               c.max_model_len});
  auto run_step = [&](bool count) {
    const SchedulerOutput& out = st.sched.schedule();
    if (count) g_counting = true;
    const kernels::TensorView logits = runner.execute(out);
    g_counting = false;
    const std::vector<std::int32_t> tokens = greedy(out, logits);
    st.sched.update_from_output(tokens);
    return out.total_num_scheduled_tokens;
  };
  // Warm-up: every thread runs every op once (70-token prompts: a full 64-token chunk, the rest,
  // then decodes). Two sequences, so that ops parallel over sequences (the GDN conv of a model whose
  // channels fit one work block) reach every thread too. The measured steps go well beyond their
  // context and batch.
  st.sched.add_request("warm", iota_tokens(70, 1), 3);
  st.sched.add_request("warm2", iota_tokens(70, 2), 3);
  for (int i = 0; i < 20 && st.sched.has_unfinished_requests(); ++i) run_step(false);
  ASSERT_FALSE(st.sched.has_unfinished_requests());

  // Measured: new requests arrive while others decode, so the window has prefill chunks (with
  // prefix-cache snapshot copies) and batched decodes.
  g_allocations = 0;
  int prefill_steps = 0, steps = 0;
  for (int i = 0; i < 100; ++i) {
    if (i % 20 == 0) {
      st.sched.add_request("r" + std::to_string(i), iota_tokens(90 + i, 10 + i), 60);  // admitted next step
    }
    if (!st.sched.has_unfinished_requests()) break;
    const int tokens = run_step(true);
    if (tokens > 8) ++prefill_steps;
    ++steps;
  }
  EXPECT_EQ(steps, 100);
  EXPECT_GE(prefill_steps, 5);
  EXPECT_EQ(g_allocations.load(), 0) << "heap allocations inside ModelRunner::execute across " << steps << " steps";
}

}  // namespace
}  // namespace fp4serve::engine
