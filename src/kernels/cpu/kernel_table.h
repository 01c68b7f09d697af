// The per-ISA primitive kernels behind every CPU op (internal to src/kernels).
//
// Every variant computes bit-identical results to the scalar one, because each primitive fixes its
// floating-point operation sequence and the vector code only changes how many of those independent
// sequences run at once:
//
// Canonical dot product over K (used by linear, norms, attention scores, l2norm):
//   acc[0..31] = +0;  for k in 0..K-1:  acc[k % 32] = fma(x[k], w[k], acc[k % 32])
//   h[i] = acc[i] + acc[i+16] (i < 16); h[i] += h[i+8] (i < 8); h[i] += h[i+4] (i < 4);
//   h[i] += h[i+2] (i < 2); result = h[0] + h[1]
// i.e. 32 fp32 lanes (two zmm or four ymm accumulators) and a fixed halving tree. The order depends
// only on K, never on M, the tile, the thread or the ISA.
//
// Element-wise primitives (axpy, the delta-rule step) use one explicit fma/mul/add per element in a
// fixed sequence over the reduction index; vector lanes are independent output elements.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/weights.h"

namespace fp4serve::kernels::cpu {

// Scratch of a linear call: one dequantized weight row plus M re-ordered activation rows.
inline int64_t linear_scratch_floats(int64_t M, int64_t K) { return (1 + M) * ((K + 31) / 32 * 32); }

struct KernelTable {
  // y[m*ldy + n] = tensor_scale * dot(x[m*ldx ...], W(n, :)) for m < M, n0 <= n < n1.
  // scratch: at least linear_scratch_floats(M, K) floats, private to the calling thread.
  void (*linear)(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy, float* scratch);
  // Canonical dot of two fp32 vectors.
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] = fma(a, x[i], y[i])
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  // One gated-delta-rule token for one V head, state S[dk][dv] in place (gdn.h gives the math):
  //   S = S * decay; kvm = sum_k S[k,:] k[k] (fma chain over k); d = (v - kvm) * beta;
  //   S = fma(k[k], d, S[k,:]); out = sum_k S[k,:] q[k] (fma chain over k, from +0).
  // kvm_scratch: dv floats.
  void (*gdn_step)(float* S, const float* q, const float* k, const float* v, float decay, float beta, int dk,
                   int dv, float* out, float* kvm_scratch);
};

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();

// The table for `isa` (throws if the CPU cannot run it); active_table() uses active_isa().
const KernelTable& kernel_table(Isa isa);
const KernelTable& active_table();

}  // namespace fp4serve::kernels::cpu
