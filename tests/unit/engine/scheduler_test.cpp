// Scheduler behaviour without a model (after vLLM tests/v1/core/test_scheduler.py).
#include "engine/scheduler.h"

#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "engine/engine_error.h"
#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::iota_tokens;
using testing::run_fake_model;
using testing::Stack;
using testing::StackConfig;
using testing::step;

int scheduled_tokens_of(const SchedulerOutput& out, const std::string& id) {
  for (const auto& s : out.scheduled)
    if (s.request->id() == id) return s.num_scheduled_tokens;
  return 0;
}

TEST(Scheduler, SplitsTheTokenBudgetRunningFirst) {
  StackConfig c;
  c.max_num_batched_tokens = 100;
  c.num_blocks = 128;
  Stack st(c);
  st.sched.add_request("a", iota_tokens(60, 0), 10);
  st.sched.add_request("b", iota_tokens(60, 100), 10);
  st.sched.add_request("c", iota_tokens(60, 200), 10);
  const SchedulerOutput& o1 = st.sched.schedule();
  EXPECT_EQ(scheduled_tokens_of(o1, "a"), 60);
  EXPECT_EQ(scheduled_tokens_of(o1, "b"), 40);  // chunked into what is left
  EXPECT_EQ(scheduled_tokens_of(o1, "c"), 0);
  EXPECT_EQ(o1.total_num_scheduled_tokens, 100);
  EXPECT_TRUE(o1.scheduled[0].needs_logits);
  EXPECT_FALSE(o1.scheduled[1].needs_logits);
  // Block accounting: a holds 60/4 blocks, b 40/4, nothing else is taken.
  EXPECT_EQ(o1.scheduled[0].block_table.size(), 15u);
  EXPECT_EQ(o1.scheduled[1].block_table.size(), 10u);
  EXPECT_EQ(st.kv.pool().num_free_blocks(), 128 - 25);
  EXPECT_DOUBLE_EQ(st.sched.metrics().kv_cache_usage, 25.0 / 128.0);
  st.sched.update_from_output(run_fake_model(o1));
  EXPECT_EQ(st.sched.find("a")->num_output_tokens(), 1);
  EXPECT_EQ(st.sched.find("b")->num_output_tokens(), 0);  // partial prefill: nothing sampled

  const SchedulerOutput& o2 = st.sched.schedule();
  EXPECT_EQ(scheduled_tokens_of(o2, "a"), 1);   // decode
  EXPECT_EQ(scheduled_tokens_of(o2, "b"), 20);  // rest of its prompt
  EXPECT_EQ(scheduled_tokens_of(o2, "c"), 60);
  EXPECT_EQ(o2.scheduled[0].request->id(), "a");  // running first, in order
  EXPECT_EQ(o2.scheduled[2].request->id(), "c");
  EXPECT_EQ(o2.scheduled[2].state_init, StateInit::kZero);
  EXPECT_EQ(o2.scheduled[0].state_init, StateInit::kContinue);
  st.sched.update_from_output(run_fake_model(o2));
}

TEST(Scheduler, LongPromptIsChunkedAndContinues) {
  StackConfig c;
  c.max_num_batched_tokens = 16;
  c.num_blocks = 128;
  c.max_model_len = 256;
  Stack st(c);
  st.sched.add_request("long", iota_tokens(40), 2);
  std::vector<int> starts, sizes;
  for (int i = 0; i < 3; ++i) {
    const SchedulerOutput& o = st.sched.schedule();
    ASSERT_EQ(o.scheduled.size(), 1u);
    starts.push_back(o.scheduled[0].start_position);
    sizes.push_back(o.scheduled[0].num_scheduled_tokens);
    EXPECT_EQ(o.scheduled[0].needs_logits, i == 2);
    EXPECT_EQ(o.scheduled[0].state_init, i == 0 ? StateInit::kZero : StateInit::kContinue);
    EXPECT_EQ(o.scheduled[0].block_table.size(), static_cast<std::size_t>((starts.back() + sizes.back() + 3) / 4));
    st.sched.update_from_output(run_fake_model(o));
  }
  EXPECT_EQ(starts, (std::vector<int>{0, 16, 32}));
  EXPECT_EQ(sizes, (std::vector<int>{16, 16, 8}));
  EXPECT_EQ(st.sched.find("long")->num_output_tokens(), 1);
}

TEST(Scheduler, LongPrefillThresholdCapsChunks) {
  StackConfig c;
  c.max_num_batched_tokens = 64;
  c.long_prefill_token_threshold = 10;
  Stack st(c);
  st.sched.add_request("a", iota_tokens(25), 1);
  const SchedulerOutput& o = st.sched.schedule();
  EXPECT_EQ(o.scheduled[0].num_scheduled_tokens, 10);
  st.sched.update_from_output(run_fake_model(o));
}

TEST(Scheduler, AtMostMaxNumSeqsRun) {
  StackConfig c;
  c.max_num_seqs = 2;
  c.num_slots = 2;
  Stack st(c);
  for (int i = 0; i < 3; ++i) st.sched.add_request("r" + std::to_string(i), iota_tokens(5, 100 * i), 3);
  const SchedulerOutput& o = st.sched.schedule();
  EXPECT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(st.sched.num_running(), 2);
  EXPECT_EQ(st.sched.num_waiting(), 1);
  EXPECT_EQ(st.sched.metrics().state_slots_in_use, 2);
  st.sched.update_from_output(run_fake_model(o));
}

TEST(Scheduler, RefusesMoreSeqsThanSlotsAndTooSmallKvCache) {
  StackConfig c;
  c.max_num_seqs = 9;
  c.num_slots = 8;
  EXPECT_THROW(Stack{c}, EngineConfigError);
  StackConfig d;
  d.num_blocks = 10;  // 128 tokens need 32 blocks of 4
  EXPECT_THROW(Stack{d}, EngineConfigError);
}

TEST(Scheduler, AdmitsFcfsWithHeadOfLineBlocking) {
  StackConfig c;
  c.num_blocks = 31;
  c.max_model_len = 64;
  c.max_num_batched_tokens = 256;
  Stack st(c);
  st.sched.add_request("a", iota_tokens(60, 0), 1);      // 15 blocks
  st.sched.add_request("big", iota_tokens(64, 100), 1);  // 16 blocks
  st.sched.add_request("small", iota_tokens(4, 200), 1); // 1 block: no room left
  const SchedulerOutput& o = st.sched.schedule();
  ASSERT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(o.scheduled[0].request->id(), "a");
  EXPECT_EQ(o.scheduled[1].request->id(), "big");
  st.sched.update_from_output(run_fake_model(o));
  st.sched.add_request("late", iota_tokens(4, 300), 1);
  // a and big finished (max_tokens 1): arrival order is kept for the rest.
  const SchedulerOutput& o2 = st.sched.schedule();
  ASSERT_EQ(o2.scheduled.size(), 2u);
  EXPECT_EQ(o2.scheduled[0].request->id(), "small");
  EXPECT_EQ(o2.scheduled[1].request->id(), "late");
  st.sched.update_from_output(run_fake_model(o2));

  // Head of line: the first waiting request does not fit, so the one behind it, which would fit,
  // is not admitted either (vLLM breaks out of the waiting loop).
  Stack st2(c);
  st2.sched.add_request("hog", iota_tokens(60, 0), 3);
  step(st2);  // 15 blocks held, 61 tokens
  st2.sched.add_request("big", iota_tokens(64, 100), 1);
  st2.sched.add_request("small", iota_tokens(4, 200), 1);
  const SchedulerOutput& o3 = st2.sched.schedule();  // hog's decode takes a 16th block: 15 free
  EXPECT_EQ(scheduled_tokens_of(o3, "hog"), 1);
  EXPECT_EQ(scheduled_tokens_of(o3, "big"), 0);
  EXPECT_EQ(scheduled_tokens_of(o3, "small"), 0);
  EXPECT_EQ(st2.sched.waiting().front()->id(), "big");
  EXPECT_EQ(st2.kv.pool().num_free_blocks(), 15);
  st2.sched.update_from_output(run_fake_model(o3));
}

// The expected output of a request under the fake model, computed without any scheduler.
std::vector<std::int32_t> expected_output(const std::vector<std::int32_t>& prompt, int max_tokens) {
  Request r("x", prompt, max_tokens, 0);
  for (int i = 0; i < max_tokens; ++i) r.append_output_token(testing::fake_token(r));
  return {r.output_token_ids().begin(), r.output_token_ids().end()};
}

TEST(Scheduler, PreemptsTheNewestAndResumesWithTheSameTokens) {
  StackConfig c;
  c.block_size = 4;
  c.num_blocks = 6;
  c.max_model_len = 24;
  c.prefix_caching = false;  // pure recompute: the resume re-prefills everything
  Stack st(c);
  st.sched.add_request("old", iota_tokens(8, 0), 12);
  st.sched.add_request("new", iota_tokens(8, 100), 12);
  std::map<std::string, std::vector<std::int32_t>> outputs;
  bool saw_preemption = false, saw_resume = false;
  for (int i = 0; i < 100 && st.sched.has_unfinished_requests(); ++i) {
    const SchedulerOutput& o = st.sched.schedule();
    if (o.num_preempted > 0 && !saw_preemption) {
      saw_preemption = true;
      const Request* victim = st.sched.find("new");
      EXPECT_EQ(victim->status(), RequestStatus::kPreempted);
      EXPECT_EQ(victim->num_computed_tokens, 0);
      EXPECT_EQ(victim->num_preemptions, 1);
      EXPECT_EQ(st.sched.waiting().front(), victim);  // at the front of the waiting queue
      EXPECT_EQ(st.sched.find("old")->status(), RequestStatus::kRunning);
      EXPECT_EQ(scheduled_tokens_of(o, "old"), 1);
      EXPECT_EQ(st.sched.metrics().state_slots_in_use, 1);
    }
    for (const auto& s : o.scheduled) {
      if (s.resumed) {
        saw_resume = true;
        EXPECT_EQ(s.request->id(), "new");
        EXPECT_EQ(s.start_position, 0);
        EXPECT_EQ(s.state_init, StateInit::kZero);
        // Prompt and everything generated before the preemption are recomputed.
        EXPECT_EQ(s.num_scheduled_tokens, s.request->num_tokens());
        EXPECT_GT(s.request->num_output_tokens(), 0);
        EXPECT_TRUE(s.needs_logits);
      }
    }
    for (const StepResult& r : st.sched.update_from_output(run_fake_model(o)))
      outputs[r.request->id()].push_back(r.token);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_TRUE(saw_resume);
  EXPECT_EQ(st.sched.metrics().num_preemptions, 1);
  EXPECT_EQ(outputs["old"], expected_output(iota_tokens(8, 0), 12));
  EXPECT_EQ(outputs["new"], expected_output(iota_tokens(8, 100), 12));
  EXPECT_EQ(st.kv.pool().num_free_blocks(), 6);
}

TEST(Scheduler, PreemptedRequestResumesFromItsOwnPrefixAndSnapshot) {
  StackConfig c;
  c.block_size = 4;
  c.num_blocks = 6;
  c.max_model_len = 24;
  Stack st(c);
  st.sched.add_request("old", iota_tokens(8, 0), 12);
  st.sched.add_request("new", iota_tokens(8, 100), 12);
  testing::ShadowModel model(c.num_blocks, c.block_size, c.num_slots, c.num_snapshots);
  int resumed_start = -1;
  std::map<std::string, std::vector<std::int32_t>> outputs;
  for (int i = 0; i < 100 && st.sched.has_unfinished_requests(); ++i) {
    const SchedulerOutput& o = st.sched.schedule();
    for (const auto& s : o.scheduled)
      if (s.resumed) {
        resumed_start = s.start_position;
        EXPECT_EQ(s.state_init, resumed_start > 0 ? StateInit::kRestore : StateInit::kZero);
      }
    const std::vector<std::int32_t> sampled = model.run(o);
    ASSERT_EQ(model.error(), "");
    for (const StepResult& r : st.sched.update_from_output(sampled))
      outputs[r.request->id()].push_back(r.token);
  }
  // "new" had 12 tokens computed, with its tail snapshot at 12; the preempting allocation took its
  // last freed block (its tail is evicted first), so blocks 0-1 remain: the snapshot at the prompt
  // end (4) is the longest restorable prefix.
  EXPECT_EQ(resumed_start, 4);
  EXPECT_EQ(outputs["new"], expected_output(iota_tokens(8, 100), 12));
  EXPECT_EQ(outputs["old"], expected_output(iota_tokens(8, 0), 12));
}

TEST(Scheduler, StopCheckerFinishesAndLengthComesFirst) {
  StackConfig c;
  // Stop as soon as an output token is even; but max_tokens 1 reports "length" even then (vLLM order).
  Stack st(c, [](const Request& r) { return r.output_token_ids().back() % 2 == 0; });
  st.sched.add_request("one", iota_tokens(3, 0), 1);
  st.sched.add_request("many", iota_tokens(3, 0), 50);
  std::map<std::string, StepResult> last;
  for (int i = 0; i < 100 && st.sched.has_unfinished_requests(); ++i)
    for (const StepResult& r : step(st)) {
      last[r.request->id()] = r;
      if (r.finished) {
        if (r.request->id() == "one") EXPECT_EQ(r.status, RequestStatus::kFinishedLength);
        else {
          EXPECT_EQ(r.status, RequestStatus::kFinishedStopped);
          EXPECT_EQ(r.token % 2, 0);
        }
      }
    }
  EXPECT_TRUE(last["one"].finished);
  EXPECT_TRUE(last["many"].finished);
}

TEST(Scheduler, MaxModelLenFinishesWithLength) {
  StackConfig c;
  c.max_model_len = 16;
  c.num_blocks = 8;
  Stack st(c);
  st.sched.add_request("a", iota_tokens(10), 100);
  int produced = 0;
  for (int i = 0; i < 100 && st.sched.has_unfinished_requests(); ++i)
    for (const StepResult& r : step(st)) {
      ++produced;
      if (r.finished) EXPECT_EQ(r.status, RequestStatus::kFinishedLength);
    }
  EXPECT_EQ(produced, 6);  // 10 + 6 = max_model_len
}

TEST(Scheduler, AbortInEveryStateFreesEverything) {
  StackConfig c;
  c.max_num_seqs = 2;
  c.num_slots = 2;
  Stack st(c);
  st.sched.add_request("running", iota_tokens(9, 0), 20);
  st.sched.add_request("prefilling", iota_tokens(90, 100), 20);
  st.sched.add_request("waiting", iota_tokens(5, 300), 20);
  step(st);
  EXPECT_EQ(st.sched.find("prefilling")->num_computed_tokens, 55);
  EXPECT_TRUE(st.sched.abort_request("waiting"));
  EXPECT_TRUE(st.sched.abort_request("prefilling"));
  EXPECT_FALSE(st.sched.abort_request("prefilling"));
  EXPECT_FALSE(st.sched.abort_request("nobody"));
  // Abort during a step is deferred until its update.
  const SchedulerOutput& o = st.sched.schedule();
  EXPECT_TRUE(st.sched.abort_request("running"));
  EXPECT_EQ(st.sched.num_running(), 1);
  st.sched.update_from_output(run_fake_model(o));
  EXPECT_EQ(st.sched.num_running(), 0);
  EXPECT_FALSE(st.sched.has_unfinished_requests());
  EXPECT_EQ(st.kv.pool().num_free_blocks(), c.num_blocks);
  EXPECT_EQ(st.slots.num_free(), 2);
  EXPECT_EQ(st.snapshots.num_pending(), 0);
}

TEST(Scheduler, CallOrderIsChecked) {
  Stack st(StackConfig{});
  EXPECT_THROW(st.sched.update_from_output({}), EngineLogicError);
  st.sched.add_request("a", iota_tokens(3), 1);
  EXPECT_THROW(st.sched.add_request("a", iota_tokens(3), 1), EngineLogicError);
  EXPECT_THROW(st.sched.add_request("huge", iota_tokens(129), 1), EngineLogicError);
  st.sched.schedule();
  EXPECT_THROW(st.sched.schedule(), EngineLogicError);
  EXPECT_THROW(st.sched.update_from_output({}), EngineLogicError);  // wrong count
}

// 1,000 random requests, random lengths, random cancellations, a tiny KV pool and snapshot store:
// nothing leaks and every finished request has exactly the tokens the fake model gives it alone.
TEST(Scheduler, RandomizedNoLeaksAndExactOutputs) {
  struct Variant {
    bool caching;
    int budget;
  };
  for (const Variant v : {Variant{true, 48}, Variant{false, 48}, Variant{true, 16}, Variant{true, 4096}}) {
    const bool caching = v.caching;
    SCOPED_TRACE(::testing::Message() << "caching " << caching << " budget " << v.budget);
    StackConfig c;
    c.block_size = 4;
    c.num_blocks = 40;
    c.max_model_len = 96;
    c.max_num_batched_tokens = v.budget;
    c.max_num_seqs = 8;
    c.num_slots = 8;
    c.num_snapshots = 12;
    c.snapshot_interval = 8;
    c.prefix_caching = caching;
    constexpr std::int32_t kStopToken = 13;
    Stack st(c, [](const Request& r) { return r.output_token_ids().back() == kStopToken; });
    testing::ShadowModel model(c.num_blocks, c.block_size, c.num_slots, c.num_snapshots);
    std::mt19937 rng(static_cast<unsigned>(v.budget) + (caching ? 1234u : 99u));
    struct Spec {
      std::vector<std::int32_t> prompt;
      int max_tokens;
    };
    std::map<std::string, Spec> specs;
    std::map<std::string, std::vector<std::int32_t>> outputs;
    std::map<std::string, RequestStatus> final_status;
    std::set<std::string> live;
    int added = 0, aborted = 0;
    for (int it = 0; it < 200000 && (added < 1000 || st.sched.has_unfinished_requests()); ++it) {
      for (int k = static_cast<int>(rng() % 3); k > 0 && added < 1000; --k) {
        const std::string id = "r" + std::to_string(added++);
        // Shared prefixes (few distinct first tokens) so prefix hits and snapshots get exercised.
        const int len = 1 + static_cast<int>(rng() % 60);
        std::vector<std::int32_t> prompt = iota_tokens(len, static_cast<int>(rng() % 4) * 100);
        if (rng() % 2) prompt.back() = static_cast<std::int32_t>(rng() % 1000);
        const int max_tokens = 1 + static_cast<int>(rng() % 30);
        specs[id] = Spec{prompt, max_tokens};
        st.sched.add_request(id, prompt, max_tokens);
        live.insert(id);
      }
      if (!live.empty() && rng() % 10 == 0) {
        auto pick = live.begin();
        std::advance(pick, static_cast<long>(rng() % live.size()));
        ASSERT_TRUE(st.sched.abort_request(*pick));
        final_status[*pick] = RequestStatus::kFinishedAborted;
        live.erase(pick);
        ++aborted;
      }
      const SchedulerOutput& o = st.sched.schedule();
      ASSERT_LE(o.total_num_scheduled_tokens, c.max_num_batched_tokens);
      ASSERT_LE(st.sched.num_running(), c.max_num_seqs);
      for (const auto& s : o.scheduled) {
        ASSERT_GE(s.state_slot, 0);
        ASSERT_GE(static_cast<int>(s.block_table.size()) * c.block_size,
                  s.start_position + s.num_scheduled_tokens);
      }
      if (!live.empty() && rng() % 20 == 0) {
        // Cancel while the step is "on the model": deferred to the end of update_from_output.
        auto pick = live.begin();
        std::advance(pick, static_cast<long>(rng() % live.size()));
        ASSERT_TRUE(st.sched.abort_request(*pick));
        final_status[*pick] = RequestStatus::kFinishedAborted;  // unless it finishes this step
        live.erase(pick);
        ++aborted;
      }
      const std::vector<std::int32_t> sampled = model.run(o);
      ASSERT_EQ(model.error(), "") << "step " << it;
      for (const StepResult& r : st.sched.update_from_output(sampled)) {
        outputs[r.request->id()].push_back(r.token);
        if (r.finished) {
          final_status[r.request->id()] = r.status;
          live.erase(r.request->id());
        }
      }
    }
    ASSERT_EQ(added, 1000);
    ASSERT_FALSE(st.sched.has_unfinished_requests());
    EXPECT_GT(aborted, 10);
    const SchedulerMetrics m = st.sched.metrics();
    EXPECT_GT(m.num_preemptions, 0);
    if (caching) {
      EXPECT_GT(m.prefix_cache_hits, 0);
      EXPECT_GT(m.snapshot_evictions, 0);
    }
    // No leaks: every block free with ref count 0, every slot free, no snapshot pending or pinned.
    EXPECT_EQ(st.kv.pool().num_free_blocks(), c.num_blocks);
    for (int b = 0; b < c.num_blocks; ++b) EXPECT_EQ(st.kv.pool().ref_count(b), 0);
    EXPECT_EQ(st.slots.num_free(), c.num_slots);
    EXPECT_EQ(st.snapshots.num_pending(), 0);
    EXPECT_EQ(st.snapshots.num_pinned(), 0);
    EXPECT_EQ(st.snapshots.num_free() + st.snapshots.num_committed(), c.num_snapshots);
    EXPECT_DOUBLE_EQ(m.kv_cache_usage, 0.0);
    // Outputs: exactly what the model gives the request alone, ending as the status says.
    int finished_ok = 0;
    for (const auto& [id, spec] : specs) {
      ASSERT_TRUE(final_status.count(id)) << id;
      const RequestStatus status = final_status[id];
      const auto& out = outputs[id];
      const auto full = expected_output(spec.prompt, spec.max_tokens);
      ASSERT_LE(out.size(), full.size()) << id;
      EXPECT_TRUE(std::equal(out.begin(), out.end(), full.begin())) << id;
      if (status == RequestStatus::kFinishedAborted) continue;
      ++finished_ok;
      ASSERT_FALSE(out.empty()) << id;
      if (status == RequestStatus::kFinishedLength) {
        EXPECT_EQ(static_cast<int>(out.size()), spec.max_tokens) << id;
        EXPECT_EQ(std::count(out.begin(), out.end() - 1, kStopToken), 0) << id;
      } else {
        ASSERT_EQ(status, RequestStatus::kFinishedStopped) << id;
        EXPECT_EQ(out.back(), kStopToken) << id;
        EXPECT_EQ(std::count(out.begin(), out.end(), kStopToken), 1) << id;
      }
    }
    EXPECT_GT(finished_ok, 500);
    ::testing::Test::RecordProperty(caching ? "preemptions_cached" : "preemptions_uncached",
                                    static_cast<int>(m.num_preemptions));
    if (caching && v.budget == 48) {
      ::testing::Test::RecordProperty("hit_tokens", static_cast<int>(m.prefix_cache_hits));
      ::testing::Test::RecordProperty("queried_tokens", static_cast<int>(m.prefix_cache_queries));
      ::testing::Test::RecordProperty("snapshot_evictions", static_cast<int>(m.snapshot_evictions));
      ::testing::Test::RecordProperty("aborted", aborted);
    }
  }
}

}  // namespace
}  // namespace fp4serve::engine
