#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/cpu/attention_softmax.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "tensor/float_formats.h"
#include "kernels/cpu/attention_cpu.h"

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

// Dequantizes K or V rows 0 .. L-1 of one kv head into out[L, D] (bf16 values in fp32).
// fp8: out = round_bf16(e4m3(code) * scale), through a 256-entry table built once per call.
void load_rows(const KvView& kv, const void* base, int kvh, int64_t L, float scale, float* out) {
  const int D = kv.head_dim;
  if (kv.dtype == KvDtype::kBf16) {
    for (int64_t j = 0; j < L; ++j)
      bf16_to_f32(static_cast<const uint16_t*>(base) + row_offset(kv, j) + static_cast<int64_t>(kvh) * D, out + j * D, D);
    return;
  }
  float table[256];
  const float* e4m3 = e4m3_table();
  for (int c = 0; c < 256; ++c) table[c] = round_bf16(e4m3[c] * scale);
  for (int64_t j = 0; j < L; ++j) {
    const uint8_t* p = static_cast<const uint8_t*>(base) + row_offset(kv, j) + static_cast<int64_t>(kvh) * D;
    float* o = out + j * D;
    for (int i = 0; i < D; ++i) o[i] = table[p[i]];
  }
}

// Query tokens per work item: an item dequantizes its kv head's rows once for all its tokens and
// all the q heads that share the kv head (GQA), instead of once per (token, q head).
constexpr int64_t kTokensPerItem = 32;
// Keys per block of the blocked passes: 32 rows of K or V (32 KB at head_dim 256) stay in L1 while
// all of an item's queries (up to 32 tokens x the GQA group) use them, instead of every query
// streaming all keys (at 2048 tokens that was ~16 GB per layer from L2/L3).
constexpr int64_t kKeysPerBlock = 32;
constexpr int64_t kMaxItemScores = int64_t{2} << 20;  // 8 MB of fp32 scores per work item

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

void gated_attention(std::span<const AttentionSeq> seqs, int Hq, Isa isa, AttentionMath math) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  // Work items: (sequence, kv head, block of kTokensPerItem query tokens).
  struct Item {
    size_t seq;
    int kvh;
    int64_t t0, t1;
  };
  // Items per sequence: kv heads x token blocks (below). Counted first so the list is one scratch array.
  auto tokens_per_item = [&](const AttentionSeq& s) {
    const int64_t group = Hq / s.kv.n_kv_heads, keys = s.pos0 + s.T;
    return std::clamp<int64_t>(kMaxItemScores / std::max<int64_t>(1, group * keys), 1, kTokensPerItem);
  };
  size_t max_items = 0;
  for (const AttentionSeq& s : seqs) {
    if (s.kv.n_kv_heads > 0)
      max_items += static_cast<size_t>(s.kv.n_kv_heads) * static_cast<size_t>((s.T + tokens_per_item(s) - 1) / tokens_per_item(s));
  }
  Item* items = cpu::scratch<Item>(cpu::Scratch::kAttnItems, max_items);
  size_t num_items = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    check_view(s.kv);
    if (Hq % s.kv.n_kv_heads != 0) throw std::invalid_argument("gated_attention: Hq must be a multiple of Hkv");
    if (s.q == nullptr || s.gate == nullptr || s.out == nullptr)
      throw std::invalid_argument("gated_attention: null q, gate or out");
    // Fewer tokens per item at long contexts: an item's scores are (tokens x group) x keys floats,
    // kept under kMaxItemScores (each query is computed alone, so the split changes no result).
    const int64_t per_item = tokens_per_item(s);
    for (int kvh = 0; kvh < s.kv.n_kv_heads; ++kvh)
      for (int64_t t0 = 0; t0 < s.T; t0 += per_item) items[num_items++] = {i, kvh, t0, std::min(s.T, t0 + per_item)};
  }
  const bool eager = math == AttentionMath::kHfEager;
  cpu::parallel_for(static_cast<int64_t>(num_items), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const Item& item = items[static_cast<size_t>(it)];
      const AttentionSeq& s = seqs[item.seq];
      const int D = s.kv.head_dim;
      const int group = Hq / s.kv.n_kv_heads;
      const int64_t L_max = s.pos0 + item.t1;  // the last token of the item sees keys 0 .. pos0 + t1 - 1
      // This thread's buffers (thread_scratch.h: grown once, reused by every later item and step).
      float* kbuf = cpu::scratch<float>(cpu::Scratch::kAttnK, static_cast<size_t>(L_max * D));
      float* vbuf = cpu::scratch<float>(cpu::Scratch::kAttnV, static_cast<size_t>(L_max * D));
      load_rows(s.kv, s.kv.k, item.kvh, L_max, s.kv.k_scale, kbuf);
      load_rows(s.kv, s.kv.v, item.kvh, L_max, s.kv.v_scale, vbuf);
      // The item's queries: (token t, q head h of the kv head's group), query r = (t - t0) * group + g.
      const int64_t Q = (item.t1 - item.t0) * group;
      float* qf = cpu::scratch<float>(cpu::Scratch::kAttnQ, static_cast<size_t>(Q * D));
      float* scores = cpu::scratch<float>(cpu::Scratch::kAttnScores, static_cast<size_t>(Q * L_max));
      float* acc = cpu::scratch<float>(cpu::Scratch::kAttnAcc, static_cast<size_t>(Q * D));
      std::fill(acc, acc + Q * D, 0.0f);
      float* sums = cpu::scratch<float>(cpu::Scratch::kAttnSums, static_cast<size_t>(Q));  // softmax denominators l
      auto keys_of = [&](int64_t r) { return s.pos0 + item.t0 + r / group + 1; };  // causal: keys 0 .. pos0 + t
      for (int64_t r = 0; r < Q; ++r) {
        const int64_t t = item.t0 + r / group;
        const int h = item.kvh * group + static_cast<int>(r % group);
        bf16_to_f32(s.q + (t * Hq + h) * D, qf + r * D, D);
      }
      // Keys in blocks that stay in L1 while every query of the item uses them (in order, so each
      // score's dot and each output element's fma chain over j are unchanged).
      for (int64_t j0 = 0; j0 < L_max; j0 += kKeysPerBlock)
        for (int64_t r = 0; r < Q; ++r) {
          const int64_t n = std::min(kKeysPerBlock, keys_of(r) - j0);
          if (n > 0) kt.dots(qf + r * D, kbuf + j0 * D, D, n, D, scores + r * L_max + j0);
        }
      const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
      for (int64_t r = 0; r < Q; ++r) {
        float* sc = scores + r * L_max;
        const int64_t L = keys_of(r);
        const float l = attention_softmax_row(sc, L, scale, eager);
        sums[static_cast<size_t>(r)] = l;
      }
      for (int64_t j0 = 0; j0 < L_max; j0 += kKeysPerBlock)
        for (int64_t r = 0; r < Q; ++r) {
          const int64_t n = std::min(kKeysPerBlock, keys_of(r) - j0);
          if (n > 0) kt.weighted_sum(scores + r * L_max + j0, vbuf + j0 * D, D, n, D, acc + r * D);
        }
      for (int64_t r = 0; r < Q; ++r) {
        const int64_t t = item.t0 + r / group;
        const int h = item.kvh * group + static_cast<int>(r % group);
        const float l = sums[static_cast<size_t>(r)];
        const uint16_t* gate = s.gate + (t * Hq + h) * D;
        uint16_t* out = s.out + (t * Hq + h) * D;
        const float* a = acc + r * D;
        for (int d = 0; d < D; ++d) {
          const float o = round_bf16(eager ? a[d] : a[d] / l);
          out[d] = f32_to_bf16_bits(o * round_bf16(sigmoid(bf16_bits_to_f32(gate[d]))));
        }
      }
    }
  });
}

}  // namespace fp4serve::kernels
