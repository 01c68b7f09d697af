// fp32 FMA peak loop, AVX-512F (see roofline.h).
#include <immintrin.h>

#include "tools/bench/roofline.h"

namespace fp4serve::tools::bench {

float fma_loop_avx512(int64_t iters) {
  __m512 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
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
