// Prefix caching through the scheduler: KV hits intersected with GDN state snapshots.
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::iota_tokens;
using testing::Stack;
using testing::StackConfig;
using testing::step;

void run_to_completion(Stack& st) {
  for (int i = 0; i < 1000 && st.sched.has_unfinished_requests(); ++i) step(st);
  ASSERT_FALSE(st.sched.has_unfinished_requests());
}

TEST(PrefixCache, IdenticalPromptHitIsCappedToRecomputeTheLastToken) {
  Stack st(StackConfig{});  // block 4, snapshots at prompt/sequence ends only
  st.sched.add_request("a", iota_tokens(32), 1);
  run_to_completion(st);
  // Snapshots: 28 (last block boundary before the prompt's last token) and the tail at 32.
  EXPECT_EQ(st.snapshots.num_committed(), 2);

  st.sched.add_request("b", iota_tokens(32), 1);
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  const ScheduledRequest& s = out.scheduled[0];
  // Cap = num_tokens - 1 = 31 -> 7 full blocks = 28 tokens; 4 recomputed.
  EXPECT_EQ(s.start_position, 28);
  EXPECT_EQ(s.num_scheduled_tokens, 4);
  EXPECT_TRUE(s.needs_logits);
  EXPECT_EQ(s.state_init, StateInit::kRestore);
  EXPECT_EQ(st.snapshots.num_tokens(s.restore_snapshot_id), 28);
  EXPECT_EQ(s.block_table.size(), 8u);
  EXPECT_EQ(s.new_block_ids.size(), 1u);
  st.sched.update_from_output(testing::run_fake_model(out));
  const SchedulerMetrics m = st.sched.metrics();
  EXPECT_EQ(m.prefix_cache_queries, 64);
  EXPECT_EQ(m.prefix_cache_hits, 28);
  EXPECT_EQ(st.snapshots.num_pinned(), 0);
}

TEST(PrefixCache, PromptLogprobsSkipTheLookupAndAskForEveryPromptRow) {
  StackConfig c;
  c.max_num_batched_tokens = 12;  // a 32-token prompt in chunks of 12, 12, 8
  Stack st(c);
  st.sched.add_request("a", iota_tokens(32), 1);
  run_to_completion(st);
  const SchedulerMetrics before = st.sched.metrics();

  Request& r = st.sched.add_request("b", iota_tokens(32), 2);
  r.prompt_logprobs_pending = true;
  std::vector<int> starts, rows;
  while (st.sched.has_unfinished_requests()) {
    const SchedulerOutput& out = st.sched.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    const ScheduledRequest& s = out.scheduled[0];
    if (starts.empty()) EXPECT_EQ(s.state_init, StateInit::kZero) << "no prefix hit although one exists";
    starts.push_back(s.start_position);
    rows.push_back(s.prompt_logit_rows);
    st.sched.update_from_output(testing::run_fake_model(out));
  }
  // Rows of positions 0..30 score tokens 1..31; the last prompt row (31) samples and is not one.
  EXPECT_EQ(starts, (std::vector<int>{0, 12, 24, 32}));
  EXPECT_EQ(rows, (std::vector<int>{12, 12, 7, 0}));
  const SchedulerMetrics after = st.sched.metrics();
  EXPECT_EQ(after.prefix_cache_queries, before.prefix_cache_queries) << "a skipped lookup is no query";
  EXPECT_EQ(after.prefix_cache_hits, before.prefix_cache_hits);

  // It still filled the cache: the same prompt without prompt logprobs hits.
  st.sched.add_request("c", iota_tokens(32), 1);
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].start_position, 28);
  EXPECT_EQ(out.scheduled[0].prompt_logit_rows, 0);
  st.sched.update_from_output(testing::run_fake_model(out));
}

TEST(PrefixCache, PromptLogprobsAreDoneOnceThePromptRan) {
  Stack st(StackConfig{});
  Request& r = st.sched.add_request("a", iota_tokens(10), 3);
  r.prompt_logprobs_pending = true;
  const SchedulerOutput& out = st.sched.schedule();
  EXPECT_EQ(out.scheduled.at(0).prompt_logit_rows, 9);
  st.sched.update_from_output(testing::run_fake_model(out));
  // A recompute after a later preemption neither needs the rows nor skips the cache.
  EXPECT_FALSE(r.prompt_logprobs_pending);
  run_to_completion(st);
}

TEST(PrefixCache, ContinuationHitsAtThePreviousSequenceEnd) {
  Stack st(StackConfig{});
  st.sched.add_request("turn1", iota_tokens(30), 7);
  run_to_completion(st);
  // turn1 = 30 prompt + 7 output tokens, 36 of them computed: its tail snapshot is at 36 (and the
  // prompt-end snapshot at 28).
  EXPECT_EQ(st.snapshots.num_committed(), 2);
  // The next turn's prompt is turn1's whole conversation plus a new user message.
  Request probe("probe", iota_tokens(30), 8, 0);
  for (int i = 0; i < 7; ++i) probe.append_output_token(testing::fake_token(probe));
  std::vector<std::int32_t> history(probe.all_token_ids().begin(), probe.all_token_ids().end());
  for (int i = 0; i < 9; ++i) history.push_back(5000 + i);  // new user message
  st.sched.add_request("turn2", history, 1);
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].start_position, 36);
  EXPECT_EQ(out.scheduled[0].state_init, StateInit::kRestore);
  st.sched.update_from_output(testing::run_fake_model(out));
}

TEST(PrefixCache, SharedPrefixHitGranularityIsTheSnapshotInterval) {
  for (int interval : {0, 8}) {
    StackConfig c;
    c.snapshot_interval = interval;
    Stack st(c);
    st.sched.add_request("a", iota_tokens(40), 1);
    run_to_completion(st);
    // Same first 22 tokens, then different: 5 KV blocks (20 tokens) are cached.
    auto p = iota_tokens(22);
    for (int i = 0; i < 10; ++i) p.push_back(9000 + i);
    st.sched.add_request("b", p, 1);
    const SchedulerOutput& out = st.sched.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    // Without interval snapshots there is no state to restore inside the prefix: a miss. With an
    // interval of 8, the last snapshot inside the 20 cached tokens is at 16.
    EXPECT_EQ(out.scheduled[0].start_position, interval == 0 ? 0 : 16) << interval;
    EXPECT_EQ(out.scheduled[0].state_init, interval == 0 ? StateInit::kZero : StateInit::kRestore);
    st.sched.update_from_output(testing::run_fake_model(out));
  }
}

TEST(PrefixCache, PureAttentionModelHitsAnyCachedBlock) {
  StackConfig c;
  c.num_snapshots = 0;  // no GDN layers
  Stack st(c);
  st.sched.add_request("a", iota_tokens(40), 1);
  run_to_completion(st);
  auto p = iota_tokens(22);
  p.push_back(77);
  st.sched.add_request("b", p, 1);
  const SchedulerOutput& out = st.sched.schedule();
  EXPECT_EQ(out.scheduled[0].start_position, 20);
  st.sched.update_from_output(testing::run_fake_model(out));
}

TEST(PrefixCache, SnapshotsAreTakenInsideChunksWithoutShorteningThem) {
  StackConfig c;
  c.snapshot_interval = 8;
  c.max_num_batched_tokens = 13;  // chunks deliberately not aligned to 8
  Stack st(c);
  st.sched.add_request("a", iota_tokens(30), 1);
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 13);
  const auto points = out.snapshots_of(out.scheduled[0]);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].after_tokens, 8);
  st.sched.update_from_output(testing::run_fake_model(out));
  const SchedulerOutput& out2 = st.sched.schedule();  // [13, 26): boundary 16 and 24
  const auto points2 = out2.snapshots_of(out2.scheduled[0]);
  ASSERT_EQ(points2.size(), 2u);
  EXPECT_EQ(points2[0].after_tokens, 3);
  EXPECT_EQ(points2[1].after_tokens, 11);
  st.sched.update_from_output(testing::run_fake_model(out2));
}

TEST(PrefixCache, DisabledMeansNoHitsNoSnapshots) {
  StackConfig c;
  c.prefix_caching = false;
  Stack st(c);
  st.sched.add_request("a", iota_tokens(32), 1);
  run_to_completion(st);
  st.sched.add_request("b", iota_tokens(32), 1);
  const SchedulerOutput& out = st.sched.schedule();
  EXPECT_EQ(out.scheduled[0].start_position, 0);
  EXPECT_TRUE(out.snapshot_points.empty());
  st.sched.update_from_output(testing::run_fake_model(out));
  EXPECT_EQ(st.sched.metrics().prefix_cache_queries, 0);
}

}  // namespace
}  // namespace fp4serve::engine
