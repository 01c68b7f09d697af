// Greedy argmax, the temperature/min-p/top-k/top-p filters and the draw, against a literal
// transcription of vLLM's tensors code (sampling_test_util.h).
#include "kernels/cpu/sampling_selection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "kernels/cpu/sampling_rng.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cpu {
namespace {

using testing::random_logits;
using testing::reference_probs;

// token -> probability from the selection (weights normalised).
std::map<int32_t, double> selected_probs(const std::vector<float>& logits, const RandomFilter& f) {
  SelectionScratch scratch;
  const auto cands = select_candidates(logits, f, scratch);
  double total = 0.0;
  for (const Candidate& c : cands) total += c.weight;
  std::map<int32_t, double> out;
  for (const Candidate& c : cands) {
    if (c.weight > 0.0f) out[c.token] += c.weight / total;
  }
  return out;
}

std::string describe(const RandomFilter& f) {
  return "T=" + std::to_string(f.temperature) + " k=" + std::to_string(f.top_k) +
         " p=" + std::to_string(f.top_p) + " min_p=" + std::to_string(f.min_p);
}

void expect_matches_reference(const std::vector<float>& logits, const RandomFilter& f) {
  const std::vector<double> ref = reference_probs(logits, f.temperature, f.top_k, f.top_p, f.min_p);
  const std::map<int32_t, double> got = selected_probs(logits, f);
  std::size_t ref_kept = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] > 0.0) {
      ++ref_kept;
      auto it = got.find(static_cast<int32_t>(i));
      ASSERT_NE(it, got.end()) << describe(f) << ": token " << i << " kept by the reference";
      EXPECT_NEAR(it->second, ref[i], 1e-5 * std::max(1.0, ref[i]))
          << describe(f) << " token " << i;
    }
  }
  EXPECT_EQ(got.size(), ref_kept) << describe(f)
                                  << ": the sampler keeps tokens the reference drops";
}

TEST(SamplerArgmax, FirstMaximumWins) {
  EXPECT_EQ(argmax_first(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(argmax_first(std::vector<float>{5.0f}), 0);
  std::vector<float> big(1000, -1.0f);
  big[997] = 4.0f;
  big[998] = 4.0f;
  EXPECT_EQ(argmax_first(big), 997);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(argmax_first(std::vector<float>{ninf, ninf, ninf}), 0);
}

TEST(SamplerSelection, MatchesReferenceOverAGridOfFilters) {
  const std::vector<float> logits = random_logits(61, 1234);
  const int64_t v = static_cast<int64_t>(logits.size());
  for (float t : {0.3f, 1.0f, 1.7f}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{10}, v - 1, v, v + 5}) {
      for (double p : {1.0, 0.95, 0.6, 0.2, 0.01}) {
        for (double min_p : {0.0, 0.02, 0.3}) {
          expect_matches_reference(logits, RandomFilter{t, k, p, min_p});
        }
      }
    }
  }
}

TEST(SamplerSelection, MatchesReferenceOnManyRandomRows) {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const std::vector<float> logits = random_logits(200 + seed * 7, 99 + seed, 1.0f + 0.1f * seed);
    expect_matches_reference(logits, RandomFilter{0.8f, 20, 0.95, 0.0});
    expect_matches_reference(logits, RandomFilter{1.0f, 0, 0.9, 0.0});
    expect_matches_reference(logits, RandomFilter{0.6f, 0, 1.0, 0.05});
    expect_matches_reference(logits, RandomFilter{1.2f, 50, 0.7, 0.01});
  }
}

TEST(SamplerSelection, TopKKeepsTiesAtTheBoundary) {
  // vLLM keeps every logit >= the k-th largest value, so ties can exceed k.
  const std::vector<float> logits{1.0f, 2.0f, 2.0f, 2.0f, 3.0f, 0.5f};
  const auto got = selected_probs(logits, RandomFilter{1.0f, 2, 1.0, 0.0});
  EXPECT_EQ(got.size(), 4u);
  for (int32_t t : {1, 2, 3, 4}) EXPECT_TRUE(got.count(t)) << t;
}

TEST(SamplerSelection, TopPAlwaysKeepsTheTopToken) {
  const std::vector<float> logits{0.0f, 9.0f, 0.1f};
  const auto got = selected_probs(logits, RandomFilter{1.0f, 0, 1e-6, 0.0});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.begin()->first, 1);
}

TEST(SamplerSelection, TopPWithoutTopKOnFlatAndSpreadVocabularies) {
  // Nearly uniform over 5000 tokens: the nucleus holds ~90% of them and the cut falls inside a
  // crowded bucket.
  std::vector<float> logits = random_logits(5000, 7, 0.05f);
  expect_matches_reference(logits, RandomFilter{1.0f, 0, 0.9, 0.0});
  // A spread of magnitudes: some mass far below 1e-3 of the top.
  logits = random_logits(5000, 8, 4.0f);
  expect_matches_reference(logits, RandomFilter{1.0f, 0, 0.999, 0.0});
  expect_matches_reference(logits, RandomFilter{2.0f, 0, 0.99, 0.0});
}

TEST(SamplerSelection, MinPIsAppliedBeforeTopK) {
  // min_p drops tokens 0 and 1 (far below 0.5 * top); top-k 3 then picks among what is left,
  // so only 2 tokens survive, not 3.
  const std::vector<float> logits{-5.0f, -4.0f, 2.0f, 2.2f};
  const auto got = selected_probs(logits, RandomFilter{1.0f, 3, 1.0, 0.5});
  EXPECT_EQ(got.size(), 2u);
  EXPECT_TRUE(got.count(2) && got.count(3));
  expect_matches_reference(logits, RandomFilter{1.0f, 3, 1.0, 0.5});
}

TEST(SamplerSelection, MaskedTokensAreNeverCandidates) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> logits{ninf, 1.0f, ninf, 0.5f};
  for (int64_t k : {0, 3}) {
    const auto got = selected_probs(logits, RandomFilter{1.0f, k, 1.0, 0.0});
    EXPECT_EQ(got.size(), 2u);
    EXPECT_FALSE(got.count(0) || got.count(2));
  }
}

TEST(SamplerSelection, DegenerateRowsDoNotCrash) {
  const float ninf = -std::numeric_limits<float>::infinity();
  SelectionScratch scratch;
  const std::vector<float> all_masked{ninf, ninf, ninf};
  const auto c = select_candidates(all_masked, RandomFilter{1.0f, 0, 0.9, 0.0}, scratch);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(draw_candidate(c, 0.7), 0);
}

// The empirical distribution of many draws matches the expected probabilities: each count within
// 6 standard deviations (+1) of N p, and no draw outside the kept set. Uniforms come from Philox
// with fixed keys, so the test is deterministic.
TEST(SamplerDraw, EmpiricalDistributionMatchesProbabilities) {
  const std::vector<float> logits{1.0f, 0.2f, 2.5f, -1.0f, 2.4f, 0.0f, 1.1f, -3.0f, 0.7f, 1.9f};
  for (const RandomFilter& f : {RandomFilter{1.0f, 0, 1.0, 0.0}, RandomFilter{0.7f, 5, 0.9, 0.0},
                                RandomFilter{1.5f, 0, 0.8, 0.0}, RandomFilter{1.0f, 0, 1.0, 0.2}}) {
    const std::vector<double> ref =
        reference_probs(logits, f.temperature, f.top_k, f.top_p, f.min_p);
    constexpr int kDraws = 200000;
    std::vector<int> counts(logits.size(), 0);
    SelectionScratch scratch;
    for (int i = 0; i < kDraws; ++i) {
      const auto cands = select_candidates(logits, f, scratch);
      ++counts[static_cast<std::size_t>(draw_candidate(
          cands, philox_uniform(2024, RngStream::kSeededRequest, static_cast<uint64_t>(i))))];
    }
    for (std::size_t t = 0; t < logits.size(); ++t) {
      const double expected = kDraws * ref[t];
      const double sigma = std::sqrt(kDraws * ref[t] * (1.0 - ref[t]));
      EXPECT_LE(std::fabs(counts[t] - expected), 6.0 * sigma + 1.0)
          << describe(f) << " token " << t << " drawn " << counts[t] << " times, expected "
          << expected;
      if (ref[t] == 0.0) EXPECT_EQ(counts[t], 0) << describe(f) << " token " << t;
    }
  }
}

TEST(SamplerDraw, InverseCdfBoundaries) {
  const std::vector<Candidate> c{{4, 0.0f, 1.0f}, {9, 0.0f, 0.0f}, {2, 0.0f, 3.0f}};
  EXPECT_EQ(draw_candidate(c, 0.0), 4);
  EXPECT_EQ(draw_candidate(c, 0.2499), 4);
  EXPECT_EQ(draw_candidate(c, 0.25), 2);  // zero-weight token 9 is skipped
  EXPECT_EQ(draw_candidate(c, 0.9999999), 2);
}

TEST(SamplerRng, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  EXPECT_EQ(philox4x32({0, 0}, {0, 0, 0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(
      philox4x32({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}),
      (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(
      philox4x32({0xa4093822u, 0x299f31d0u}, {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}),
      (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(SamplerRng, UniformsAreInRangeAndStreamsDiffer) {
  double sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = philox_uniform(7, RngStream::kSeededRequest, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NE(philox_uniform(7, RngStream::kSeededRequest, 3),
            philox_uniform(7, RngStream::kEngine, 3));
  EXPECT_NE(philox_uniform(7, RngStream::kSeededRequest, 3),
            philox_uniform(8, RngStream::kSeededRequest, 3));
  EXPECT_EQ(philox_uniform(7, RngStream::kSeededRequest, 3),
            philox_uniform(7, RngStream::kSeededRequest, 3));
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
