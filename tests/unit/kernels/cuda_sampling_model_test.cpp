// The CUDA sampling kernel's selection algorithm (modelled one thread at a time in
// cuda_sampling_model.h, with the kernel's own scalar rules) against the CPU op's selection on
// random rows: the same top-k set, and the same token for every uniform. Header-only on the CUDA
// side, so it runs in every build, with or without the CUDA toolkit.
#include "unit/kernels/cuda_sampling_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sampling_logprobs.h"
#include "kernels/cpu/sampling_selection.h"
#include "unit/kernels/sampling_test_util.h"

namespace fp4serve::kernels::cuda {
namespace {

namespace rules = sampling_rules;

// A row of `v` logits: Gaussian, optionally rounded to a grid (many exact ties) and with some
// tokens masked to -inf (as a grammar or allowed ids would).
std::vector<float> make_row(std::size_t v, uint32_t seed, float scale, bool ties, bool masked) {
  std::vector<float> row = testing::random_logits(v, seed, scale);
  std::mt19937 gen(seed ^ 0x9e3779b9u);
  for (float& x : row) {
    if (ties) x = std::round(x * 4.0f) / 4.0f;
    if (masked && gen() % 3 == 0) x = -INFINITY;
  }
  return row;
}

int cpu_token(const std::vector<float>& row, const model::Filter& f, double u, cpu::SelectionScratch& scratch) {
  const cpu::RandomFilter filter{f.temperature, f.top_k, f.top_p, static_cast<double>(f.min_p)};
  return cpu::draw_candidate(cpu::select_candidates(row, filter, scratch), u);
}

struct Case {
  model::Filter filter;
  std::string name;
};

std::vector<Case> filters() {
  std::vector<Case> cases;
  for (float t : {0.4f, 1.0f, 1.7f})
    for (int k : {0, 1, 7, 50, 900})
      for (double p : {1.0, 0.95, 0.6, 0.02})
        for (float min_p : {0.0f, 0.05f}) {
          model::Filter f{t, k, p, min_p};
          cases.push_back({f, "t=" + std::to_string(t) + " k=" + std::to_string(k) + " p=" + std::to_string(p) +
                                  " min_p=" + std::to_string(min_p)});
        }
  return cases;
}

TEST(CudaSamplingModel, DrawsTheCpuTokenForEveryFilterAndUniform) {
  cpu::SelectionScratch scratch;
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  int compared = 0, differing = 0;
  uint32_t seed = 1;
  for (const Case& c : filters()) {
    for (int shape = 0; shape < 3; ++shape) {
      const bool ties = shape == 1, masked = shape == 2;
      const std::vector<float> row = make_row(1500, seed++, shape == 0 ? 2.0f : 0.7f, ties, masked);
      for (int draw = 0; draw < 6; ++draw) {
        const double u = draw == 0 ? 0.0 : uniform(gen);
        const int want = cpu_token(row, c.filter, u, scratch);
        const int got = model::select_random(row, c.filter, u);
        ++compared;
        if (want != got) {
          ++differing;
          ADD_FAILURE() << c.name << " shape " << shape << " u " << u << ": cpu " << want << ", kernel model " << got;
        }
      }
    }
  }
  EXPECT_EQ(differing, 0) << "of " << compared;
}

TEST(CudaSamplingModel, TopKKeepsExactlyTheCpuSet) {
  cpu::SelectionScratch scratch;
  uint32_t seed = 100;
  for (const Case& c : filters()) {
    if (c.filter.top_k == 0 || c.filter.top_p < 1.0) continue;
    for (int shape = 0; shape < 3; ++shape) {
      const std::vector<float> row = make_row(2000, seed++, 1.0f, shape == 1, shape == 2);
      const cpu::RandomFilter filter{c.filter.temperature, c.filter.top_k, 1.0, static_cast<double>(c.filter.min_p)};
      std::vector<int32_t> want;
      for (const cpu::Candidate& x : cpu::select_candidates(row, filter, scratch)) want.push_back(x.token);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(model::top_k_set(row, c.filter), want) << c.name << " shape " << shape;
      if (shape == 1 && c.filter.min_p == 0.0f)
        EXPECT_GE(want.size(), static_cast<std::size_t>(c.filter.top_k)) << "ties at the k-th stay";
    }
  }
}

TEST(CudaSamplingModel, DegenerateRowsTakeTheFirstMaximum) {
  std::vector<float> row(300, -INFINITY);
  EXPECT_EQ(model::select_random(row, {1.0f, 5, 0.9, 0.0f}, 0.5), 0);
  row[17] = INFINITY;
  row[40] = INFINITY;
  cpu::SelectionScratch scratch;
  EXPECT_EQ(model::select_random(row, {1.0f, 0, 1.0, 0.0f}, 0.7), cpu_token(row, {1.0f, 0, 1.0, 0.0f}, 0.7, scratch));
  EXPECT_EQ(model::select_random(row, {1.0f, 0, 1.0, 0.0f}, 0.7), 17);
}

TEST(CudaSamplingModel, TopNLogprobsAreTheCpuOpsInItsOrder) {
  uint32_t seed = 500;
  for (int want : {1, 2, 5, 20, 64, 333, 1024}) {
    for (int shape = 0; shape < 3; ++shape) {
      const std::vector<float> row = make_row(3000, seed++, 1.0f, shape == 1, shape == 2);
      std::vector<TokenLogprob> top(static_cast<std::size_t>(want));
      ASSERT_EQ(cpu::top_logits(row, static_cast<std::size_t>(want), top), static_cast<std::size_t>(want));
      const auto got = model::top_n(row, want);
      for (int i = 0; i < want; ++i) {
        const auto k = static_cast<std::size_t>(i);
        ASSERT_EQ(got[k].first, top[k].token) << "N " << want << " shape " << shape << " entry " << i;
        ASSERT_EQ(got[k].second, top[k].logprob) << "N " << want << " shape " << shape << " entry " << i;
      }
    }
  }
}

TEST(CudaSamplingRules, OrderKeysSortAsTheFloats) {
  const std::vector<float> sorted = {-INFINITY, -3e38f, -1.5f, -1e-40f, 0.0f, 1e-40f, 2.0f, 3e38f, INFINITY};
  for (std::size_t i = 0; i + 1 < sorted.size(); ++i)
    EXPECT_LT(rules::order_key(sorted[i]), rules::order_key(sorted[i + 1])) << sorted[i];
  EXPECT_EQ(rules::order_key(-0.0f), rules::order_key(0.0f));
  for (float x : sorted) EXPECT_EQ(rules::key_float(rules::order_key(x)), x);
}

TEST(CudaSamplingRules, MassesAndThresholds) {
  // The sum of every weight (each <= 1) fits in 63 bits at the largest vocabularies.
  for (int64_t valid : {1, 1000, 248077, 248320, 1 << 20, 1 << 30}) {
    const int shift = rules::fixed_mass_shift(valid);
    EXPECT_LE(shift, 44);
    EXPECT_LT(static_cast<double>(valid) * std::ldexp(1.0, shift), std::ldexp(1.0, 63)) << valid;
  }
  const double scale = std::ldexp(1.0, 44);
  EXPECT_EQ(rules::fixed_mass(1.0f, scale), uint64_t{1} << 44);
  EXPECT_EQ(rules::fixed_mass(0.0f, scale), 0u);
  // Top-p: the prefix ends at the first cumulative mass >= top_p * total, i.e. > the threshold.
  EXPECT_EQ(rules::top_p_threshold(0.5, 100), 49u);
  EXPECT_EQ(rules::top_p_threshold(0.505, 100), 50u);  // ceil(50.5) - 1
  EXPECT_EQ(rules::top_p_threshold(0.0, 100), 0u);     // the top token alone
  EXPECT_EQ(rules::top_p_threshold(0.9999999999, 100), 99u);
  EXPECT_EQ(rules::draw_target(0.0, 10), 0u);
  EXPECT_EQ(rules::draw_target(0.99999999999999, 10), 9u);
  EXPECT_EQ(rules::draw_target(0.5, 0), 0u);
  // Buckets are the CPU's: 1/16 nat each, the last one catching -inf.
  EXPECT_EQ(rules::bucket_of(5.0f, 5.0f), 0);
  EXPECT_EQ(rules::bucket_of(4.0f, 5.0f), 16);
  EXPECT_EQ(rules::bucket_of(-INFINITY, 5.0f), rules::kNumBuckets - 1);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda
