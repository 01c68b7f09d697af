#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels {
namespace {

// Element offset of token p's row for kv head 0.
int64_t row_offset(const KvView& kv, int64_t p) {
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  if (kv.block_table == nullptr) {
    if (p < 0 || p >= kv.capacity)
      throw std::out_of_range("kv cache: position " + std::to_string(p) + " outside capacity " +
                              std::to_string(kv.capacity));
    return p * row;
  }
  const int64_t b = p / kv.block_size;
  if (p < 0 || b >= kv.num_table_entries)
    throw std::out_of_range("kv cache: position " + std::to_string(p) + " beyond the block table (" +
                            std::to_string(kv.num_table_entries) + " blocks of " + std::to_string(kv.block_size) +
                            ")");
  return (static_cast<int64_t>(kv.block_table[b]) * kv.block_size + p % kv.block_size) * row;
}

// One K or V head row as bf16 values in fp32.
void load_row(const KvView& kv, const void* base, int64_t off, float scale, float* out) {
  if (kv.dtype == KvDtype::kBf16) {
    bf16_to_f32(static_cast<const uint16_t*>(base) + off, out, kv.head_dim);
  } else {
    const float* t = e4m3_table();
    const uint8_t* p = static_cast<const uint8_t*>(base) + off;
    for (int i = 0; i < kv.head_dim; ++i) out[i] = round_bf16(t[p[i]] * scale);
  }
}

void check_view(const KvView& kv) {
  if (kv.k == nullptr || kv.v == nullptr || kv.n_kv_heads <= 0 || kv.head_dim <= 0)
    throw std::invalid_argument("kv cache view: null storage or empty head shape");
  if (kv.block_table != nullptr && kv.block_size <= 0)
    throw std::invalid_argument("kv cache view: paged layout needs block_size > 0");
  if (kv.dtype == KvDtype::kFp8E4M3 && !(kv.k_scale > 0.0f && kv.v_scale > 0.0f))
    throw std::invalid_argument("kv cache view: fp8 k_scale/v_scale must be > 0");
}

}  // namespace

void kv_write(const KvView& kv, const uint16_t* k, const uint16_t* v, int64_t T, int64_t pos0) {
  check_view(kv);
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t off = row_offset(kv, pos0 + t);
    if (kv.dtype == KvDtype::kBf16) {
      for (int64_t i = 0; i < row; ++i) {
        static_cast<uint16_t*>(kv.k)[off + i] = k[t * row + i];
        static_cast<uint16_t*>(kv.v)[off + i] = v[t * row + i];
      }
    } else {
      for (int64_t i = 0; i < row; ++i) {
        static_cast<uint8_t*>(kv.k)[off + i] = f32_to_e4m3(bf16_bits_to_f32(k[t * row + i]) / kv.k_scale);
        static_cast<uint8_t*>(kv.v)[off + i] = f32_to_e4m3(bf16_bits_to_f32(v[t * row + i]) / kv.v_scale);
      }
    }
  }
}

void gated_attention(const std::vector<AttentionSeq>& seqs, int Hq, Isa isa, AttentionMath math) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  std::vector<int64_t> first(seqs.size() + 1, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    check_view(s.kv);
    if (Hq % s.kv.n_kv_heads != 0) throw std::invalid_argument("gated_attention: Hq must be a multiple of Hkv");
    if (s.q == nullptr || s.gate == nullptr || s.out == nullptr)
      throw std::invalid_argument("gated_attention: null q, gate or out");
    first[i + 1] = first[i] + s.T * Hq;
  }
  cpu::parallel_for(first.back(), 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> qf, kf, acc, scores;
    size_t si = 0;
    for (int64_t item = i0; item < i1; ++item) {
      while (first[si + 1] <= item) ++si;
      const AttentionSeq& s = seqs[si];
      const int D = s.kv.head_dim;
      const int64_t t = (item - first[si]) / Hq;
      const int h = static_cast<int>((item - first[si]) % Hq);
      const int kvh = h / (Hq / s.kv.n_kv_heads);
      const int64_t L = s.pos0 + t + 1;  // keys 0 .. pos0 + t
      qf.resize(D);
      kf.resize(D);
      acc.assign(D, 0.0f);
      scores.resize(static_cast<size_t>(L));
      bf16_to_f32(s.q + (t * Hq + h) * D, qf.data(), D);
      const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
      const bool eager = math == AttentionMath::kHfEager;
      float mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        load_row(s.kv, s.kv.k, row_offset(s.kv, j) + static_cast<int64_t>(kvh) * D, s.kv.k_scale, kf.data());
        const float dot = kt.dot(qf.data(), kf.data(), D);
        scores[j] = eager ? round_bf16(round_bf16(dot) * scale) : dot * scale;
        mx = std::max(mx, scores[j]);
      }
      float l = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        l += scores[j];
      }
      const float inv_l = 1.0f / l;
      for (int64_t j = 0; j < L; ++j) {
        const float p = eager ? round_bf16(scores[j] * inv_l) : scores[j];
        load_row(s.kv, s.kv.v, row_offset(s.kv, j) + static_cast<int64_t>(kvh) * D, s.kv.v_scale, kf.data());
        kt.axpy(p, kf.data(), acc.data(), D);
      }
      const uint16_t* gate = s.gate + (t * Hq + h) * D;
      uint16_t* out = s.out + (t * Hq + h) * D;
      for (int d = 0; d < D; ++d) {
        const float o = round_bf16(eager ? acc[d] : acc[d] / l);
        out[d] = f32_to_bf16_bits(o * round_bf16(sigmoid(bf16_bits_to_f32(gate[d]))));
      }
    }
  });
}

}  // namespace fp4serve::kernels
