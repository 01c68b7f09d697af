// Speculative decoding on the tiny real model, end to end through the engine, with fake drafters that
// propose a reference run's own tokens, right or deliberately wrong: every output (tokens, logprobs to
// the bit, text, finish and stop reasons) equals the run without a drafter, for greedy, seeded
// sampling, penalties, logit_bias, min_tokens, bad_words, stop strings and stop tokens, with drafts
// crossing KV block and snapshot boundaries and ending at max_tokens and max_model_len; and the prefix
// cache afterwards gives the same hits and tokens as after a run without drafts.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <tuple>

#include "engine/cache_plan.h"
#include "engine/drafter.h"
#include "engine/engine_error.h"
#include "engine/sampling_params.h"
#include "engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

constexpr int kDrafts = 4;

// A drafter whose proposals come from a function of the request and its output so far.
class ScriptedDrafter : public Drafter {
 public:
  using Script = std::function<void(const DraftRequest&, int max_tokens, std::vector<std::int32_t>& out)>;
  explicit ScriptedDrafter(Script script) : script_(std::move(script)) {}
  void propose(const DraftRequest& r, int max_tokens, std::vector<std::int32_t>& out) override {
    ++calls;
    script_(r, max_tokens, out);
  }
  std::atomic<int> calls{0};

 private:
  Script script_;
};

enum class Mode { kExact, kWrongAt0, kWrongAt1, kWrongAtLast, kGarbage, kMixed };
const char* name(Mode m) {
  switch (m) {
    case Mode::kExact: return "exact";
    case Mode::kWrongAt0: return "wrong_at_0";
    case Mode::kWrongAt1: return "wrong_at_1";
    case Mode::kWrongAtLast: return "wrong_at_last";
    case Mode::kGarbage: return "garbage";
    case Mode::kMixed: return "mixed";
  }
  return "?";
}

using References = std::map<std::string, std::vector<std::int32_t>>;  // scheduler id -> plain run's tokens

// Proposes the reference continuation after the request's output, with the mode's wrong tokens; past
// the reference's end (the plain run stopped there on a stop token or string) it proposes arbitrary
// tokens, except in kExact mode, which knows no continuation there and proposes nothing.
ScriptedDrafter::Script script(Mode mode, std::shared_ptr<const References> refs) {
  return [mode, refs](const DraftRequest& r, int max_tokens, std::vector<std::int32_t>& out) {
    const auto it = refs->find(std::string(r.request_id));
    const std::vector<std::int32_t>* ref = it == refs->end() ? nullptr : &it->second;
    const std::size_t pos = r.output_token_ids.size();
    // A per-(request, position) stream, so the proposals do not depend on the step order.
    std::seed_seq seq{static_cast<unsigned>(std::hash<std::string_view>{}(r.request_id)), static_cast<unsigned>(pos)};
    std::mt19937 rng(seq);
    int n = max_tokens;
    if (mode == Mode::kMixed) n = std::uniform_int_distribution<int>(0, max_tokens)(rng);
    for (int j = 0; j < n; ++j) {
      const std::size_t p = pos + static_cast<std::size_t>(j);
      if (mode == Mode::kExact && (ref == nullptr || p >= ref->size())) break;
      std::int32_t t = ref != nullptr && p < ref->size() ? (*ref)[p] : 7;
      const bool wrong = (mode == Mode::kWrongAt0 && j == 0) || (mode == Mode::kWrongAt1 && j == 1) ||
                         (mode == Mode::kWrongAtLast && j == max_tokens - 1) ||
                         (mode == Mode::kMixed && std::bernoulli_distribution(0.25)(rng));
      if (wrong) t = (t + 1) % 500;
      if (mode == Mode::kGarbage) t = std::uniform_int_distribution<int>(1, 500)(rng);
      out.push_back(t);
    }
  };
}

SamplingParams prepared(SamplingParams p) {
  SamplingLimits lim;
  lim.vocab_size = 512;
  EXPECT_FALSE(prepare_sampling_params(p, lim));
  return p;
}

// The requests every mode runs at once: every kind of sampling and stop, different lengths, drafts
// crossing 16-token blocks and the 64-token snapshot interval, ends at max_tokens and max_model_len.
std::vector<EngineRequest> cases() {
  std::mt19937 rng(41);
  std::vector<EngineRequest> out;
  auto add = [&](std::string id, int prompt_len, int max_tokens) -> EngineRequest& {
    out.push_back(greedy_request(std::move(id), random_prompt(rng, prompt_len), max_tokens));
    return out.back();
  };
  add("greedy", 30, 40);
  add("greedy-snap", 60, 30);  // decodes through positions 64 and 80
  add("short", 5, 2);
  add("three", 17, 3);
  {
    EngineRequest& r = add("seeded", 40, 40);
    r.params.temperature = 0.8;
    r.params.top_p = 0.9;
    r.params.top_k = 50;
    r.params.seed = 1234;
    r.params.logprobs = 3;
    r.params = prepared(r.params);
  }
  {
    EngineRequest& r = add("penalties", 25, 40);
    r.params.temperature = 0.7;
    r.params.seed = 7;
    r.params.repetition_penalty = 1.3;
    r.params.frequency_penalty = 0.5;
    r.params.presence_penalty = 0.4;
    r.params.logit_bias = {{11, 2.5}, {12, -3.0}, {300, 4.0}};
    r.params.min_tokens = 6;
    r.params.stop_token_ids = {300};
    r.params.bad_words_token_ids = {{42}, {300, 11}};
    r.params.logprobs = 2;
    r.params = prepared(r.params);
  }
  {
    EngineRequest& r = add("greedy-penalties", 20, 30);
    r.params.repetition_penalty = 1.2;
    r.params.frequency_penalty = 0.3;
    r.params = prepared(r.params);
  }
  {
    EngineRequest& r = add("n2", 33, 20);
    r.params.n = 2;
    r.params.temperature = 1.0;
    r.params.seed = 99;
    r.params = prepared(r.params);
  }
  {
    EngineRequest& r = add("max-model-len", 500, 100);  // 12 tokens of room in max_model_len 512
    r.params.max_tokens.reset();
  }
  return out;
}

// Stop strings and stop tokens taken from the plain greedy output, so they fire mid-sequence.
void add_stop_cases(std::vector<EngineRequest>& reqs, const std::vector<std::int32_t>& greedy_tokens,
                    const std::string& greedy_text) {
  EngineRequest stop_token = reqs[0];
  stop_token.id = "stop-token";
  stop_token.params.stop_token_ids = {greedy_tokens.at(12)};
  reqs.push_back(stop_token);
  EngineRequest stop_str = reqs[0];
  stop_str.id = "stop-string";
  stop_str.params.stop = {greedy_text.substr(greedy_text.size() / 2, 3)};
  reqs.push_back(stop_str);
}

struct Comparable {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::string> text, finish;
  std::vector<std::string> stop;
  std::vector<std::vector<std::tuple<std::int32_t, float, std::int64_t, std::vector<std::int32_t>>>> logprobs;
  std::optional<std::string> error;
};

Comparable comparable(const Finished& f) {
  Comparable c{f.tokens, f.text, f.finish_reason, {}, {}, f.error};
  for (const StopReason& s : f.stop_reason)
    c.stop.push_back(std::holds_alternative<std::string>(s)    ? "s:" + std::get<std::string>(s)
                     : std::holds_alternative<std::int64_t>(s) ? "t:" + std::to_string(std::get<std::int64_t>(s))
                                                               : "none");
  for (const auto& seq : f.logprobs) {
    c.logprobs.emplace_back();
    for (const SampleLogprobs& lp : seq) {
      std::vector<std::int32_t> top;
      for (const TokenLogprob& t : lp.top) top.push_back(t.token);
      c.logprobs.back().emplace_back(lp.sampled.token, lp.sampled.logprob, lp.sampled_rank, top);
    }
  }
  return c;
}

std::map<std::string, Finished> run_batch(Engine& engine, const std::vector<EngineRequest>& reqs) {
  std::vector<std::pair<EngineRequest, std::shared_ptr<OutputChannel>>> chans;
  for (const EngineRequest& r : reqs) chans.emplace_back(r, engine.submit(r));
  std::map<std::string, Finished> out;
  for (auto& [r, ch] : chans) out[r.id] = collect(*ch, static_cast<int>(std::max<std::int64_t>(1, r.params.n)));
  return out;
}

struct Plain {
  std::vector<EngineRequest> reqs;
  std::map<std::string, Finished> out;
  std::shared_ptr<References> refs = std::make_shared<References>();
  std::int64_t num_steps = 0;
};

// The run without a drafter, once per process.
const Plain& plain() {
  static const Plain p = [] {
    Plain p;
    p.reqs = cases();
    {
      Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
      const Finished g = collect(*engine.submit(p.reqs[0]));
      add_stop_cases(p.reqs, g.tokens[0], g.text[0]);
    }
    Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
    p.out = run_batch(engine, p.reqs);
    p.num_steps = engine.stats().num_steps;
    for (const auto& [id, f] : p.out) {
      if (f.tokens.size() == 1) (*p.refs)[id] = f.tokens[0];
      else
        for (std::size_t i = 0; i < f.tokens.size(); ++i) (*p.refs)[std::to_string(i) + "_" + id] = f.tokens[i];
    }
    return p;
  }();
  return p;
}

EngineConfig spec_config(std::shared_ptr<Drafter> drafter) {
  EngineConfig c = small_engine_config();
  c.drafter = std::move(drafter);
  c.num_speculative_tokens = kDrafts;
  return c;
}

class SpecDecode : public ::testing::TestWithParam<Mode> {};

TEST_P(SpecDecode, OutputsEqualTheRunWithoutADrafter) {
  const Plain& want = plain();
  ASSERT_EQ(want.out.at("stop-token").finish_reason[0], "stop");
  ASSERT_EQ(want.out.at("stop-string").finish_reason[0], "stop");
  ASSERT_EQ(want.out.at("max-model-len").finish_reason[0], "length");
  ASSERT_EQ(want.out.at("max-model-len").tokens[0].size(), 12u);
  auto drafter = std::make_shared<ScriptedDrafter>(script(GetParam(), want.refs));
  Engine engine(tiny_model(), qwen_tokenizer(), spec_config(drafter));
  const auto got = run_batch(engine, want.reqs);
  for (const auto& [id, f] : want.out) {
    const Comparable a = comparable(got.at(id)), b = comparable(f);
    const std::string where = id + " with " + name(GetParam()) + " drafts";
    EXPECT_EQ(a.tokens, b.tokens) << where;
    EXPECT_EQ(a.logprobs, b.logprobs) << where;  // bit-equal logprobs: bit-equal logits rows
    EXPECT_EQ(a.text, b.text) << where;
    EXPECT_EQ(a.finish, b.finish) << where;
    EXPECT_EQ(a.stop, b.stop) << where;
    EXPECT_EQ(a.error, b.error) << where;
  }
  const EngineStats s = engine.stats();
  const SpecDecodeMetrics& m = s.scheduler.spec_decode;
  EXPECT_GT(drafter->calls.load(), 0);
  EXPECT_GT(m.num_drafts, 0);
  EXPECT_LE(m.num_accepted_tokens, m.num_draft_tokens);
  EXPECT_EQ(m.num_speculative_tokens, kDrafts);
  switch (GetParam()) {
    case Mode::kExact:
      EXPECT_EQ(m.num_accepted_tokens, m.num_draft_tokens) << "every draft was the target's own token";
      EXPECT_LT(s.num_steps * 3, want.num_steps * 2) << "exact drafts must shorten the run";
      break;
    case Mode::kWrongAt0: EXPECT_EQ(m.num_accepted_tokens, 0); break;
    case Mode::kWrongAt1:
      EXPECT_EQ(m.num_accepted_tokens_per_pos[1], 0);
      EXPECT_GT(m.num_accepted_tokens_per_pos[0], 0);
      break;
    case Mode::kWrongAtLast: EXPECT_EQ(m.num_accepted_tokens_per_pos[kDrafts - 1], 0); break;
    default: break;
  }
  // Nothing leaked: every block, slot and pending snapshot came back.
  EXPECT_EQ(s.scheduler.num_running, 0);
  EXPECT_EQ(s.scheduler.state_slots_in_use, 0);
  EXPECT_EQ(s.scheduler.kv_cache_usage, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Modes, SpecDecode,
                         ::testing::Values(Mode::kExact, Mode::kWrongAt0, Mode::kWrongAt1, Mode::kWrongAtLast,
                                           Mode::kGarbage, Mode::kMixed),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(name(i.param)); });

// One request at a time, so both engines see the same cache history: the prompt again, and the next
// chat turn, hit the same prefix (KV blocks and GDN snapshots, including the tail snapshot of the
// drafted decode) and produce the same tokens as without drafts.
TEST(SpecDecodePrefixCache, RejectedDraftsLeaveNoTraceInTheCache) {
  std::mt19937 rng(77);
  const auto prompt = random_prompt(rng, 53);
  const auto more = random_prompt(rng, 7);
  auto sequence = [&](Engine& engine) {
    std::vector<Finished> out;
    out.push_back(collect(*engine.submit(greedy_request("first", prompt, 60))));
    out.push_back(collect(*engine.submit(greedy_request("again", prompt, 20))));
    std::vector<std::int32_t> turn2 = prompt;
    turn2.insert(turn2.end(), out[0].tokens[0].begin(), out[0].tokens[0].end());
    turn2.insert(turn2.end(), more.begin(), more.end());
    out.push_back(collect(*engine.submit(greedy_request("turn2", turn2, 20))));
    return out;
  };
  Engine plain_engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  const auto want = sequence(plain_engine);
  auto refs = std::make_shared<References>();
  (*refs)["first"] = want[0].tokens[0];
  (*refs)["again"] = want[1].tokens[0];
  (*refs)["turn2"] = want[2].tokens[0];
  for (Mode mode : {Mode::kMixed, Mode::kWrongAtLast, Mode::kGarbage}) {
    Engine engine(tiny_model(), qwen_tokenizer(), spec_config(std::make_shared<ScriptedDrafter>(script(mode, refs))));
    const auto got = sequence(engine);
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << name(mode) << " request " << i;
      EXPECT_EQ(got[i].num_cached_tokens, want[i].num_cached_tokens) << name(mode) << " request " << i;
    }
    EXPECT_GT(want[2].num_cached_tokens, 53) << "turn 2 resumes from turn 1's tail snapshot";
    const SchedulerMetrics a = plain_engine.stats().scheduler, b = engine.stats().scheduler;
    EXPECT_EQ(b.prefix_cache_hits, a.prefix_cache_hits) << name(mode);
    EXPECT_EQ(b.snapshots_committed, a.snapshots_committed) << name(mode);
    EXPECT_GT(b.spec_decode.num_draft_tokens, b.spec_decode.num_accepted_tokens) << name(mode) << ": some rejected";
  }
}

TEST(SpecDecodeOutput, AVerifyStepSendsOneDeltaPerSequenceWithAllItsTokens) {
  const Plain& want = plain();
  Engine engine(tiny_model(), qwen_tokenizer(), spec_config(std::make_shared<ScriptedDrafter>(script(Mode::kExact, want.refs))));
  const EngineRequest& req = *std::find_if(want.reqs.begin(), want.reqs.end(), [](const EngineRequest& r) { return r.id == "n2"; });
  auto ch = engine.submit(req);
  std::vector<std::vector<std::int32_t>> tokens(2);
  int outputs = 0;
  std::size_t most = 0;
  while (true) {
    auto out = ch->pop(std::chrono::seconds(60));
    ASSERT_TRUE(out.has_value());
    ++outputs;
    std::vector<int> seen;
    for (const SequenceDelta& d : out->deltas) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), d.index), 0) << "two deltas for sequence " << d.index;
      seen.push_back(d.index);
      most = std::max(most, d.token_ids.size());
      tokens[static_cast<std::size_t>(d.index)].insert(tokens[static_cast<std::size_t>(d.index)].end(),
                                                       d.token_ids.begin(), d.token_ids.end());
    }
    if (out->finished) break;
  }
  EXPECT_EQ(tokens, want.out.at("n2").tokens);
  EXPECT_GT(most, 1u) << "accepted drafts arrive together";
  EXPECT_LT(outputs, 20);
}

TEST(SpecDecodeConfig, NoDrafterMeansNoDraftsAndATooLargeCountIsRefused) {
  EngineConfig c = small_engine_config();
  c.num_speculative_tokens = 4;  // without a drafter: off
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  collect(*engine.submit(greedy_request("x", {1, 2, 3}, 5)));
  EXPECT_EQ(engine.stats().scheduler.spec_decode.num_drafts, 0);
  EXPECT_EQ(engine.stats().scheduler.spec_decode.num_speculative_tokens, 0);
  EngineConfig bad = spec_config(std::make_shared<ScriptedDrafter>(script(Mode::kExact, std::make_shared<References>())));
  bad.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  EXPECT_THROW(Engine(tiny_model(), qwen_tokenizer(), bad), EngineConfigError);
}

TEST(SpecDecodeConfig, TheCachePlanCountsTheRollbackEntries) {
  CachePlanInput in;
  in.budget_bytes = 1000ull << 20;
  in.max_num_seqs = 8;
  in.max_num_seqs_explicit = true;
  in.max_model_len = 256;
  in.kv_block_bytes = 1 << 16;
  in.state_bytes_per_seq = 20ull << 20;
  in.rollback_entries_per_seq = 2;
  const CachePlan p = plan_cache(in);
  EXPECT_EQ(p.num_rollback_entries, 16);
  EXPECT_EQ(p.rollback_bytes, 16 * (20ull << 20));
  EXPECT_EQ(p.state_bytes + p.rollback_bytes + p.snapshot_bytes + p.kv_bytes <= in.budget_bytes, true);
  // 8 sequences x (1 + 2) x 20 MiB = 480 MiB fits half the budget; 4 drafts (800 MiB) do not.
  in.rollback_entries_per_seq = 4;
  EXPECT_THROW(plan_cache(in), EngineConfigError);
}

TEST(SpecDecodeConfig, OutOfVocabularyDraftsAreCutNotFatal) {
  auto drafter = std::make_shared<ScriptedDrafter>(
      [](const DraftRequest&, int, std::vector<std::int32_t>& out) { out = {5, -1, 6}; });
  Engine engine(tiny_model(), qwen_tokenizer(), spec_config(drafter));
  const Finished f = collect(*engine.submit(greedy_request("x", {1, 2, 3}, 8)));
  EXPECT_FALSE(f.error.has_value());
  EXPECT_EQ(f.tokens[0].size(), 8u);
  const SpecDecodeMetrics m = engine.stats().scheduler.spec_decode;
  EXPECT_EQ(m.num_draft_tokens, m.num_drafts) << "only the draft before the bad id ran";
}

}  // namespace
}  // namespace fp4serve::engine
