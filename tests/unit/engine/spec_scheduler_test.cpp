// Speculative decoding in the scheduler, without a model: drafts are scheduled within every limit,
// rejected positions are given back (KV blocks, num_computed_tokens), a finish inside the accepted
// drafts drops the rest, and a shadow model that follows the scheduler's instructions exactly (KV
// writes through the block table, a GDN state hash with rollback entries, snapshot copies in-step and
// after verification) shows that outputs, the KV of every cached block, every GDN snapshot and the
// prefix cache's contents equal a run without drafts.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine_error.h"
#include "engine_test_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

// The fake target model: the token after `length` tokens of r (fake_token at that length).
std::int32_t target_token(const Request& r, int length) {
  return static_cast<std::int32_t>((r.prompt_token_ids()[0] * 31 + length * 7) % 50);
}

int cdiv(int a, int b) { return (a + b - 1) / b; }

// ShadowModel (engine_test_util.h) extended to verify steps: it runs s.tokens, keeps the state after
// each of a verify request's first d tokens as a rollback entry, samples one row per logits row, and
// after the update applies the scheduler's VerifyOutcomes as the model runner does.
class ShadowSpecModel {
 public:
  ShadowSpecModel(int num_blocks, int block_size, int num_slots, int num_snapshots)
      : bs_(block_size),
        kv_(static_cast<std::size_t>(num_blocks) * block_size, -1),
        slots_(static_cast<std::size_t>(num_slots), kPoison),
        snaps_(static_cast<std::size_t>(num_snapshots > 0 ? num_snapshots : 1), kPoison) {}

  // Per scheduled request, the sampled token of each of its logits rows.
  std::vector<std::vector<std::int32_t>> run(const SchedulerOutput& out) {
    std::vector<std::vector<std::int32_t>> rows(out.scheduled.size());
    rollback_.assign(out.scheduled.size(), {});
    for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
      const ScheduledRequest& s = out.scheduled[i];
      const Request& r = *s.request;
      std::uint64_t& slot = slots_.at(static_cast<std::size_t>(s.state_slot));
      if (s.state_init == StateInit::kZero) slot = 0;
      else if (s.state_init == StateInit::kRestore) slot = snaps_.at(static_cast<std::size_t>(s.restore_snapshot_id));
      if (slot != ShadowModel::state_after(r, s.start_position)) fail(r, "GDN state differs from a fresh run");
      for (int p = 0; p < s.start_position; ++p)
        if (kv_at(s.block_table, p) != r.all_token_ids()[static_cast<std::size_t>(p)]) {
          fail(r, "KV position " + std::to_string(p) + " holds the wrong token");
          break;
        }
      if (static_cast<int>(s.tokens.size()) != s.num_scheduled_tokens) fail(r, "token span of the wrong size");
      const auto points = out.snapshots_of(s);
      std::size_t next_point = 0;
      for (int j = 0; j < s.num_scheduled_tokens; ++j) {
        const std::int32_t t = s.tokens[static_cast<std::size_t>(j)];
        kv_at(s.block_table, s.start_position + j) = t;
        slot = ShadowModel::mix(slot, t);
        while (next_point < points.size() && points[next_point].after_tokens == j + 1)
          snaps_.at(static_cast<std::size_t>(points[next_point++].snapshot_id)) = slot;
        if (j < s.num_draft_tokens) rollback_[i].push_back(slot);
      }
      if (next_point != points.size()) fail(r, "snapshot point outside the chunk");
      // Row j of a sampling request scores the token after start + n - rows + 1 + j tokens.
      const int num_rows = s.num_logit_rows();
      for (int j = 0; j < num_rows; ++j)
        rows[i].push_back(target_token(r, s.start_position + s.num_scheduled_tokens - num_rows + 1 + j));
    }
    return rows;
  }

  void apply(const SchedulerOutput& out) {
    for (const VerifyOutcome& v : out.verify_outcomes) {
      const ScheduledRequest& s = out.scheduled[static_cast<std::size_t>(v.scheduled_index)];
      const auto& entries = rollback_[static_cast<std::size_t>(v.scheduled_index)];
      std::uint64_t& slot = slots_.at(static_cast<std::size_t>(s.state_slot));
      for (const SnapshotPoint& p : out.snapshots_of(v))
        snaps_.at(static_cast<std::size_t>(p.snapshot_id)) =
            p.after_tokens <= s.num_draft_tokens ? entries.at(static_cast<std::size_t>(p.after_tokens - 1)) : slot;
      if (v.kept_tokens <= s.num_draft_tokens) slot = entries.at(static_cast<std::size_t>(v.kept_tokens - 1));
    }
  }

  std::int32_t kv(std::int32_t block, int offset) const {
    return kv_.at(static_cast<std::size_t>(block) * bs_ + offset);
  }
  std::uint64_t snapshot(int id) const { return snaps_.at(static_cast<std::size_t>(id)); }
  std::uint64_t slot(int id) const { return slots_.at(static_cast<std::size_t>(id)); }
  const std::string& error() const { return error_; }

 private:
  static constexpr std::uint64_t kPoison = 0xDEADull;
  std::int32_t& kv_at(std::span<const std::int32_t> table, int p) {
    return kv_.at(static_cast<std::size_t>(table[static_cast<std::size_t>(p / bs_)]) * bs_ + p % bs_);
  }
  void fail(const Request& r, const std::string& what) {
    if (error_.empty()) error_ = "request " + r.id() + ": " + what;
  }
  int bs_;
  std::vector<std::int32_t> kv_;
  std::vector<std::uint64_t> slots_;
  std::vector<std::uint64_t> snaps_;
  std::vector<std::vector<std::uint64_t>> rollback_;
  std::string error_;
};

// The engine's acceptance rule (StepSampling::accept) on the shadow's rows.
std::vector<std::vector<std::int32_t>> accept(const SchedulerOutput& out,
                                              const std::vector<std::vector<std::int32_t>>& rows) {
  std::vector<std::vector<std::int32_t>> emitted(out.scheduled.size());
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      emitted[i].push_back(rows[i][j]);
      if (static_cast<int>(j) == s.num_draft_tokens || rows[i][j] != s.tokens[j + 1]) break;
    }
  }
  return emitted;
}

const std::vector<StepResult>& update(Stack& st, const std::vector<std::vector<std::int32_t>>& emitted) {
  std::vector<std::span<const std::int32_t>> spans(emitted.begin(), emitted.end());
  return st.sched.update_from_emitted(spans);
}

// Drafts for a request in decode: the true continuation, each token wrong with probability p_wrong.
using Proposer = std::function<void(Request&)>;
Proposer continuation_drafts(int k, double p_wrong, unsigned seed) {
  auto rng = std::make_shared<std::mt19937>(seed);
  return [=](Request& r) {
    std::bernoulli_distribution wrong(p_wrong);
    std::uniform_int_distribution<int> len(0, k);
    const int n = len(*rng);
    for (int j = 0; j < n; ++j) {
      const std::int32_t t = target_token(r, r.num_tokens() + j);
      r.draft_token_ids.push_back(wrong(*rng) ? (t + 1) % 50 : t);
    }
  };
}

struct RunOutcome {
  std::map<std::string, std::vector<std::int32_t>> outputs;
  std::map<std::string, std::string> finish;
  int kept_snapshot_points = 0;  // snapshots taken inside accepted drafts
  int rejections = 0;            // verify steps that kept fewer tokens than they ran
};

// Runs every request to the end; after each step the proposer fills the drafts of requests in decode.
RunOutcome run_to_end(Stack& st, ShadowSpecModel& m, const Proposer& propose) {
  RunOutcome o;
  const int bs = st.kv.block_size();
  for (int steps = 0; st.sched.has_unfinished_requests(); ++steps) {
    if (steps > 10000) {
      ADD_FAILURE() << "no progress";
      break;
    }
    const SchedulerOutput& out = st.sched.schedule();
    const auto rows = m.run(out);
    const auto& results = update(st, accept(out, rows));
    m.apply(out);
    o.kept_snapshot_points += static_cast<int>(out.kept_snapshot_points.size());
    for (const VerifyOutcome& v : out.verify_outcomes)
      o.rejections += v.kept_tokens < 1 + out.scheduled[static_cast<std::size_t>(v.scheduled_index)].num_draft_tokens;
    for (const StepResult& r : results) {
      o.outputs[r.request->id()].push_back(r.token);
      if (r.finished) o.finish[r.request->id()] = to_string(r.status);
    }
    for (Request* r : st.sched.running()) {
      // The KV manager holds exactly the blocks of the computed positions: rejected ones are gone.
      EXPECT_EQ(static_cast<int>(r->res.block_ids.size()), cdiv(r->num_computed_tokens, bs)) << r->id();
      if (propose && r->num_computed_tokens == r->num_tokens() - 1) propose(*r);
    }
  }
  return o;
}

StackConfig spec_stack(int k) {
  StackConfig c;
  c.block_size = 4;
  c.num_blocks = 512;
  c.max_model_len = 96;
  c.max_num_batched_tokens = 23;
  c.max_num_seqs = 8;
  c.num_slots = 8;
  c.num_snapshots = 256;
  c.snapshot_interval = 8;
  c.num_speculative_tokens = k;
  return c;
}

void add_requests(Stack& st) {
  st.sched.add_request("a", iota_tokens(13, 100), 40);
  st.sched.add_request("b", iota_tokens(5, 300), 60);
  st.sched.add_request("c", iota_tokens(30, 100), 25);  // shares a's first 13 tokens
  st.sched.add_request("d", iota_tokens(70, 700), 60);  // runs into max_model_len
  st.sched.add_request("e", iota_tokens(8, 900), 3);
  st.sched.add_request("f", iota_tokens(21, 41), 50);   // stops on token 13
}

// Stops a request on token 13 once it has two tokens (a stop token inside accepted drafts).
bool stop_on_13(const Request& r) { return r.num_output_tokens() >= 2 && r.output_token_ids().back() == 13; }

std::int64_t registered_and_committed(Stack& st, ShadowSpecModel& m, const RunOutcome& o,
                                      const std::map<std::string, std::vector<std::int32_t>>& prompts,
                                      std::vector<std::string>& found) {
  const int bs = st.kv.block_size();
  std::int64_t checked = 0;
  for (const auto& [id, prompt] : prompts) {
    std::vector<std::int32_t> tokens = prompt;
    const auto& out = o.outputs.at(id);
    tokens.insert(tokens.end(), out.begin(), out.end());
    Request tmp("tmp-" + id, tokens, 1, 0);
    const int computed = static_cast<int>(tokens.size()) - 1;  // the last token is never run
    for (int b = bs; b <= computed; b += bs) {
      const BlockHash h = st.kv.prefix_hash(tmp, b);
      const std::int32_t block = st.kv.pool().lookup(h);
      const int snap = st.snapshots.find(h);
      found.push_back(id + "@" + std::to_string(b) + (block >= 0 ? " kv" : "") + (snap >= 0 ? " snap" : ""));
      if (block >= 0) {
        ++checked;
        for (int j = 0; j < bs; ++j)
          EXPECT_EQ(m.kv(block, j), tokens[static_cast<std::size_t>(b - bs + j)]) << id << " block ending at " << b;
      }
      if (snap >= 0) {
        ++checked;
        EXPECT_EQ(m.snapshot(snap), ShadowModel::state_after(tmp, b)) << id << " snapshot at " << b;
      }
    }
  }
  return checked;
}

TEST(SpecScheduler, DecodeRunsItsLastTokenAndTheDraftsWithALogitsRowEach) {
  Stack st(spec_stack(4));
  Request& r = st.sched.add_request("r", iota_tokens(6, 10), 20);
  step(st);  // prefill + first token
  ASSERT_EQ(r.num_computed_tokens, 6);
  r.draft_token_ids = {7, 8, 9};
  const int free_before = st.kv.pool().num_free_blocks();
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  const ScheduledRequest& s = out.scheduled[0];
  EXPECT_EQ(s.num_scheduled_tokens, 4);
  EXPECT_EQ(s.num_draft_tokens, 3);
  EXPECT_EQ(std::vector<std::int32_t>(s.tokens.begin(), s.tokens.end()),
            (std::vector<std::int32_t>{r.all_token_ids().back(), 7, 8, 9}));
  EXPECT_TRUE(s.needs_logits);
  EXPECT_EQ(s.num_logit_rows(), 4);
  EXPECT_EQ(s.snapshot_count, 0) << "a verify step's snapshots are planned after verification";
  EXPECT_EQ(out.total_num_scheduled_tokens, 4);
  EXPECT_EQ(r.res.block_ids.size(), 3u);  // positions 6 .. 9
  EXPECT_TRUE(r.draft_token_ids.empty()) << "consumed";
  // Draft 0 accepted, draft 1 rejected: 7 and the correction 5 are appended.
  const std::vector<std::vector<std::int32_t>> emitted{{7, 5}};
  const auto& results = update(st, emitted);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].token, 7);
  EXPECT_EQ(results[1].token, 5);
  EXPECT_EQ(results[1].token_index, 1);
  EXPECT_EQ(results[1].scheduled_index, 0);
  EXPECT_EQ(r.num_output_tokens(), 3);
  EXPECT_EQ(r.num_computed_tokens, 8);  // the last token and one accepted draft
  EXPECT_EQ(r.res.block_ids.size(), 2u);
  EXPECT_EQ(st.kv.pool().num_free_blocks(), free_before);
  ASSERT_EQ(out.verify_outcomes.size(), 1u);
  EXPECT_EQ(out.verify_outcomes[0].kept_tokens, 2);
  const SpecDecodeMetrics spec = st.sched.metrics().spec_decode;
  EXPECT_EQ(spec.num_speculative_tokens, 4);
  EXPECT_EQ(spec.num_drafts, 1);
  EXPECT_EQ(spec.num_draft_tokens, 3);
  EXPECT_EQ(spec.num_accepted_tokens, 1);
  EXPECT_EQ(spec.num_accepted_tokens_per_pos[0], 1);
  EXPECT_EQ(spec.num_accepted_tokens_per_pos[1], 0);
}

// A request that has its first token (its next step is a decode).
Request& decoding(Stack& st, const std::string& id, int prompt_len, int max_tokens) {
  Request& r = st.sched.add_request(id, iota_tokens(prompt_len, 10 + prompt_len), max_tokens);
  while (r.num_output_tokens() == 0) step(st);
  return r;
}

TEST(SpecScheduler, DraftsStayWithinTheTokenBudget) {
  StackConfig c = spec_stack(3);
  c.max_num_batched_tokens = 3;
  Stack st(c);
  Request& a = st.sched.add_request("a", iota_tokens(2, 10), 10);
  Request& b = st.sched.add_request("b", iota_tokens(1, 20), 10);
  step(st);  // both prefills fit the budget of 3
  ASSERT_EQ(a.num_output_tokens(), 1);
  ASSERT_EQ(b.num_output_tokens(), 1);
  a.draft_token_ids = {1, 2, 3, 4, 5};
  b.draft_token_ids = {1, 2, 3, 4, 5};
  const SchedulerOutput& out = st.sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u) << "a's drafts took the budget";
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 2);
  EXPECT_EQ(out.total_num_scheduled_tokens, 3);
  EXPECT_EQ(b.draft_token_ids.size(), 5u) << "not scheduled: its drafts wait";
  update(st, {{1, 2, 3}});
  EXPECT_EQ(a.num_output_tokens(), 4);
}

TEST(SpecScheduler, DraftsNeverPassMaxTokensOrMaxModelLen) {
  StackConfig c = spec_stack(3);
  c.max_model_len = 16;
  Stack st(c);
  Request& a = decoding(st, "a", 2, 3);  // one output, max_tokens 3: one draft and the bonus
  a.draft_token_ids = {1, 2, 3};
  EXPECT_EQ(st.sched.schedule().scheduled[0].num_draft_tokens, 1);
  update(st, {{1, 2}});
  EXPECT_EQ(a.status(), RequestStatus::kFinishedLength);
  Request& z = decoding(st, "z", 12, 10);  // 13 tokens: two drafts and the bonus reach 16
  z.draft_token_ids = {1, 2, 3};
  EXPECT_EQ(st.sched.schedule().scheduled[0].num_draft_tokens, 2);
  update(st, {{1, 2, 3}});
  EXPECT_EQ(z.num_tokens(), 16);
  EXPECT_EQ(z.status(), RequestStatus::kFinishedLength);
}

TEST(SpecScheduler, DraftsAreCappedAndIgnoredOutsideDecode) {
  StackConfig c = spec_stack(2);
  c.long_prefill_token_threshold = 8;
  Stack st(c);
  Request& r = st.sched.add_request("r", iota_tokens(20, 10), 30);
  r.draft_token_ids = {1, 2, 3};
  const SchedulerOutput& out = st.sched.schedule();
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 0) << "a prefill chunk runs no drafts";
  EXPECT_EQ(out.scheduled[0].num_scheduled_tokens, 8);
  update(st, std::vector<std::vector<std::int32_t>>(1));
  while (r.num_output_tokens() == 0) step(st);
  r.draft_token_ids = {1, 2, 3, 4};
  const SchedulerOutput& out2 = st.sched.schedule();
  EXPECT_EQ(out2.scheduled[0].num_draft_tokens, 2) << "num_speculative_tokens";
  update(st, {{9}});
}

TEST(SpecScheduler, MissingKvBlocksForDraftsNeverPreempt) {
  StackConfig c = spec_stack(4);
  c.num_blocks = 6;
  c.max_model_len = 24;
  c.prefix_caching = false;
  c.num_snapshots = 0;
  Stack st(c);
  Request& a = st.sched.add_request("a", iota_tokens(12, 10), 20);  // 3 full blocks, the 4th on decode
  Request& b = st.sched.add_request("b", iota_tokens(7, 50), 20);   // 2 blocks, room for one more token
  while (a.num_output_tokens() == 0 || b.num_output_tokens() == 0) step(st);
  // a's token and draft take the last free block; b's drafts would need another: none left.
  a.draft_token_ids = {1};
  b.draft_token_ids = {1, 2, 3, 4};
  const SchedulerOutput& out = st.sched.schedule();
  EXPECT_EQ(out.num_preempted, 0);
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 1);
  EXPECT_EQ(out.scheduled[1].num_draft_tokens, 0);
  EXPECT_EQ(st.kv.pool().num_free_blocks(), 0);
  update(st, {{7}, {7}});
}

TEST(SpecScheduler, RejectedBlocksGoBackToTheHeadOfTheFreeQueueUnregistered) {
  Stack st(spec_stack(6));
  Request& r = st.sched.add_request("r", iota_tokens(6, 10), 40);
  step(st);
  const auto queue_before = st.kv.pool().free_queue_order();
  const int registered_before = st.kv.pool().num_registered();
  r.draft_token_ids = {1, 2, 3, 4, 5, 6};  // positions 6 .. 12: blocks 1 .. 3
  st.sched.schedule();
  EXPECT_EQ(r.res.block_ids.size(), 4u);
  const auto& results = update(st, {{8}});  // draft 0 rejected at once
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(r.num_computed_tokens, 7);
  EXPECT_EQ(r.res.block_ids.size(), 2u);
  EXPECT_EQ(st.kv.pool().free_queue_order(), queue_before) << "as if the drafts' blocks were never taken";
  EXPECT_EQ(st.kv.pool().num_registered(), registered_before);
  EXPECT_EQ(st.kv.pool().num_evictions(), 0);
}

TEST(SpecScheduler, UpdateRefusesTokensThatAreNotTheDrafts) {
  Stack st(spec_stack(3));
  Request& r = st.sched.add_request("r", iota_tokens(6, 10), 20);
  step(st);
  r.draft_token_ids = {1, 2, 3};
  st.sched.schedule();
  EXPECT_THROW(update(st, {{1, 5, 2}}), EngineLogicError);  // 5 is not draft 1
  Stack st2(spec_stack(3));
  Request& q = st2.sched.add_request("q", iota_tokens(6, 10), 20);
  step(st2);
  q.draft_token_ids = {1};
  st2.sched.schedule();
  EXPECT_THROW(update(st2, {{1, 4, 4}}), EngineLogicError);  // three tokens from one draft
}

TEST(SpecScheduler, AFinishInsideTheAcceptedDraftsDropsTheTokensAfterIt) {
  Stack st(spec_stack(4), stop_on_13);
  Request& r = st.sched.add_request("r", iota_tokens(6, 10), 20);
  step(st);
  step(st);
  ASSERT_EQ(r.num_output_tokens(), 2);
  r.draft_token_ids = {4, 13, 6, 7};
  st.sched.schedule();
  const auto& results = update(st, {{4, 13, 6, 7, 8}});  // all accepted, 13 stops it
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[1].finished);
  EXPECT_EQ(results[1].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(results[1].token, 13);
  EXPECT_FALSE(results[0].finished);
  EXPECT_EQ(st.sched.metrics().spec_decode.num_accepted_tokens, 4) << "the verifier accepted all four";
  EXPECT_EQ(st.kv.pool().num_free_blocks(), st.kv.pool().num_blocks());
  // max_tokens inside the drafts: the scheduler never runs drafts past it, so it ends on the bonus.
  Stack st2(spec_stack(4));
  Request& q = st2.sched.add_request("q", iota_tokens(6, 10), 4);
  step(st2);
  q.draft_token_ids = {1, 2, 3, 4};
  EXPECT_EQ(st2.sched.schedule().scheduled[0].num_draft_tokens, 2);
  const auto& res2 = update(st2, {{1, 2, 3}});
  EXPECT_EQ(res2.back().status, RequestStatus::kFinishedLength);
  EXPECT_EQ(q.num_output_tokens(), 4);
}

struct ShadowCase {
  int k;
  double p_wrong;
  int budget;
};

class SpecShadow : public ::testing::TestWithParam<ShadowCase> {};

TEST_P(SpecShadow, OutputsAndThePrefixCacheEqualARunWithoutDrafts) {
  const ShadowCase c = GetParam();
  StackConfig sc = spec_stack(c.k);
  sc.max_num_batched_tokens = c.budget;
  Stack plain(sc, stop_on_13), spec(sc, stop_on_13);
  ShadowSpecModel mp(sc.num_blocks, sc.block_size, sc.num_slots, sc.num_snapshots);
  ShadowSpecModel ms(sc.num_blocks, sc.block_size, sc.num_slots, sc.num_snapshots);
  add_requests(plain);
  add_requests(spec);
  std::map<std::string, std::vector<std::int32_t>> prompts;
  for (const Request* r : plain.sched.waiting())
    prompts[r->id()] = std::vector<std::int32_t>(r->prompt_token_ids().begin(), r->prompt_token_ids().end());
  const RunOutcome want = run_to_end(plain, mp, {});
  const RunOutcome got = run_to_end(spec, ms, continuation_drafts(c.k, c.p_wrong, 99));
  EXPECT_EQ(mp.error(), "");
  EXPECT_EQ(ms.error(), "");
  EXPECT_EQ(got.outputs, want.outputs);
  EXPECT_EQ(got.finish, want.finish);
  EXPECT_EQ(want.finish.at("f"), "finished_stopped");
  const SpecDecodeMetrics m = spec.sched.metrics().spec_decode;
  EXPECT_GT(m.num_drafts, 0);
  EXPECT_GT(got.kept_snapshot_points, 0) << "drafts should have crossed snapshot boundaries";
  if (c.p_wrong > 0.0) EXPECT_GT(got.rejections, 0);
  if (c.p_wrong == 0.0) EXPECT_GT(m.num_accepted_tokens, m.num_draft_tokens / 2);
  if (c.p_wrong == 1.0) EXPECT_EQ(m.num_accepted_tokens, 0);
  // The prefix cache: the same blocks and snapshots, each holding exactly its prefix.
  std::vector<std::string> found_plain, found_spec;
  EXPECT_GT(registered_and_committed(plain, mp, want, prompts, found_plain), 0);
  registered_and_committed(spec, ms, got, prompts, found_spec);
  EXPECT_EQ(found_spec, found_plain);
  EXPECT_EQ(spec.kv.pool().num_registered(), plain.kv.pool().num_registered()) << "a rejected token's block";
  EXPECT_EQ(spec.snapshots.num_committed(), plain.snapshots.num_committed()) << "a rejected token's snapshot";
  EXPECT_EQ(spec.kv.pool().num_free_blocks(), spec.kv.pool().num_blocks());
  EXPECT_EQ(spec.snapshots.num_pending(), 0);
  EXPECT_EQ(spec.slots.num_free(), spec.slots.num_slots());
}

INSTANTIATE_TEST_SUITE_P(Drafts, SpecShadow,
                         ::testing::Values(ShadowCase{3, 0.0, 23}, ShadowCase{6, 0.2, 23}, ShadowCase{6, 1.0, 23},
                                           ShadowCase{9, 0.1, 7}, ShadowCase{2, 0.5, 64}),
                         [](const ::testing::TestParamInfo<ShadowCase>& i) {
                           return "k" + std::to_string(i.param.k) + "_wrong" +
                                  std::to_string(static_cast<int>(i.param.p_wrong * 100)) + "pct_budget" +
                                  std::to_string(i.param.budget);
                         });

}  // namespace
}  // namespace fp4serve::engine
