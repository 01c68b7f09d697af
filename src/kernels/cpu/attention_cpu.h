// The CPU entry points of attention (kernels/attention.h has the types and the math): the KV write and
// the gated attention of a step's sequences, on one kernel tier.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"

namespace fp4serve::kernels {

using cpu::Isa;

// Stores k/v rows ([T, n_kv_heads, head_dim] bf16, post-norm post-RoPE) at positions pos0 .. pos0+T-1.
// fp8: e4m3_satfinite(k / k_scale). Throws if a position falls outside the table/capacity.
void kv_write(const KvView& kv, const uint16_t* k, const uint16_t* v, int64_t T, int64_t pos0);

struct AttentionSeq {
  const uint16_t* q = nullptr;     // [T, Hq, D] bf16 (post q_norm, post RoPE)
  const uint16_t* gate = nullptr;  // [T, Hq * D] bf16 (the gate half of q_proj)
  int64_t T = 0;
  int64_t pos0 = 0;                // position of the first query = keys cached before this step
  KvView kv;                       // must already hold keys 0 .. pos0 + T - 1
  uint16_t* out = nullptr;         // [T, Hq * D] bf16
};


// All sequences of a step in one parallel region; work items are (sequence, token, head).
void gated_attention(std::span<const AttentionSeq> seqs, int Hq, Isa isa = cpu::active_isa(),
                     AttentionMath math = AttentionMath::kHfEager);
inline void gated_attention(std::initializer_list<AttentionSeq> seqs, int Hq, Isa isa = cpu::active_isa(),
                            AttentionMath math = AttentionMath::kHfEager) {
  gated_attention(std::span<const AttentionSeq>(seqs.begin(), seqs.size()), Hq, isa, math);
}

}  // namespace fp4serve::kernels
