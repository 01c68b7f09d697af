// One attention row's softmax, shared by the paged (causal, language model) and the dense
// (per-image, vision tower) attention so that both round exactly alike: scores are scaled (eager:
// through bf16 as HF's bf16 matmul output and scale), exponentiated against the row maximum, and
// either normalised and rounded to bf16 (eager: HF's .to(query.dtype) of the probabilities) or left
// unnormalised for the caller to divide by the returned sum at the end (fp32 numerics).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/bf16.h"

namespace fp4serve::kernels {

inline float attention_softmax_row(float* sc, int64_t n, float scale, bool eager) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    sc[j] = eager ? round_bf16(round_bf16(sc[j]) * scale) : sc[j] * scale;
    mx = std::max(mx, sc[j]);
  }
  float l = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    sc[j] = std::exp(sc[j] - mx);
    l += sc[j];
  }
  if (eager) {
    const float inv_l = 1.0f / l;
    for (int64_t j = 0; j < n; ++j) sc[j] = round_bf16(sc[j] * inv_l);
  }
  return l;
}

}  // namespace fp4serve::kernels
