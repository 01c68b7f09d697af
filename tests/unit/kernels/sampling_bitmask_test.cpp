// The grammar bitmask of structured output in the CPU sampling op: only allowed tokens are drawn,
// greedy or random; the logprobs are the masked row's (masked tokens -inf, as vLLM applies the
// bitmask before its sampler); the caller's logits come back bit for bit; a short mask is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/sampling_cpu.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cpu {
namespace {

constexpr int64_t kVocab = 200;
constexpr int64_t kValid = 190;

std::vector<int32_t> mask_of(std::initializer_list<int32_t> ids) {
  std::vector<int32_t> m((kVocab + 31) / 32, 0);
  for (int32_t t : ids) m[static_cast<std::size_t>(t / 32)] |= static_cast<int32_t>(1u << (t % 32));
  return m;
}

SampleResult sample_one(std::vector<float>& logits, const SamplingOptions& o, std::span<const int32_t> mask,
                        std::span<TokenLogprob> top = {}) {
  SampleRow row;
  row.options = &o;
  row.token_bitmask = mask;
  row.top = top;
  SamplingConfig c;
  c.vocab_size = kVocab;
  c.valid_vocab_size = kValid;
  uint64_t draws = 0;
  c.engine_draws = &draws;
  SampleResult r;
  sample_rows(logits.data(), kVocab, std::span(&row, 1), c, std::span(&r, 1));
  return r;
}

TEST(SamplingBitmask, OnlyAllowedTokensAreDrawnAndTheLogitsComeBackUnchanged) {
  const std::vector<int32_t> mask = mask_of({3, 40, 77, 150});
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<float> logits = testing::random_logits(kVocab, seed);
    const std::vector<float> before = logits;
    SamplingOptions o;
    o.temperature = seed % 2 ? 0.0 : 1.5;
    o.seed = seed;
    o.top_k = seed % 3 == 0 ? 2 : 0;
    const SampleResult r = sample_one(logits, o, mask);
    EXPECT_TRUE(r.token == 3 || r.token == 40 || r.token == 77 || r.token == 150) << r.token;
    EXPECT_EQ(std::memcmp(logits.data(), before.data(), before.size() * sizeof(float)), 0);
    if (o.greedy()) {
      int32_t best = 3;
      for (int32_t t : {40, 77, 150}) if (before[static_cast<std::size_t>(t)] > before[static_cast<std::size_t>(best)]) best = t;
      EXPECT_EQ(r.token, best);
    }
  }
}

TEST(SamplingBitmask, LogprobsAreThoseOfTheMaskedRow) {
  std::vector<float> logits = testing::random_logits(kVocab, 7);
  const std::vector<int32_t> mask = mask_of({10, 20});
  SamplingOptions o;
  o.temperature = 0.0;
  o.logprobs = 3;
  std::vector<TokenLogprob> top(3);
  const SampleResult r = sample_one(logits, o, mask, top);
  ASSERT_TRUE(r.has_logprobs);
  const double a = logits[10], b = logits[20];
  const double lse = std::max(a, b) + std::log(std::exp(a - std::max(a, b)) + std::exp(b - std::max(a, b)));
  EXPECT_NEAR(r.logprob, logits[static_cast<std::size_t>(r.token)] - lse, 1e-5);
  EXPECT_EQ(r.rank, 1);
  ASSERT_EQ(r.num_top, 3);
  EXPECT_TRUE(std::isinf(top[2].logprob) && top[2].logprob < 0) << "a masked token's logprob is -inf";
}

TEST(SamplingBitmask, AMaskShorterThanTheLogitsRowIsRefused) {
  std::vector<float> logits = testing::random_logits(kVocab, 1);
  const std::vector<int32_t> shortmask(2, -1);
  SamplingOptions o;
  o.temperature = 0.0;
  EXPECT_THROW(sample_one(logits, o, shortmask), std::invalid_argument);
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
