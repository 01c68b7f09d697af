// The scalar reference of every primitive in kernel_table.h: plain loops that spell out the
// canonical operation order. The vector variants must reproduce these bit for bit.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/dequant_scalar.h"
#include "kernels/cpu/kernel_table.h"

namespace fp4serve::kernels::cpu {
namespace {

float reduce32(float* acc) {
  for (int i = 0; i < 16; ++i) acc[i] = acc[i] + acc[i + 16];
  for (int i = 0; i < 8; ++i) acc[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) acc[i] = acc[i] + acc[i + 4];
  for (int i = 0; i < 2; ++i) acc[i] = acc[i] + acc[i + 2];
  return acc[0] + acc[1];
}

float dot_scalar(const float* a, const float* b, int64_t n) {
  float acc[32] = {};
  for (int64_t k = 0; k < n; ++k) acc[k % 32] = std::fma(a[k], b[k], acc[k % 32]);
  return reduce32(acc);
}

void linear_scalar(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t k0 = 0; k0 < K; k0 += 32) dequant_chunk32(w, n, k0, scratch + k0);
    for (int64_t m = 0; m < M; ++m) y[m * ldy + n] = dot_scalar(x + m * ldx, scratch, K) * w.tensor_scale;
  }
}

void axpy_scalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void gdn_step_scalar(float* S, const float* q, const float* k, const float* v, float decay, float beta, int dk,
                     int dv, float* out, float* kvm) {
  for (int j = 0; j < dv; ++j) kvm[j] = 0.0f;
  for (int i = 0; i < dk; ++i) {
    float* row = S + static_cast<int64_t>(i) * dv;
    for (int j = 0; j < dv; ++j) {
      row[j] = row[j] * decay;
      kvm[j] = std::fma(row[j], k[i], kvm[j]);
    }
  }
  for (int j = 0; j < dv; ++j) {
    kvm[j] = (v[j] - kvm[j]) * beta;  // kvm now holds the delta d
    out[j] = 0.0f;
  }
  for (int i = 0; i < dk; ++i) {
    float* row = S + static_cast<int64_t>(i) * dv;
    for (int j = 0; j < dv; ++j) {
      row[j] = std::fma(k[i], kvm[j], row[j]);
      out[j] = std::fma(row[j], q[i], out[j]);
    }
  }
}

void gdn_tokens_scalar(float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                       const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                       float* scratch) {
  gdn_tokens_by_step(gdn_step_scalar, S, q, tq, k, tk, v, tv, decay, beta, T, dk, dv, out, tout, scratch);
}

void fma_rows_scalar(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a[i], b[i], y[i]);
}

void dots_scalar(const float* q, const float* K, int64_t ldk, int64_t L, int64_t n, float* out) {
  dots_by_dot(dot_scalar, q, K, ldk, L, n, out);
}
void weighted_sum_scalar(const float* p, const float* V, int64_t ldv, int64_t L, int64_t n, float* acc) {
  weighted_sum_by_axpy(axpy_scalar, p, V, ldv, L, n, acc);
}

}  // namespace

void gdn_tokens_by_step(void (*gdn_step)(float*, const float*, const float*, const float*, float, float, int, int,
                                         float*, float*),
                        float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                        const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                        float* scratch) {
  for (int64_t t = 0; t < T; ++t)
    gdn_step(S, q + t * tq, k + t * tk, v + t * tv, decay[t], beta[t], dk, dv, out + t * tout, scratch);
}

void dots_by_dot(float (*dot)(const float*, const float*, int64_t), const float* q, const float* K, int64_t ldk,
                 int64_t L, int64_t n, float* out) {
  for (int64_t j = 0; j < L; ++j) out[j] = dot(q, K + j * ldk, n);
}

void weighted_sum_by_axpy(void (*axpy)(float, const float*, float*, int64_t), const float* p, const float* V,
                          int64_t ldv, int64_t L, int64_t n, float* acc) {
  for (int64_t j = 0; j < L; ++j) axpy(p[j], V + j * ldv, acc, n);
}

const KernelTable& scalar_kernels() {
  static const KernelTable t{linear_scalar,       dot_scalar,      axpy_scalar,      dots_scalar, fma_rows_scalar,
                             weighted_sum_scalar, gdn_step_scalar, gdn_tokens_scalar};
  return t;
}

const KernelTable& kernel_table(Isa isa) {
  if (!isa_supported(isa))
    throw std::runtime_error("CPU kernel path '" + std::string(isa_name(isa)) + "' is not supported here");
  switch (isa) {
    case Isa::kScalar:
      return scalar_kernels();
    case Isa::kAvx2:
      return avx2_kernels();
    case Isa::kAvx512:
      return avx512_kernels();
    case Isa::kAvx512Bf16:
      return avx512bf16_kernels();
    case Isa::kAmx:
      return amx_kernels();
  }
  return scalar_kernels();
}

const KernelTable& active_table() { return kernel_table(active_isa()); }

}  // namespace fp4serve::kernels::cpu
