// Gated DeltaNet pieces of Qwen3.5/3.6 linear-attention layers (docs/model-arch.md §2.2, §3, §6.1-6.5;
// HF Qwen3_5MoeGatedDeltaNet). Per-sequence state: conv state (raw pre-activation inputs) and the
// fp32 recurrent state S[Hv][dk][dv].
//
// The delta rule runs in its recurrent form for prefill too, so a prefill split anywhere gives the
// same bits as one long prefill (the chunked form reassociates across chunk boundaries).
#pragma once

#include <cstdint>


namespace fp4serve::kernels {

struct GdnDims {
  int Hk = 16;  // linear_num_key_heads
  int Hv = 32;  // linear_num_value_heads (a multiple of Hk; v head j uses k head j / (Hv/Hk))
  int dk = 128;
  int dv = 128;
  int conv_kernel = 4;
  int64_t key_dim() const { return static_cast<int64_t>(Hk) * dk; }
  int64_t value_dim() const { return static_cast<int64_t>(Hv) * dv; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels [q | k | v]
  int64_t conv_state_elems() const { return static_cast<int64_t>(conv_kernel - 1) * conv_dim(); }
  int64_t state_elems() const { return static_cast<int64_t>(Hv) * dk * dv; }
};

// Where one sequence's state of one GDN layer lives (device memory of the backend that allocated it).
struct GdnStateRef {
  uint16_t* conv = nullptr;  // [Kc-1, conv_dim] bf16 raw inputs, oldest first
  float* ssm = nullptr;      // [Hv, dk, dv] fp32
};

}  // namespace fp4serve::kernels
