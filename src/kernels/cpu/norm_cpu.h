// RMSNorm variants of Qwen3.5/3.6 (docs/model-arch.md §2.1 and §6.2), rows of D elements.
// Sums of squares use the canonical 32-lane dot (kernel_table.h), so every ISA path is identical.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace fp4serve::kernels {

using cpu::Isa;

// Zero-centred RMSNorm (Qwen3_5MoeRMSNorm): all fp32, one final cast.
//   r = 1 / sqrt(sum(x^2) / D + eps);  out = bf16((x * r) * (1 + w))
// x, out: bf16 [rows, D] (may alias); w: D floats holding the bf16 weight values.
void rmsnorm_1p(const uint16_t* x, int64_t rows, int64_t D, const float* w, float eps, uint16_t* out,
                Isa isa = cpu::active_isa());

// Gated RMSNorm (Qwen3_5MoeRMSNormGated, norm before gate, plain weight):
//   n = bf16(x * r);  y = bf16(w * n);  out = bf16(y * silu(z))      (silu in fp32)
// x, z, out: bf16 [rows, D]; w: D floats holding bf16 values (HF casts the F32 checkpoint weight).
void rmsnorm_gated(const uint16_t* x, const uint16_t* z, int64_t rows, int64_t D, const float* w, float eps,
                   uint16_t* out, Isa isa = cpu::active_isa());

// In place, fp32: x = x * (1 / sqrt(sum(x^2) + eps)) per row (FLA/HF l2norm, eps 1e-6).
void l2norm_rows(float* x, int64_t rows, int64_t D, float eps, Isa isa = cpu::active_isa());

}  // namespace fp4serve::kernels
