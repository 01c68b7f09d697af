// The Sampler end to end: processors on raw logits in vLLM's order, greedy and random paths,
// padding ids, seeded reproducibility across batches and thread counts, raw logprobs.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "engine/engine_error.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::random_logits;

SamplerConfig small_config(int64_t vocab, int64_t valid, std::vector<int64_t> eos = {}) {
  SamplerConfig c;
  c.vocab_size = vocab;
  c.valid_vocab_size = valid;
  c.eos_token_ids = std::move(eos);
  c.seed = 12345;
  return c;
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0;
  return p;
}

// Samples one row alone.
SampleOutput sample_one(Sampler& s, std::vector<float>& logits, const SamplingParams& p,
                        const std::vector<int32_t>& prompt = {},
                        const std::vector<int32_t>& output = {}) {
  const SampleInput in{logits, &p, prompt, output};
  return s.sample(std::span<const SampleInput>(&in, 1)).at(0);
}

TEST(Sampler, GreedyPicksTheFirstMaximum) {
  Sampler s(small_config(6, 6));
  std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  EXPECT_EQ(sample_one(s, logits, greedy_params()).token, 1);
}

TEST(Sampler, PaddingIdsAreNeverSampled) {
  // Ids 8..11 are lm_head padding with huge logits: greedy and random both ignore them.
  Sampler s(small_config(12, 8));
  std::vector<float> logits = random_logits(12, 5);
  for (std::size_t i = 8; i < 12; ++i) logits[i] = 50.0f;
  EXPECT_LT(sample_one(s, logits, greedy_params()).token, 8);
  SamplingParams p;
  p.temperature = 2.0;
  for (int64_t seed = 0; seed < 2000; ++seed) {
    p.seed = seed;
    ASSERT_LT(sample_one(s, logits, p).token, 8) << "seed " << seed;
  }
  p.seed.reset();
  p.top_p = 0.5;
  for (int i = 0; i < 500; ++i) ASSERT_LT(sample_one(s, logits, p).token, 8);
}

TEST(Sampler, LogitBiasIsAddedToTheRawLogit) {
  Sampler s(small_config(4, 4));
  std::vector<float> logits{1.0f, 3.0f, 2.0f, 0.0f};
  SamplingParams p = greedy_params();
  p.logit_bias = {{0, 2.5}};  // 1.0 + 2.5 = 3.5 > 3.0
  EXPECT_EQ(sample_one(s, logits, p).token, 0);
  p.logit_bias = {{0, 1.5}, {1, -100.0}};  // 2.5 vs 2.0 for token 2
  EXPECT_EQ(sample_one(s, logits, p).token, 0);
  p.logit_bias = {{0, 0.5}, {1, -100.0}};  // 1.5 vs 2.0
  EXPECT_EQ(sample_one(s, logits, p).token, 2);
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUntilReached) {
  // Token 5 is the model's EOS, token 3 a request stop id; both lead the logits.
  Sampler s(small_config(8, 8, {5}));
  std::vector<float> logits{0.0f, 1.0f, 0.5f, 9.0f, 2.0f, 10.0f, 0.1f, 0.2f};
  SamplingParams p = greedy_params();
  p.min_tokens = 3;
  p.stop_token_ids = {3};
  const std::vector<int32_t> prompt{1, 2};
  EXPECT_EQ(sample_one(s, logits, p, prompt, {}).token, 4);
  EXPECT_EQ(sample_one(s, logits, p, prompt, {4, 4}).token, 4);
  EXPECT_EQ(sample_one(s, logits, p, prompt, {4, 4, 4}).token, 5);  // min_tokens reached
  p.ignore_eos = true;  // vLLM still counts EOS among all_stop_token_ids for min_tokens
  EXPECT_EQ(sample_one(s, logits, p, prompt, {4}).token, 4);
  // Random sampling never draws a masked id either.
  SamplingParams r;
  r.min_tokens = 2;
  r.stop_token_ids = {3};
  for (int64_t seed = 0; seed < 300; ++seed) {
    r.seed = seed;
    const int32_t t = sample_one(s, logits, r, prompt, {0}).token;
    ASSERT_NE(t, 5);
    ASSERT_NE(t, 3);
  }
}

TEST(SamplerPenalties, ChangeTheGreedyChoiceAndLeaveTheRowRaw) {
  Sampler s(small_config(6, 6));
  std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  const std::vector<float> raw = logits;
  SamplingParams p = greedy_params();
  EXPECT_EQ(sample_one(s, logits, p, {0}, {3, 3}).token, 3);
  p.frequency_penalty = 1.0;  // token 3: 3 - 2 = 1 < token 0's 2
  EXPECT_EQ(sample_one(s, logits, p, {0}, {3, 3}).token, 0);
  EXPECT_EQ(logits, raw);
}

TEST(Sampler, TemperatureSamplingDrawsOnlyKeptTokens) {
  Sampler s(small_config(30, 30));
  std::vector<float> logits = random_logits(30, 77);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 4;
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  std::set<int32_t> seen;
  for (int64_t seed = 0; seed < 2000; ++seed) {
    p.seed = seed;
    const int32_t t = sample_one(s, logits, p).token;
    ASSERT_GE(logits[static_cast<std::size_t>(t)], sorted[3]);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 4u);  // every kept token shows up
}

// Same seed and position -> same token, whatever else is in the batch, its order, and the
// number of threads; different positions give a varied sequence.
TEST(SamplerSeeds, SameSeedSameTokenWhateverTheBatch) {
  constexpr int64_t kVocab = 1000;
  Sampler s(small_config(kVocab, 990));
  const std::vector<float> base = random_logits(kVocab, 3, 0.3f);  // flat: many plausible tokens
  SamplingParams seeded;
  seeded.seed = 42;
  seeded.top_p = 0.95;
  SamplingParams other_seed = seeded;
  other_seed.seed = 43;
  SamplingParams unseeded;
  unseeded.top_k = 50;
  const SamplingParams greedy = greedy_params();

  std::vector<int32_t> prompt{1, 2, 3};
  std::vector<int32_t> tokens_alone;
  for (int step = 0; step < 40; ++step) {
    std::vector<int32_t> output(static_cast<std::size_t>(step), 7);
    std::vector<float> row = base;
    s.set_num_threads(1);
    tokens_alone.push_back(sample_one(s, row, seeded, prompt, output).token);

    for (int threads : {1, 2, 3}) {
      s.set_num_threads(threads);
      std::vector<std::vector<float>> rows(6, base);
      const std::vector<int32_t> other_output(5, 9);
      std::vector<SampleInput> batch{
          {rows[0], &unseeded, prompt, other_output},
          {rows[1], &greedy, prompt, other_output},
          {rows[2], &other_seed, prompt, output},
          {rows[3], &seeded, prompt, output},  // the row under test
          {rows[4], &unseeded, prompt, output},
          {rows[5], &seeded, prompt, other_output},
      };
      const auto out = s.sample(batch);
      ASSERT_EQ(out[3].token, tokens_alone.back()) << "step " << step << " threads " << threads;
      // Reversed order: still the same.
      std::reverse(batch.begin(), batch.end());
      ASSERT_EQ(s.sample(batch)[2].token, tokens_alone.back());
    }
  }
  EXPECT_GT(std::set<int32_t>(tokens_alone.begin(), tokens_alone.end()).size(), 10u);

  // Another seed gives another sequence.
  std::vector<int32_t> tokens_other;
  for (int step = 0; step < 40; ++step) {
    std::vector<float> row = base;
    tokens_other.push_back(sample_one(s, row, other_seed, prompt,
                                      std::vector<int32_t>(static_cast<std::size_t>(step), 7))
                               .token);
  }
  EXPECT_NE(tokens_other, tokens_alone);
}

TEST(SamplerSeeds, UnseededRowsUseTheEngineGeneratorInRowOrder) {
  Sampler a(small_config(500, 500));
  Sampler b(small_config(500, 500));
  const std::vector<float> base = random_logits(500, 11, 0.2f);
  SamplingParams p;
  std::vector<int32_t> first, second;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> r1 = base, r2 = base;
    first.push_back(sample_one(a, r1, p).token);
    second.push_back(sample_one(b, r2, p).token);
  }
  EXPECT_EQ(first, second);  // same engine seed, same calls
  EXPECT_EQ(a.engine_draws(), 20u);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 5u);  // draws advance
  // Greedy rows take no draw.
  std::vector<float> r = base;
  sample_one(a, r, greedy_params());
  EXPECT_EQ(a.engine_draws(), 20u);
}

double log_softmax_at(const std::vector<float>& logits, std::size_t valid, std::size_t i) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < valid; ++j) m = std::max(m, static_cast<double>(logits[j]));
  double sum = 0.0;
  for (std::size_t j = 0; j < valid; ++j) sum += std::exp(logits[j] - m);
  return logits[i] - m - std::log(sum);
}

TEST(SamplerLogprobs, RawLogSoftmaxTopNAndRank) {
  constexpr std::size_t kVocab = 100, kValid = 96;
  Sampler s(small_config(kVocab, kValid));
  std::vector<float> logits = random_logits(kVocab, 21);
  logits[97] = 40.0f;  // padding: not part of the softmax
  SamplingParams p;
  p.temperature = 1.3;
  p.logprobs = 5;
  p.repetition_penalty = 1.7;   // processing must not leak into the logprobs
  p.logit_bias = {{10, 30.0}};  // forces token 10
  p.seed = 5;
  const SampleOutput out = sample_one(s, logits, p, {10, 11}, {12});
  ASSERT_EQ(out.token, 10);
  ASSERT_TRUE(out.logprobs.has_value());
  const SampleLogprobs& lp = *out.logprobs;
  EXPECT_EQ(lp.sampled.token, 10);
  EXPECT_NEAR(lp.sampled.logprob, log_softmax_at(logits, kValid, 10), 1e-5);
  int64_t rank = 0;
  for (std::size_t j = 0; j < kValid; ++j) rank += logits[j] >= logits[10] ? 1 : 0;
  EXPECT_EQ(lp.sampled_rank, rank);

  ASSERT_EQ(lp.top.size(), 5u);
  std::vector<std::size_t> order(kValid);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(lp.top[r].token, static_cast<int32_t>(order[r])) << r;
    EXPECT_NEAR(lp.top[r].logprob, log_softmax_at(logits, kValid, order[r]), 1e-5);
    if (r > 0) EXPECT_GE(lp.top[r - 1].logprob, lp.top[r].logprob);
  }
}

TEST(SamplerLogprobs, GreedyRankOneZeroAndAll) {
  Sampler s(small_config(8, 8));
  std::vector<float> logits{0.0f, 1.0f, 3.0f, 3.0f, -1.0f, 2.0f, 0.5f, 0.25f};
  SamplingParams p = greedy_params();
  p.logprobs = 0;
  SampleOutput out = sample_one(s, logits, p);
  ASSERT_TRUE(out.logprobs.has_value());
  EXPECT_EQ(out.token, 2);
  EXPECT_TRUE(out.logprobs->top.empty());
  EXPECT_EQ(out.logprobs->sampled_rank, 2);  // token 3 ties: count of logprobs >= is 2
  p.logprobs = -1;
  out = sample_one(s, logits, p);
  ASSERT_EQ(out.logprobs->top.size(), 8u);
  EXPECT_EQ(out.logprobs->top[0].token, 2);  // ties: lower id first
  EXPECT_EQ(out.logprobs->top[1].token, 3);
  double total = 0.0;
  for (const TokenLogprob& t : out.logprobs->top) total += std::exp(t.logprob);
  EXPECT_NEAR(total, 1.0, 1e-5);
  p.logprobs.reset();
  EXPECT_FALSE(sample_one(s, logits, p).logprobs.has_value());
}

TEST(Sampler, RowIsRestoredAfterSampling) {
  Sampler s(small_config(50, 48, {3}));
  std::vector<float> logits = random_logits(50, 8);
  const std::vector<float> raw = logits;
  SamplingParams p;
  p.logit_bias = {{1, 5.0}, {3, -2.0}};
  p.min_tokens = 4;
  p.presence_penalty = 0.5;
  p.repetition_penalty = 1.3;
  p.top_k = 10;
  p.top_p = 0.8;
  p.min_p = 0.01;
  sample_one(s, logits, p, {1, 2, 3, 3}, {2, 5});
  EXPECT_EQ(logits, raw);
}

TEST(Sampler, RejectsMalformedInput) {
  EXPECT_THROW(Sampler(small_config(10, 11)), EngineConfigError);
  EXPECT_THROW(Sampler(small_config(10, 0)), EngineConfigError);
  Sampler s(small_config(10, 10));
  std::vector<float> short_row(9, 0.0f);
  const SamplingParams p;
  const SampleInput bad{short_row, &p, {}, {}};
  EXPECT_THROW(s.sample(std::span<const SampleInput>(&bad, 1)), EngineLogicError);
  std::vector<float> row(10, 0.0f);
  const SampleInput no_params{row, nullptr, {}, {}};
  EXPECT_THROW(s.sample(std::span<const SampleInput>(&no_params, 1)), EngineLogicError);
}

}  // namespace
}  // namespace fp4serve::engine
