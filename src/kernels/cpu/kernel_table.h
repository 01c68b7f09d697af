// The per-ISA primitive kernels behind every CPU op (internal to src/kernels).
//
// The scalar, avx2 and avx512 variants compute bit-identical results, because each primitive fixes its
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
//
// The avx512_bf16 variant (linear_avx512bf16.cpp) shares dot/axpy/gdn_step with avx512 (so those stay
// bit-identical) but runs `linear` differently, and its linear is NOT bit-identical to scalar:
//   - x is rounded to bf16 (round-to-nearest-even) once per call; weights are converted to bf16
//     exactly (bf16, e4m3, e2m1 and int4 codes all fit); products are summed by VDPBF16PS, which has
//     its own pairwise rounding order and treats bf16 subnormal inputs / fp32 subnormal results as
//     zero (DAZ/FTZ);
//   - block scales (NVFP4 e4m3 per 16, FP8 per 128, INT4 per group) multiply partial block sums
//     (one fp32 fma per block) instead of every weight.
// Its contract instead: (a) for bf16-valued x (all model activations are bf16) every output is
// within 1e-5 * sum_k |x*w| (+ a tiny absolute term for flushed subnormals) of the scalar one; for
// fp32 x the reference is scalar on bf16-rounded x; (b) each output element is one fixed-order
// reduction over K that depends only on K and the weight format, so results are bit-identical to
// itself whatever M, the row tile, the N range split or the thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_weight.h"
#include "kernels/weights.h"

namespace fp4serve::kernels::cpu {

// Scratch of a linear call: one dequantized weight row plus M re-ordered activation rows (fp32
// paths), or M bf16 activation rows plus a tile of bf16 weight rows (avx512_bf16; K padded to 256).
inline int64_t linear_scratch_floats(int64_t M, int64_t K) {
  const int64_t k256 = (K + 255) / 256 * 256;
  const int64_t fp32_need = (1 + M) * ((K + 31) / 32 * 32);
  const int64_t bf16_need = M * k256 / 2 + 8 * k256 * 3 / 4 + 64;  // bf16 x rows + 8 weight rows
  return fp32_need > bf16_need ? fp32_need : bf16_need;
}

// Scratch of a linear_packed call: x as bf16 rows (2 M kp bytes) and NVFP4's half-masked copies
// (4 M kp), eight converted panels (256 kp), tile images and accumulators (12 KB), alignment.
inline int64_t packed_linear_scratch_floats(int64_t M, int64_t kp) { return (6 * M * kp + 256 * kp + 12544) / 4 + 16; }

struct KernelTable {
  // y[m*ldy + n] = tensor_scale * dot(x[m*ldx ...], W(n, :)) for m < M, n0 <= n < n1.
  // scratch: at least linear_scratch_floats(M, K) floats, private to the calling thread.
  void (*linear)(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy, float* scratch);
  // Canonical dot of two fp32 vectors.
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] = fma(a, x[i], y[i])
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  // out[j] = dot(q, K + j * ldk, n) for j < L: L canonical dots (attention scores), each with
  // dot's exact sequence.
  void (*dots)(const float* q, const float* K, int64_t ldk, int64_t L, int64_t n, float* out);
  // y[i] = fma(a[i], b[i], y[i]) for i < n (elementwise; the GDN conv's taps).
  void (*fma_rows)(const float* a, const float* b, float* y, int64_t n);
  // For j = 0 .. L-1 in order: acc[i] = fma(p[j], V[j * ldv + i], acc[i]), i < n -- axpy per j,
  // the same sequence per element, with the accumulator kept in registers (attention's P V).
  void (*weighted_sum)(const float* p, const float* V, int64_t ldv, int64_t L, int64_t n, float* acc);
  // One gated-delta-rule token for one V head, state S[dk][dv] in place (gdn.h gives the math):
  //   S = S * decay; kvm = sum_k S[k,:] k[k] (fma chain over k); d = (v - kvm) * beta;
  //   S = fma(k[k], d, S[k,:]); out = sum_k S[k,:] q[k] (fma chain over k, from +0).
  // kvm_scratch: dv floats.
  void (*gdn_step)(float* S, const float* q, const float* k, const float* v, float decay, float beta, int dk,
                   int dv, float* out, float* kvm_scratch);
  // gdn_step for the T tokens of one V head in order: token t reads q + t*tq, k + t*tk, v + t*tv,
  // decay[t], beta[t] and writes out + t*tout. The same per-element sequence as T gdn_step calls
  // (a tier may fuse token t's update with token t+1's decay in one sweep over S).
  // scratch: 2 * dv floats.
  void (*gdn_tokens)(float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                     const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                     float* scratch);
  // The same over a packed weight (packed_weight.h) for rows n0 .. n1, n0 a multiple of kPanelRows;
  // nullptr where the tier has no panel kernel (its linear reads the plain view).
  // scratch: packed_linear_scratch_floats(M, w.kp) floats.
  void (*linear_packed)(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, int64_t n0, int64_t n1,
                        float* y, int64_t ldy, float* scratch) = nullptr;
};

// gdn_tokens, dots and weighted_sum from a table's gdn_step, dot and axpy (the tiers without their own).
void gdn_tokens_by_step(void (*gdn_step)(float*, const float*, const float*, const float*, float, float, int, int,
                                         float*, float*),
                        float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                        const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                        float* scratch);
void dots_by_dot(float (*dot)(const float*, const float*, int64_t), const float* q, const float* K, int64_t ldk,
                 int64_t L, int64_t n, float* out);
void weighted_sum_by_axpy(void (*axpy)(float, const float*, float*, int64_t), const float* p, const float* V,
                          int64_t ldv, int64_t L, int64_t n, float* acc);

// The panel kernels (linear_panels_*.cpp), for the tables of the tiers that run them.
void linear_panels_avx512bf16(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, int64_t n0, int64_t n1,
                              float* y, int64_t ldy, float* scratch);
void linear_panels_amx(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, int64_t n0, int64_t n1,
                       float* y, int64_t ldy, float* scratch);

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx512bf16_kernels();
// avx512_bf16's table with the AMX panel kernel (unpacked weights keep the avx512_bf16 linear).
const KernelTable& amx_kernels();

// The table for `isa` (throws if the CPU cannot run it); active_table() uses active_isa().
const KernelTable& kernel_table(Isa isa);
const KernelTable& active_table();

}  // namespace fp4serve::kernels::cpu
