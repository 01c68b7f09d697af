// The scheduler's side of the shared prefill for n > 1 (scheduler.h): held children are forked when
// their source computes its last prompt token -- full blocks shared, the partial one copied, the GDN
// state copied -- or, without room, wait and prefill themselves; a source that leaves first hands
// them on. The shadow model (engine_test_util.h) checks every KV position and state a step reads
// against a from-scratch run, so a fork that shared the wrong block or missed a copy fails there.
#include <gtest/gtest.h>

#include <map>

#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::Stack;
using testing::StackConfig;
using testing::iota_tokens;

std::vector<std::int32_t> expected_output(const std::vector<std::int32_t>& prompt, int max_tokens) {
  Request r("x", prompt, max_tokens, 0);
  for (int i = 0; i < max_tokens; ++i) r.append_output_token(testing::fake_token(r));
  return {r.output_token_ids().begin(), r.output_token_ids().end()};
}

// Drives the stack with the shadow model to the end; fork children sample what the fake model gives
// them (a function of the prompt and the length, as a seeded child's row would be of its source's).
struct Driver {
  explicit Driver(Stack& st, const StackConfig& c) : st(st), model(c.num_blocks, c.block_size, c.num_slots, c.num_snapshots) {}

  bool step() {
    const SchedulerOutput& o = st.sched.schedule();
    const std::vector<std::int32_t> sampled = model.run(o);
    std::vector<std::int32_t> fork_tokens;
    for (const ScheduledRequest& s : o.scheduled) {
      for (const Request* child : s.fork_children) fork_tokens.push_back(testing::fake_token(*child));
      if (!s.fork_children.empty()) ++fork_steps;
    }
    std::vector<std::span<const std::int32_t>> emitted;
    for (const std::int32_t& t : sampled) emitted.emplace_back(&t, 1);
    for (const StepResult& r : st.sched.update_from_emitted(emitted, fork_tokens)) outputs[r.request->id()].push_back(r.token);
    forks.insert(forks.end(), o.forks.begin(), o.forks.end());
    model.apply_forks(o);
    return model.error().empty();
  }
  void run_to_end() {
    for (int i = 0; i < 500 && st.sched.has_unfinished_requests(); ++i) ASSERT_TRUE(step()) << model.error();
    ASSERT_FALSE(st.sched.has_unfinished_requests()) << "no progress: deadlock";
  }

  Stack& st;
  testing::ShadowModel model;
  std::map<std::string, std::vector<std::int32_t>> outputs;
  std::vector<ForkCopy> forks;
  int fork_steps = 0;
};

void add_family(Stack& st, const std::string& id, const std::vector<std::int32_t>& prompt, int n, int max_tokens) {
  st.sched.add_request("0_" + id, prompt, max_tokens);
  for (int i = 1; i < n; ++i) st.sched.add_fork_child(std::to_string(i) + "_" + id, "0_" + id, max_tokens);
}

void expect_family_outputs(const Driver& d, const std::string& id, const std::vector<std::int32_t>& prompt, int n,
                           int max_tokens) {
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(d.outputs.at(std::to_string(i) + "_" + id), expected_output(prompt, max_tokens)) << i;
}

TEST(ForkScheduler, ChildrenShareFullBlocksCopyThePartialOneAndNeverComputeThePrompt) {
  for (const int len : {10, 8}) {  // a partial last block, then whole blocks only
    StackConfig c;
    c.block_size = 4;
    c.max_num_batched_tokens = 4;  // the prompt in chunks
    Stack st(c);
    const auto prompt = iota_tokens(len, 0);
    add_family(st, "a", prompt, 3, 6);
    EXPECT_EQ(st.sched.num_waiting(), 3);  // held children count as waiting
    Driver d(st, c);
    const Request* src = st.sched.find("0_a");
    while (d.fork_steps == 0) ASSERT_TRUE(d.step()) << d.model.error();
    ASSERT_EQ(d.forks.size(), 2u);
    const Request* child = st.sched.find("2_a");
    ASSERT_NE(child, nullptr);
    EXPECT_EQ(child->num_computed_tokens, len);
    EXPECT_EQ(child->num_cached_tokens, len);
    const int full = len / 4;
    for (int b = 0; b < full; ++b) {
      EXPECT_EQ(child->res.block_ids[static_cast<std::size_t>(b)], src->res.block_ids[static_cast<std::size_t>(b)]);
      EXPECT_EQ(st.kv.pool().ref_count(src->res.block_ids[static_cast<std::size_t>(b)]), 3);
    }
    for (const ForkCopy& f : d.forks) {
      EXPECT_EQ(f.src_state_slot, src->res.state_slot);
      if (len % 4 != 0) {
        EXPECT_EQ(f.src_block, src->res.block_ids[static_cast<std::size_t>(full)]);
        EXPECT_NE(f.dst_block, f.src_block);
      } else {
        EXPECT_EQ(f.src_block, -1);
      }
    }
    d.run_to_end();
    expect_family_outputs(d, "a", prompt, 3, 6);
    const SchedulerMetrics m = st.sched.metrics();
    EXPECT_EQ(m.prompt_tokens_computed, len);
    EXPECT_EQ(m.prompt_tokens_forked, 2 * len);
    EXPECT_EQ(st.kv.pool().num_free_blocks(), c.num_blocks);
    EXPECT_EQ(st.slots.num_free(), c.num_slots);
  }
}

TEST(ForkScheduler, WithoutAFreeBlockOrRunningPlaceAChildWaitsAndPrefillsItself) {
  for (const bool caching : {true, false}) {
    StackConfig c;
    c.block_size = 4;
    c.num_blocks = 4;       // the source takes 3 for 10 tokens: one child can copy the partial block
    c.max_model_len = 16;
    c.prefix_caching = caching;
    Stack st(c);
    const auto prompt = iota_tokens(10, 0);
    add_family(st, "b", prompt, 3, 2);
    Driver d(st, c);
    d.run_to_end();
    EXPECT_EQ(d.forks.size(), 1u);
    expect_family_outputs(d, "b", prompt, 3, 2);
    EXPECT_EQ(st.sched.metrics().prompt_tokens_forked, 10);
  }
  StackConfig c;
  c.max_num_seqs = 1;  // the running list is full: no fork at all
  Stack st(c);
  const auto prompt = iota_tokens(9, 0);
  add_family(st, "c", prompt, 3, 3);
  Driver d(st, c);
  d.run_to_end();
  EXPECT_TRUE(d.forks.empty());
  expect_family_outputs(d, "c", prompt, 3, 3);
}

TEST(ForkScheduler, ASourceAbortedBeforeTheForkHandsItsChildrenToTheFirstOfThem) {
  StackConfig c;
  c.block_size = 4;
  c.max_num_batched_tokens = 4;
  Stack st(c);
  const auto prompt = iota_tokens(10, 0);
  add_family(st, "d", prompt, 4, 5);
  Driver d(st, c);
  ASSERT_TRUE(d.step());  // 0_d computed one chunk
  EXPECT_TRUE(st.sched.abort_request("0_d"));
  EXPECT_TRUE(st.sched.abort_request("2_d"));  // a held child leaves alone
  EXPECT_EQ(st.sched.num_waiting(), 2);
  d.run_to_end();
  EXPECT_EQ(d.forks.size(), 1u);  // 3_d forked from 1_d
  EXPECT_EQ(d.outputs.count("2_d"), 0u);
  EXPECT_EQ(d.outputs.at("1_d"), expected_output(prompt, 5));
  EXPECT_EQ(d.outputs.at("3_d"), expected_output(prompt, 5));
  EXPECT_EQ(st.kv.pool().num_free_blocks(), c.num_blocks);
}

TEST(ForkScheduler, AChildDoneAtItsFirstTokenRetiresAtTheFork) {
  StackConfig c;
  Stack st(c);
  add_family(st, "e", iota_tokens(6, 0), 3, 1);
  Driver d(st, c);
  d.run_to_end();
  EXPECT_TRUE(d.forks.empty());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.outputs.at(std::to_string(i) + "_e").size(), 1u);
  EXPECT_EQ(st.slots.num_free(), c.num_slots);
  EXPECT_EQ(st.kv.pool().num_free_blocks(), c.num_blocks);
}

}  // namespace
}  // namespace fp4serve::engine
