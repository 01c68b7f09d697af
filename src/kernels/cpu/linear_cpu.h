// Linear layer y[M, N] = x[M, K] @ W^T for every weight format of weights.h, on the CPU.
//
// Numerics (scalar/avx2/avx512 bit-identical; kernel_table.h defines the order; the avx512_bf16
// path rounds x to bf16 and sums bf16 products with VDPBF16PS, within a tolerance of the others and
// bit-identical to itself -- kernel_table.h states that contract):
//   y[m, n] = tensor_scale * canonical_dot_K(x[m, :], W(n, :))       fp32 accumulate, fp32 out
// Each output element is one thread's fixed-order reduction over K, so a row's result does not
// depend on M, on which other rows are in the batch, on N-blocking or on the thread count.
// Callers round to bf16 where HF does (an nn.Linear in bf16 returns bf16(fp32 sum)).
//
// Efficient for GEMV (M = 1: weights dequantized in registers, streamed once) and small-batch
// GEMM (M > 4: each weight row is dequantized once into L1 and reused for all M rows).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "kernels/cpu/cpu_features.h"
#include "kernels/weights.h"

namespace fp4serve::kernels {

using cpu::Isa;

// x: [M, K] fp32 with row stride ldx; y: [M, N] fp32 with row stride ldy.
void linear(const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y, int64_t ldy,
            Isa isa = cpu::active_isa());
inline void linear(const float* x, int64_t M, const WeightView& w, float* y, Isa isa = cpu::active_isa()) {
  linear(x, M, w.k, w, y, w.n, isa);
}
// bf16 activations (converted exactly to fp32 first).
void linear_bf16(const uint16_t* x, int64_t M, const WeightView& w, float* y, Isa isa = cpu::active_isa());

// Several independent linears in one parallel region (MoE experts, q/k/v): all jobs' row blocks
// are spread over the threads together. Each job's result equals linear() on it alone.
struct LinearJob {
  const float* x = nullptr;
  int64_t M = 0;
  int64_t ldx = 0;
  WeightView w;
  float* y = nullptr;
  int64_t ldy = 0;
};
void linear_batch(std::span<const LinearJob> jobs, Isa isa = cpu::active_isa());
inline void linear_batch(std::initializer_list<LinearJob> jobs, Isa isa = cpu::active_isa()) {
  linear_batch(std::span<const LinearJob>(jobs.begin(), jobs.size()), isa);
}

}  // namespace fp4serve::kernels
