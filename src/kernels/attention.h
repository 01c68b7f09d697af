// Causal GQA attention with Qwen3.5's sigmoid output gate (docs/model-arch.md §2.3, §6.7), over a KV cache
// that is either contiguous per sequence or paged (block table of fixed-size blocks), holding K/V
// as bf16 or fp8 e4m3 with per-tensor k_scale/v_scale (docs/quant-formats.md §4).
//
// Numerics per (query token t, q head h), kv head = h / (Hq/Hkv), keys j = 0 .. pos0 + t, with
// K_j, V_j as bf16 values (fp8: bf16(e4m3 * scale), vLLM's Triton read path). Two variants:
//   kHfEager (default; HF eager_attention_forward in bf16, what the goldens use):
//     s_j = bf16(bf16(dot(q, K_j)) * (1/sqrt(D)))      bf16 matmul output, bf16 scaling
//     e_j = exp(s_j - max s); l = sum_j e_j (j order); p_j = bf16(e_j * (1/l))   fp32 softmax -> bf16
//     o   = bf16(sum_j p_j V_j)                         (fma chain in j order, fp32)
//   kFp32 (flash-attention-like, no intermediate rounding):
//     s_j = dot(q, K_j) * (1/sqrt(D)); e_j, l as above; o = bf16((sum_j e_j V_j) / l)
//   then out = bf16(o * bf16(sigmoid(gate)))           (HF: gate multiply in bf16)
// dot is the canonical 32-lane fp32 dot (kernel_table.h).
// Each (t, h) is independent and reads keys in order, so results do not depend on how many tokens
// are in the step, on the block size or on threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>


namespace fp4serve::kernels {

enum class KvDtype : uint8_t { kBf16, kFp8E4M3 };

// K and V storage of one attention layer for one sequence. Layout of each of K and V:
// [num_blocks, block_size, n_kv_heads, head_dim] (vLLM's flash layout); token p lives in block
// block_table[p / block_size] at row p % block_size. Contiguous = block_table == nullptr: one
// block [capacity, n_kv_heads, head_dim].
struct KvView {
  KvDtype dtype = KvDtype::kBf16;
  void* k = nullptr;
  void* v = nullptr;
  int64_t block_size = 0;              // ignored when contiguous
  const int32_t* block_table = nullptr;
  int64_t num_table_entries = 0;       // length of block_table (checked against positions)
  int64_t capacity = 0;                // contiguous: rows allocated
  int n_kv_heads = 0;
  int head_dim = 0;
  float k_scale = 1.0f;                // fp8 dequant multipliers (write divides by them)
  float v_scale = 1.0f;
};

enum class AttentionMath : uint8_t { kHfEager, kFp32 };

}  // namespace fp4serve::kernels
