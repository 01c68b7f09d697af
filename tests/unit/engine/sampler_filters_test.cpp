// The per-request token filters through the Sampler: allowed_token_ids, logprob_token_ids and the
// thinking budget. Each is a per-row rule: a row's token and logprobs are the same alone and in a
// batch whose other rows carry other masks (the invariance contract).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::engine {
namespace {

using testing::random_logits;

constexpr int64_t kVocab = 300, kValid = 290;
constexpr int32_t kThink = 280, kEndThink = 281;

Sampler make_sampler() {
  SamplerConfig c;
  c.vocab_size = kVocab;
  c.valid_vocab_size = kValid;
  c.seed = 7;
  return Sampler(c);
}

SampleOutput sample_one(Sampler& s, std::vector<float> logits, const SamplingParams& p,
                        const std::vector<int32_t>& prompt = {}, const std::vector<int32_t>& output = {}) {
  const SampleInput in{logits, &p, prompt, output};
  return s.sample(std::span<const SampleInput>(&in, 1)).at(0);
}

double log_softmax_at(const std::vector<float>& logits, std::size_t i) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < kValid; ++j) m = std::max(m, static_cast<double>(logits[j]));
  double sum = 0.0;
  for (std::size_t j = 0; j < kValid; ++j) sum += std::exp(logits[j] - m);
  return logits[i] - m - std::log(sum);
}

TEST(SamplerAllowedTokenIds, OnlyThoseIdsAreSampled) {
  Sampler s = make_sampler();
  const std::vector<float> logits = random_logits(kVocab, 3, 0.3f);
  SamplingParams p;
  p.allowed_token_ids = std::vector<int64_t>{40, 7, 200, 7};
  const std::set<int32_t> allowed{7, 40, 200};
  std::set<int32_t> seen;
  for (int64_t seed = 0; seed < 400; ++seed) {
    p.seed = seed;
    const int32_t t = sample_one(s, logits, p).token;
    ASSERT_TRUE(allowed.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen, allowed) << "a flat row: every allowed id gets drawn";
  // Greedy takes the best allowed one.
  SamplingParams g;
  g.temperature = 0.0;
  g.allowed_token_ids = std::vector<int64_t>{40, 7, 200};
  const int32_t best = *std::max_element(allowed.begin(), allowed.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<std::size_t>(a)] < logits[static_cast<std::size_t>(b)];
  });
  EXPECT_EQ(sample_one(s, logits, g).token, best);
  // The logprobs stay those of the raw row (vLLM's raw_logprobs), not of the masked one.
  g.logprobs = 1;
  const SampleOutput out = sample_one(s, logits, g);
  EXPECT_NEAR(out.logprobs->sampled.logprob, log_softmax_at(logits, static_cast<std::size_t>(best)), 1e-5);
}

TEST(SamplerLogprobTokenIds, ExactlyTheNamedIdsInTheirOrder) {
  Sampler s = make_sampler();
  std::vector<float> logits = random_logits(kVocab, 5);
  logits[295] = 3.0f;  // a padding row: named, scored, never part of the distribution
  SamplingParams p;
  p.temperature = 0.0;
  p.logprob_token_ids = std::vector<int64_t>{12, 3, 295, 12};
  const SampleOutput out = sample_one(s, logits, p);
  ASSERT_TRUE(out.logprobs.has_value());
  const SampleLogprobs& lp = *out.logprobs;
  ASSERT_EQ(lp.top.size(), 4u);
  const int32_t expected_ids[] = {12, 3, 295, 12};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(lp.top[i].token, expected_ids[i]);
    EXPECT_NEAR(lp.top[i].logprob, log_softmax_at(logits, static_cast<std::size_t>(expected_ids[i])), 1e-5);
  }
  // The sampled token's entry is what a top-N request reports for it, bit for bit.
  SamplingParams top = p;
  top.logprob_token_ids.reset();
  top.logprobs = 2;
  const SampleOutput ref = sample_one(s, logits, top);
  EXPECT_EQ(out.token, ref.token);
  EXPECT_EQ(lp.sampled.logprob, ref.logprobs->sampled.logprob);
  EXPECT_EQ(lp.sampled_rank, ref.logprobs->sampled_rank);
  // And a named id's value is the top-N's value for the same id.
  SamplingParams named_top = p;
  named_top.logprob_token_ids = std::vector<int64_t>{ref.logprobs->top[1].token};
  EXPECT_EQ(sample_one(s, logits, named_top).logprobs->top[0].logprob, ref.logprobs->top[1].logprob);
}

TEST(SamplerThinkingBudget, TheEndMarkerIsForcedWhenTheBudgetIsSpent) {
  Sampler s = make_sampler();
  std::vector<float> logits = random_logits(kVocab, 9);
  logits[kEndThink] = -20.0f;  // the model would never end its reasoning by itself
  SamplingParams p;
  p.thinking_token_budget = 3;
  p.reasoning_start_ids = {kThink};
  p.reasoning_end_ids = {kEndThink};
  const std::vector<int32_t> prompt{1, 2, kThink, 10};  // "<think>\n": one token already in the block
  for (int64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    ASSERT_NE(sample_one(s, logits, p, prompt, {4}).token, kEndThink);
    ASSERT_EQ(sample_one(s, logits, p, prompt, {4, 5}).token, kEndThink) << "seed " << seed;
    ASSERT_NE(sample_one(s, logits, p, prompt, {4, 5, kEndThink}).token, kEndThink);
  }
  // Forcing leaves the logprobs raw: the forced token's logprob is the model's own.
  p.logprobs = 0;
  const SampleOutput out = sample_one(s, logits, p, prompt, {4, 5});
  EXPECT_NEAR(out.logprobs->sampled.logprob, log_softmax_at(logits, kEndThink), 1e-5);
}

TEST(SamplerFilters, ARowIsTheSameAloneAndInAMixedBatch) {
  Sampler alone = make_sampler();
  Sampler batched = make_sampler();
  std::vector<SamplingParams> params(4);
  params[0].seed = 1;
  params[0].allowed_token_ids = std::vector<int64_t>{5, 6, 7, 8};
  params[0].logprob_token_ids = std::vector<int64_t>{6, 100};
  params[1].temperature = 0.0;
  params[1].logprobs = 3;
  params[2].seed = 2;
  params[2].top_k = 20;
  params[2].thinking_token_budget = 1;
  params[2].reasoning_start_ids = {kThink};
  params[2].reasoning_end_ids = {kEndThink};
  params[3].temperature = 0.0;
  params[3].allowed_token_ids = std::vector<int64_t>{250, 9};
  const std::vector<std::vector<int32_t>> prompts{{1}, {2, 3}, {kThink}, {4}};
  const std::vector<std::vector<int32_t>> outputs{{}, {9}, {11}, {}};
  std::vector<float> logits;
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<float> row = random_logits(kVocab, 40 + i, 0.5f);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<SampleInput> batch;
  for (std::size_t i = 0; i < 4; ++i)
    batch.push_back({std::span<float>(logits).subspan(i * kVocab, kVocab), &params[i], prompts[i], outputs[i]});
  const std::vector<SampleOutput> together = batched.sample(batch);
  for (std::size_t i = 0; i < 4; ++i) {
    const std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(i * kVocab),
                                 logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * kVocab));
    const SampleOutput one = sample_one(alone, row, params[i], prompts[i], outputs[i]);
    EXPECT_EQ(one.token, together[i].token) << i;
    ASSERT_EQ(one.logprobs.has_value(), together[i].logprobs.has_value()) << i;
    if (!one.logprobs) continue;
    EXPECT_EQ(one.logprobs->sampled.logprob, together[i].logprobs->sampled.logprob) << i;
    ASSERT_EQ(one.logprobs->top.size(), together[i].logprobs->top.size()) << i;
    for (std::size_t k = 0; k < one.logprobs->top.size(); ++k) {
      EXPECT_EQ(one.logprobs->top[k].token, together[i].logprobs->top[k].token) << i;
      EXPECT_EQ(one.logprobs->top[k].logprob, together[i].logprobs->top[k].logprob) << i;
    }
  }
  EXPECT_TRUE(together[0].token >= 5 && together[0].token <= 8) << together[0].token;
  EXPECT_EQ(together[2].token, kEndThink);
  EXPECT_TRUE(together[3].token == 250 || together[3].token == 9) << together[3].token;
}

}  // namespace
}  // namespace fp4serve::engine
