// Non-causal attention over whole segments (the vision tower's per-image attention), CPU.
// Work items are (segment, head, block of query rows). K (transposed) and V are converted to fp32 once
// per call into shared buffers; each score is a sum over the head dim in order (scores_block) and each
// output the canonical P.V sum in key order, so a row's result depends on nothing but its segment and
// is the same on every tier.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/attention_softmax.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vision_cpu.h"

namespace fp4serve::kernels {
namespace {

constexpr int64_t kQueriesPerItem = 32;
constexpr int64_t kKeysPerBlock = 64;  // keys whose K (or V) rows stay in L1 while the item's queries use them

// Scores of Q queries (q [Q, D]) against n keys of a transposed K (kt[d * ldk + j]): s[r * lds + j] =
// sum over d in order of q[r, d] * k[j, d] (separate multiply and add, fp32). Every j is its own
// chain, so the loop over j vectorizes without reordering a sum: the same bits on every tier.
inline void scores_block(const float* q, int64_t Q, int64_t D, const float* kt, int64_t ldk, int64_t n, float* s,
                         int64_t lds) {
  for (int64_t r = 0; r < Q; ++r) {
    float* sr = s + r * lds;
    for (int64_t j = 0; j < n; ++j) sr[j] = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      const float qv = q[r * D + d];
      const float* kr = kt + d * ldk;
      for (int64_t j = 0; j < n; ++j) sr[j] = sr[j] + qv * kr[j];
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void scores_block_avx512(
    const float* q, int64_t Q, int64_t D, const float* kt, int64_t ldk, int64_t n, float* s, int64_t lds) {
  scores_block(q, Q, D, kt, ldk, n, s, lds);
}

__attribute__((target("avx2"))) void scores_block_avx2(const float* q, int64_t Q, int64_t D, const float* kt,
                                                        int64_t ldk, int64_t n, float* s, int64_t lds) {
  scores_block(q, Q, D, kt, ldk, n, s, lds);
}

using ScoresFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);
ScoresFn scores_for(cpu::Isa isa) {
  if (isa >= cpu::Isa::kAvx512) return scores_block_avx512;
  if (isa >= cpu::Isa::kAvx2) return scores_block_avx2;
  return scores_block;
}

}  // namespace

void dense_attention(std::span<const DenseSegment> segments, const uint16_t* q, int64_t ldq, const uint16_t* k,
                     int64_t ldk, const uint16_t* v, int64_t ldv, int64_t T, int64_t H, int64_t D, uint16_t* out,
                     int64_t ldo, AttentionMath math, cpu::Isa isa) {
  for (const DenseSegment& s : segments)
    if (s.row0 < 0 || s.rows < 0 || s.row0 + s.rows > T)
      throw std::out_of_range("dense_attention: segment outside the rows");
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  const ScoresFn scores_fn = scores_for(isa);
  // fp32 V head-major (vf[(h * T + t) * D + d]) and K transposed per head (kf[(h * D + d) * T + t]).
  std::vector<float> kf(static_cast<size_t>(H * T * D)), vf(static_cast<size_t>(H * T * D));
  cpu::parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) kf[static_cast<size_t>((h * D + d) * T + t)] = bf16_bits_to_f32(k[t * ldk + h * D + d]);
        bf16_to_f32(v + t * ldv + h * D, vf.data() + (h * T + t) * D, D);
      }
  });
  struct Item {
    int64_t row0, keys, h, t0, t1;
  };
  std::vector<Item> items;
  for (const DenseSegment& s : segments)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t0 = 0; t0 < s.rows; t0 += kQueriesPerItem)
        items.push_back({s.row0, s.rows, h, s.row0 + t0, s.row0 + std::min(s.rows, t0 + kQueriesPerItem)});
  const bool eager = math == AttentionMath::kHfEager;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  cpu::parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> qbuf, scores, acc, sums;
    for (int64_t it = i0; it < i1; ++it) {
      const Item& item = items[static_cast<size_t>(it)];
      const int64_t Q = item.t1 - item.t0, L = item.keys;
      qbuf.resize(static_cast<size_t>(Q * D));
      scores.resize(static_cast<size_t>(Q * L));
      acc.assign(static_cast<size_t>(Q * D), 0.0f);
      sums.resize(static_cast<size_t>(Q));
      for (int64_t r = 0; r < Q; ++r) bf16_to_f32(q + (item.t0 + r) * ldq + item.h * D, qbuf.data() + r * D, D);
      const float* Kt = kf.data() + item.h * D * T + item.row0;  // [D, T] rows, from the segment's first key
      const float* V = vf.data() + (item.h * T + item.row0) * D;
      for (int64_t j0 = 0; j0 < L; j0 += kKeysPerBlock) {
        const int64_t n = std::min(kKeysPerBlock, L - j0);
        scores_fn(qbuf.data(), Q, D, Kt + j0, T, n, scores.data() + j0, L);
      }
      for (int64_t r = 0; r < Q; ++r) {
        float* sc = scores.data() + r * L;
        // kFp32 keeps 1/l for the end; eager rounds the probabilities to bf16 (HF's .to(query.dtype)).
        const float l = attention_softmax_row(sc, L, scale, eager);
        sums[static_cast<size_t>(r)] = l;
      }
      for (int64_t j0 = 0; j0 < L; j0 += kKeysPerBlock) {
        const int64_t n = std::min(kKeysPerBlock, L - j0);
        for (int64_t r = 0; r < Q; ++r)
          kt.weighted_sum(scores.data() + r * L + j0, V + j0 * D, D, n, D, acc.data() + r * D);
      }
      for (int64_t r = 0; r < Q; ++r) {
        uint16_t* o = out + (item.t0 + r) * ldo + item.h * D;
        const float* a = acc.data() + r * D;
        const float l = sums[static_cast<size_t>(r)];
        for (int64_t d = 0; d < D; ++d) o[d] = f32_to_bf16_bits(eager ? a[d] : a[d] / l);
      }
    }
  });
}

}  // namespace fp4serve::kernels
