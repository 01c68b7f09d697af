// CpuBackend's vision-tower ops (backend.h, vision.h): argument checks, then the CPU twins in
// vision_cpu.h. Rows may be strided; within a row (and, for [T, H, D], within a token) elements are
// contiguous.
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/vision_cpu.h"

namespace fp4serve::kernels::cpu {
namespace {

// A [T, H, D] view whose heads are contiguous within a token row (stride[1] == D).
void expect_token_heads(const TensorView& v, int64_t T, int64_t H, int64_t D, const char* what) {
  expect_view(v, DType::kBF16, {T, H, D}, what);
  if (v.stride[1] != v.dim(2) || v.stride[0] < v.dim(1) * v.dim(2))
    throw std::invalid_argument(std::string(what) + ": heads must be contiguous within a token row");
}

}  // namespace

void CpuBackend::layernorm(const TensorView& x, const TensorView& w, const TensorView& b, float eps,
                           const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "layernorm x");
  const int64_t R = x.dim(0), D = x.dim(1);
  expect_view(w, DType::kF32, {D}, "layernorm weight");
  expect_view(b, DType::kF32, {D}, "layernorm bias");
  expect_view(out, DType::kBF16, {R, D}, "layernorm out");
  layernorm_rows(x.as<const uint16_t>(), x.stride[0], R, D, w.as<const float>(), b.as<const float>(), eps,
                 out.as<uint16_t>(), out.stride[0]);
}

void CpuBackend::bias_activation(const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) {
  expect_view(x, DType::kF32, {-1, -1}, "bias_activation x");
  const int64_t R = x.dim(0), N = x.dim(1);
  if (bias.data != nullptr) expect_view(bias, DType::kF32, {N}, "bias_activation bias");
  expect_view(out, DType::kBF16, {R, N}, "bias_activation out");
  bias_activation_rows(x.as<const float>(), x.stride[0], R, N, bias.data ? bias.as<const float>() : nullptr, act,
                       out.as<uint16_t>(), out.stride[0]);
}

void CpuBackend::rope_table(const TensorView& x, const TensorView& cos, const TensorView& sin) {
  expect_view(x, DType::kBF16, {-1, -1, -1}, "rope_table x");
  const int64_t T = x.dim(0), H = x.dim(1), D = x.dim(2);
  expect_token_heads(x, T, H, D, "rope_table x");
  if (D % 2 != 0 || D > 1024) throw std::invalid_argument("rope_table: head dim must be even and at most 1024");
  expect_view(cos, DType::kF32, {T, D}, "rope_table cos");
  expect_view(sin, DType::kF32, {T, D}, "rope_table sin");
  if (!cos.is_contiguous() || !sin.is_contiguous()) throw std::invalid_argument("rope_table: cos/sin must be contiguous");
  rope_table_rows(x.as<uint16_t>(), x.stride[0], T, H, D, cos.as<const float>(), sin.as<const float>());
}

void CpuBackend::dense_attention(std::span<const DenseSegment> segments, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& out, AttentionMath math) {
  expect_view(q, DType::kBF16, {-1, -1, -1}, "dense_attention q");
  const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2);
  expect_token_heads(q, T, H, D, "dense_attention q");
  expect_token_heads(k, T, H, D, "dense_attention k");
  expect_token_heads(v, T, H, D, "dense_attention v");
  expect_view(out, DType::kBF16, {T, H * D}, "dense_attention out");
  kernels::dense_attention(segments, q.as<const uint16_t>(), q.stride[0], k.as<const uint16_t>(), k.stride[0],
                           v.as<const uint16_t>(), v.stride[0], T, H, D, out.as<uint16_t>(), out.stride[0], math, isa_);
}

}  // namespace fp4serve::kernels::cpu
