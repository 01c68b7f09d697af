// Non-causal attention over whole segments (the vision tower's per-image attention), CPU.
// Work items are (segment, head, block of query rows). K and V of a (segment, head) are converted to
// fp32 once per call into shared buffers; each query's scores are canonical dots in key order and its
// output the canonical P.V sum in key order, so a row's result depends on nothing but its segment.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vision_cpu.h"

namespace fp4serve::kernels {
namespace {

constexpr int64_t kQueriesPerItem = 32;
constexpr int64_t kKeysPerBlock = 64;  // keys whose K (or V) rows stay in L1 while the item's queries use them

}  // namespace

void dense_attention(std::span<const DenseSegment> segments, const uint16_t* q, int64_t ldq, const uint16_t* k,
                     int64_t ldk, const uint16_t* v, int64_t ldv, int64_t T, int64_t H, int64_t D, uint16_t* out,
                     int64_t ldo, AttentionMath math, cpu::Isa isa) {
  for (const DenseSegment& s : segments)
    if (s.row0 < 0 || s.rows < 0 || s.row0 + s.rows > T)
      throw std::out_of_range("dense_attention: segment outside the rows");
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  // fp32 K and V, head-major: kf[(h * T + t) * D + d].
  std::vector<float> kf(static_cast<size_t>(H * T * D)), vf(static_cast<size_t>(H * T * D));
  cpu::parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < H; ++h) {
        bf16_to_f32(k + t * ldk + h * D, kf.data() + (h * T + t) * D, D);
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
      const float* K = kf.data() + (item.h * T + item.row0) * D;
      const float* V = vf.data() + (item.h * T + item.row0) * D;
      for (int64_t j0 = 0; j0 < L; j0 += kKeysPerBlock) {
        const int64_t n = std::min(kKeysPerBlock, L - j0);
        for (int64_t r = 0; r < Q; ++r) kt.dots(qbuf.data() + r * D, K + j0 * D, D, n, D, scores.data() + r * L + j0);
      }
      for (int64_t r = 0; r < Q; ++r) {
        float* sc = scores.data() + r * L;
        float mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          sc[j] = eager ? round_bf16(round_bf16(sc[j]) * scale) : sc[j] * scale;
          mx = std::max(mx, sc[j]);
        }
        float l = 0.0f;
        for (int64_t j = 0; j < L; ++j) {
          sc[j] = std::exp(sc[j] - mx);
          l += sc[j];
        }
        const float inv_l = 1.0f / l;
        // kFp32 keeps 1/l for the end; eager rounds the probabilities to bf16 (HF's .to(query.dtype)).
        for (int64_t j = 0; j < L; ++j) sc[j] = eager ? round_bf16(sc[j] * inv_l) : sc[j];
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
