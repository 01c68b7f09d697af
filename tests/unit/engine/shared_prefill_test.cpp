// n > 1 shares one prefill (scheduler.h, "Shared prefill"): child 0 computes the prompt, the others
// are forked from it. The contract is the CPU one: each child's tokens and logprobs are bit for bit
// those of a single request with the child's seed (seed + index), whatever the prompt length (a
// whole number of blocks, or a partial last block the children each copy), the chunking, prefix
// caching, and whether a child could fork or had to prefill itself; and the prompt is computed once.
#include <gtest/gtest.h>

#include <random>

#include "engine/drafter.h"
#include "engine/sampling_params.h"
#include "engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace testing;

EngineRequest seeded_request(const std::string& id, const std::vector<std::int32_t>& prompt, int n,
                             std::int64_t seed, int max_tokens = 10) {
  EngineRequest r = greedy_request(id, prompt, max_tokens);
  r.params.n = n;
  r.params.temperature = 0.9;
  r.params.top_k = 40;
  r.params.seed = seed;
  r.params.logprobs = 2;
  r.params.repetition_penalty = 1.1;  // reads the prompt: the fork row must see it too
  SamplingLimits lim;
  lim.vocab_size = 512;
  EXPECT_FALSE(prepare_sampling_params(r.params, lim));
  return r;
}

void expect_same_sequence(const Finished& a, int ia, const Finished& b, int ib, const std::string& what) {
  const auto i = static_cast<std::size_t>(ia), j = static_cast<std::size_t>(ib);
  EXPECT_EQ(a.tokens[i], b.tokens[j]) << what;
  EXPECT_EQ(a.finish_reason[i], b.finish_reason[j]) << what;
  ASSERT_EQ(a.logprobs[i].size(), b.logprobs[j].size()) << what;
  for (std::size_t t = 0; t < a.logprobs[i].size(); ++t) {
    EXPECT_EQ(a.logprobs[i][t].sampled.logprob, b.logprobs[j][t].sampled.logprob) << what << " token " << t;
    ASSERT_EQ(a.logprobs[i][t].top.size(), b.logprobs[j][t].top.size()) << what;
    for (std::size_t k = 0; k < a.logprobs[i][t].top.size(); ++k)
      EXPECT_EQ(a.logprobs[i][t].top[k].token, b.logprobs[j][t].top[k].token) << what;
  }
}

struct Counts {
  std::int64_t computed = 0, forked = 0;
};
Counts counts(const Engine& e) {
  const EngineStats s = e.stats();
  return {s.scheduler.prompt_tokens_computed, s.scheduler.prompt_tokens_forked};
}

// Runs an n-request first (in a fresh engine, so child 0 misses the cache), then each child's single
// request, and checks the children against them and the prompt counters against one prefill.
void check_children_equal_singles(const EngineConfig& config, int prompt_len, int n, bool expect_one_prefill,
                                  unsigned seed = 7) {
  std::mt19937 rng(seed);
  const auto prompt = random_prompt(rng, prompt_len);
  Engine engine(tiny_model(), qwen_tokenizer(), config);
  const Counts before = counts(engine);
  const Finished all = collect(*engine.submit(seeded_request("all", prompt, n, 1000)), n);
  const Counts after = counts(engine);
  const std::string what = "prompt " + std::to_string(prompt_len) + " n " + std::to_string(n);
  if (expect_one_prefill) {
    EXPECT_EQ(after.computed - before.computed, prompt_len) << what;
    EXPECT_EQ(after.forked - before.forked, static_cast<std::int64_t>(n - 1) * prompt_len) << what;
  }
  for (int i = 0; i < n; ++i) {
    const Finished single = collect(*engine.submit(seeded_request("single" + std::to_string(i), prompt, 1, 1000 + i)));
    expect_same_sequence(all, i, single, 0, what + " child " + std::to_string(i));
  }
  expect_no_leaks(engine);
}

TEST(SharedPrefill, ChildrenEqualSingleRequestsWithTheirSeedsAndThePromptIsComputedOnce) {
  // 48: whole blocks of 16, the children share every block; 45: a partial last block, copied.
  for (int len : {48, 45})
    for (int n = 1; n <= 4; ++n) check_children_equal_singles(small_engine_config(), len, n, true);
}

TEST(SharedPrefill, ChunkedPrefillForksAfterTheLastChunk) {
  EngineConfig c = small_engine_config();
  c.max_num_batched_tokens = 16;
  for (int len : {64, 53}) check_children_equal_singles(c, len, 3, true);
}

TEST(SharedPrefill, WorksWithPrefixCachingOff) {
  EngineConfig c = small_engine_config();
  c.enable_prefix_caching = false;
  for (int len : {32, 37}) check_children_equal_singles(c, len, 4, true);
}

TEST(SharedPrefill, ChildrenThatCannotForkPrefillThemselvesWithTheSameTokens) {
  // Two running places: child 1 forks, children 2 and 3 find the running list full and wait with
  // their first token, then prefill prompt + that token themselves (a prefix hit or not).
  EngineConfig c = small_engine_config();
  c.max_num_seqs = 2;
  check_children_equal_singles(c, 45, 4, false);
  c.enable_prefix_caching = false;
  check_children_equal_singles(c, 45, 4, false);
}

TEST(SharedPrefill, ChildrenThatFinishAtTheirFirstTokenNeverHoldResources) {
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 30);
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  const Finished all = collect(*engine.submit(seeded_request("all", prompt, 4, 77, 1)), 4);
  for (int i = 0; i < 4; ++i) {
    const Finished single = collect(*engine.submit(seeded_request("s" + std::to_string(i), prompt, 1, 77 + i, 1)));
    expect_same_sequence(all, i, single, 0, "child " + std::to_string(i));
    EXPECT_EQ(all.finish_reason[static_cast<std::size_t>(i)], "length");
  }
  expect_no_leaks(engine);
}

TEST(SharedPrefill, ChildrenGetThePromptLogprobsOfTheSiblingThatComputedThem) {
  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 40);
  EngineConfig c = small_engine_config();
  c.max_num_batched_tokens = 16;  // the prompt rows arrive over several chunks
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  EngineRequest r = seeded_request("all", prompt, 3, 5);
  r.params.prompt_logprobs = 2;
  const Finished all = collect(*engine.submit(r), 3);
  EngineRequest one = seeded_request("one", prompt, 1, 7);
  one.params.prompt_logprobs = 2;
  const Finished single = collect(*engine.submit(one));
  expect_same_sequence(all, 2, single, 0, "child 2");
  ASSERT_TRUE(single.prompt_logprobs[0]);
  for (int i = 0; i < 3; ++i) {
    const auto& got = all.prompt_logprobs[static_cast<std::size_t>(i)];
    ASSERT_TRUE(got) << i;
    ASSERT_EQ(got->size(), single.prompt_logprobs[0]->size());
    for (std::size_t p = 1; p < got->size(); ++p) {
      ASSERT_TRUE((*got)[p]) << i << " position " << p;
      EXPECT_EQ((*got)[p]->sampled.logprob, (*single.prompt_logprobs[0])[p]->sampled.logprob) << i << " " << p;
    }
  }
  expect_no_leaks(engine);
}

// Proposes each sequence's known continuation (by its "<index>_<id>" name), so drafts are accepted.
class KnownContinuation : public Drafter {
 public:
  explicit KnownContinuation(std::vector<std::vector<std::int32_t>> expected) : expected_(std::move(expected)) {}
  void propose(const DraftRequest& r, int max_tokens, std::vector<std::int32_t>& out) override {
    const auto& e = expected_.at(static_cast<std::size_t>(r.request_id[0] - '0'));
    for (std::size_t i = r.output_token_ids.size(); i < e.size() && static_cast<int>(out.size()) < max_tokens; ++i)
      out.push_back(e[i]);
  }

 private:
  std::vector<std::vector<std::int32_t>> expected_;
};

TEST(SharedPrefill, SpeculativeDecodingKeepsTheChildrensTokens) {
  std::mt19937 rng(4);
  const auto prompt = random_prompt(rng, 33);  // chunks of 16: the last prompt token runs alone
  EngineConfig c = small_engine_config();
  c.max_num_batched_tokens = 16;
  std::vector<std::vector<std::int32_t>> expected;
  {
    Engine plain(tiny_model(), qwen_tokenizer(), c);
    for (int i = 0; i < 3; ++i)
      expected.push_back(collect(*plain.submit(seeded_request("s" + std::to_string(i), prompt, 1, 50 + i))).tokens[0]);
  }
  c.drafter = std::make_shared<KnownContinuation>(expected);
  c.num_speculative_tokens = 3;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  const Finished all = collect(*engine.submit(seeded_request("all", prompt, 3, 50)), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(all.tokens[static_cast<std::size_t>(i)], expected[static_cast<std::size_t>(i)]) << i;
  EXPECT_GT(engine.stats().scheduler.spec_decode.num_accepted_tokens, 0);
  EXPECT_EQ(engine.stats().scheduler.prompt_tokens_computed, 33);
  expect_no_leaks(engine);
}

// Separate requests with one prompt (prompt_twins.h): the ones that arrive while the first computes
// it fork from it, across requests, with each its own seed, n and prompt-logprobs setting.
TEST(SharedPrefill, IdenticalConcurrentPromptsFromSeparateRequestsArePrefilledOnce) {
  std::mt19937 rng(31);
  const auto prompt = random_prompt(rng, 45);
  EngineConfig c = small_engine_config();
  c.max_num_batched_tokens = 16;  // the first request's prefill spans three steps
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  const Counts before = counts(engine);
  engine.set_debug_stall(true);  // all four arrive before the first step
  auto a = engine.submit(seeded_request("a", prompt, 1, 300));
  auto b = engine.submit(seeded_request("b", prompt, 2, 310));
  auto d = engine.submit(seeded_request("d", prompt, 1, 320));
  EngineRequest other_salt = seeded_request("e", prompt, 1, 330);
  other_salt.cache_salt_hash = 99;  // a different cache salt never shares
  auto e = engine.submit(other_salt);
  engine.set_debug_stall(false);
  const Finished fa = collect(*a), fb = collect(*b, 2), fd = collect(*d), fe = collect(*e);
  const Counts after = counts(engine);
  EXPECT_EQ(after.computed - before.computed, 2 * 45) << "one prefill per salt";
  EXPECT_EQ(after.forked - before.forked, 3 * 45) << "b's two sequences and d forked from a";
  const std::vector<std::pair<const Finished*, int>> got = {{&fa, 0}, {&fb, 0}, {&fb, 1}, {&fd, 0}, {&fe, 0}};
  const std::vector<std::int64_t> seeds = {300, 310, 311, 320, 330};
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Finished single = collect(*engine.submit(seeded_request("s" + std::to_string(i), prompt, 1, seeds[i])));
    expect_same_sequence(*got[i].first, got[i].second, single, 0, "sequence " + std::to_string(i));
  }
  expect_no_leaks(engine);
}

TEST(SharedPrefill, ATwinWithOtherPromptLogprobsComputesItsOwnPrompt) {
  std::mt19937 rng(32);
  const auto prompt = random_prompt(rng, 40);
  Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());
  const Counts before = counts(engine);
  engine.set_debug_stall(true);
  auto a = engine.submit(seeded_request("a", prompt, 1, 1));
  EngineRequest with_logprobs = seeded_request("b", prompt, 1, 2);
  with_logprobs.params.prompt_logprobs = 1;
  auto b = engine.submit(with_logprobs);
  engine.set_debug_stall(false);
  collect(*a);
  const Finished fb = collect(*b);
  ASSERT_TRUE(fb.prompt_logprobs[0]);
  EXPECT_EQ(counts(engine).forked - before.forked, 0);
  expect_no_leaks(engine);
}

TEST(SharedPrefill, ManyConcurrentRequestsAndCancellationsLeakNothing) {
  std::mt19937 rng(21);
  EngineConfig c = small_engine_config();
  c.max_num_batched_tokens = 32;
  c.max_num_seqs = 6;
  Engine engine(tiny_model(), qwen_tokenizer(), c);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<int> ns;
  for (int i = 0; i < 10; ++i) {
    const int n = 1 + i % 4;
    chans.push_back(engine.submit(seeded_request("r" + std::to_string(i), random_prompt(rng, 20 + 7 * i), n, i)));
    ns.push_back(n);
    // Cancel some while child 0 may still be prefilling (its held children go with it).
    if (i % 3 == 1) engine.abort("r" + std::to_string(i));
  }
  for (std::size_t i = 0; i < chans.size(); ++i) {
    const Finished f = collect(*chans[i], ns[i]);
    EXPECT_FALSE(f.error) << i;
  }
  expect_no_leaks(engine);
}

}  // namespace
}  // namespace fp4serve::engine
