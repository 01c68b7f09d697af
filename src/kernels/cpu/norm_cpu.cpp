#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/norm_cpu.h"

namespace fp4serve::kernels {
namespace {

float* row_scratch(int64_t n) { return cpu::scratch<float>(cpu::Scratch::kNormRow, static_cast<size_t>(n)); }

// Rows per work item: enough work per item to amortize the parallel region.
int64_t row_grain(int64_t D) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)); }

}  // namespace

void rmsnorm_1p(const uint16_t* x, int64_t rows, int64_t D, const float* w, float eps, uint16_t* out, Isa isa) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  cpu::parallel_for(rows, row_grain(D), [&](int64_t r0, int64_t r1) {
    float* xf = row_scratch(D);
    for (int64_t r = r0; r < r1; ++r) {
      bf16_to_f32(x + r * D, xf, D);
      const float ss = kt.dot(xf, xf, D);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
      for (int64_t i = 0; i < D; ++i) out[r * D + i] = f32_to_bf16_bits((xf[i] * inv) * (1.0f + w[i]));
    }
  });
}

void rmsnorm_gated(const uint16_t* x, const uint16_t* z, int64_t rows, int64_t D, const float* w, float eps,
                   uint16_t* out, Isa isa) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  cpu::parallel_for(rows, row_grain(D), [&](int64_t r0, int64_t r1) {
    float* xf = row_scratch(D);
    for (int64_t r = r0; r < r1; ++r) {
      bf16_to_f32(x + r * D, xf, D);
      const float ss = kt.dot(xf, xf, D);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
      for (int64_t i = 0; i < D; ++i) {
        const float n = round_bf16(xf[i] * inv);
        const float y = round_bf16(w[i] * n);
        out[r * D + i] = f32_to_bf16_bits(y * silu(bf16_bits_to_f32(z[r * D + i])));
      }
    }
  });
}

void l2norm_rows(float* x, int64_t rows, int64_t D, float eps, Isa isa) {
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  cpu::parallel_for(rows, row_grain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = x + r * D;
      const float inv = 1.0f / std::sqrt(kt.dot(row, row, D) + eps);
      for (int64_t i = 0; i < D; ++i) row[i] = row[i] * inv;
    }
  });
}

}  // namespace fp4serve::kernels
