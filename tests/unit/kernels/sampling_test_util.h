// A straightforward transcription of vLLM V1's sampling filters (full softmax, full sorts, in
// double), to check the sampling op's O(V) implementation against, and random logits rows. Used by
// the op's tests here and the engine's sampler tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace fp4serve::testing {

inline std::vector<double> softmax(const std::vector<double>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> p(x.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += (p[i] = std::exp(x[i] - m));
  for (double& v : p) v /= sum;
  return p;
}

// Probabilities vLLM would sample from: temperature (float32 division), min_p
// (MinPLogitsProcessor), top-k then top-p (apply_top_k_top_p). k <= 0 or >= V: off; p >= 1: off.
inline std::vector<double> reference_probs(const std::vector<float>& logits, float temperature,
                                           int64_t top_k, double top_p, double min_p) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const std::size_t v = logits.size();
  std::vector<double> s(v);
  for (std::size_t i = 0; i < v; ++i) s[i] = static_cast<double>(logits[i] / temperature);
  if (min_p > 0.0) {
    const std::vector<double> p = softmax(s);
    const double maxp = *std::max_element(p.begin(), p.end());
    for (std::size_t i = 0; i < v; ++i) {
      if (p[i] < maxp * min_p) s[i] = kNegInf;
    }
  }
  if (top_k > 0 && top_k < static_cast<int64_t>(v)) {
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<std::size_t>(top_k - 1)];
    for (double& x : s) {
      if (x < kth) x = kNegInf;
    }
  }
  if (top_p < 1.0) {
    const std::vector<double> p = softmax(s);
    std::vector<std::size_t> asc(v);
    std::iota(asc.begin(), asc.end(), 0);
    std::stable_sort(asc.begin(), asc.end(),
                     [&](std::size_t a, std::size_t b) { return s[a] < s[b]; });
    double cum = 0.0;
    for (std::size_t r = 0; r < v; ++r) {
      cum += p[asc[r]];
      if (r + 1 < v && cum <= 1.0 - top_p) s[asc[r]] = kNegInf;
    }
  }
  return softmax(s);
}

inline std::vector<float> random_logits(std::size_t v, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(v);
  for (float& x : logits) x = dist(gen);
  return logits;
}

}  // namespace fp4serve::testing
