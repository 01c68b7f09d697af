// bf16 dot-product peak loop, AVX-512 BF16 vdpbf16ps (see roofline.h): each instruction multiplies
// 32 bf16 pairs and adds them into 16 fp32 lanes (64 flops).
#include <immintrin.h>

#include "tools/bench/roofline.h"

namespace fp4serve::tools::bench {

float bf16_dot_loop_avx512bf16(int64_t iters) {
  __m512 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-6f), _mm512_set1_ps(2e-6f));
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kFmaChains; ++i) s = _mm512_add_ps(s, acc[i]);
  // Stored and summed by hand: GCC 12's _mm512_reduce_add_ps warns of an uninitialized temporary.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0.0f;
  for (float v : lanes) total += v;
  return total;
}

}  // namespace fp4serve::tools::bench
