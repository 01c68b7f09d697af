// The vision tower's backend ops (kernels/vision.h) on the CPU backend: LayerNorm with bias, the
// bias + GELU epilogue, rotary from tables, and non-causal attention within segments.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "kernels/cpu/cpu_backend.h"
#include "unit/kernels/kernel_test_util.h"

namespace fp4serve::kernels {
namespace {

using test::from_bf16;
using test::random_bf16_values;
using test::random_f32;
using test::to_bf16;

TensorView view(std::vector<uint16_t>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::kBF16, shape);
}
TensorView view(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::kF32, shape);
}

TEST(VisionOps, GeluMatchesTorchValues) {
  // torch.nn.functional.gelu(torch.tensor([1., -0.5, 3.]), approximate=...) in fp32.
  EXPECT_NEAR(gelu_tanh(1.0f), 0.8411920070648193f, 1e-7);
  EXPECT_NEAR(gelu_tanh(-0.5f), -0.15428599715232849f, 1e-7);
  EXPECT_NEAR(gelu_tanh(3.0f), 2.996362686157227f, 1e-6);
  EXPECT_NEAR(gelu_erf(1.0f), 0.8413447141647339f, 1e-7);
  EXPECT_NEAR(gelu_erf(-0.5f), -0.15426877140998840f, 1e-7);
  EXPECT_NEAR(gelu_erf(3.0f), 2.995950222015381f, 1e-6);
}

TEST(VisionOps, LayerNormMatchesDoubleFormula) {
  cpu::CpuBackend be;
  const int64_t R = 5, D = 72;
  auto xv = random_bf16_values(static_cast<size_t>(R * D), 1, 3.0f);
  for (auto& v : xv) v = round_bf16(v + 2.0f);  // a mean far from 0
  auto x = to_bf16(xv);
  auto w = random_bf16_values(static_cast<size_t>(D), 2), b = random_bf16_values(static_cast<size_t>(D), 3);
  std::vector<uint16_t> out(x.size());
  be.layernorm(view(x, {R, D}), view(w, {D}), view(b, {D}), 1e-6f, view(out, {R, D}));
  const auto got = from_bf16(out);
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) m += xv[static_cast<size_t>(r * D + i)];
    m /= D;
    for (int64_t i = 0; i < D; ++i) var += std::pow(xv[static_cast<size_t>(r * D + i)] - m, 2);
    var /= D;
    for (int64_t i = 0; i < D; ++i) {
      const double want = (xv[static_cast<size_t>(r * D + i)] - m) / std::sqrt(var + 1e-6) * w[static_cast<size_t>(i)] +
                          b[static_cast<size_t>(i)];
      EXPECT_NEAR(got[static_cast<size_t>(r * D + i)], want, std::abs(want) / 128 + 1e-6) << r << "," << i;
    }
  }
  // In place gives the same bits.
  be.layernorm(view(x, {R, D}), view(w, {D}), view(b, {D}), 1e-6f, view(x, {R, D}));
  EXPECT_EQ(x, out);
}

TEST(VisionOps, BiasActivationRoundsTheLinearThenActivates) {
  cpu::CpuBackend be;
  const int64_t R = 3, N = 40;
  auto x = random_f32(static_cast<size_t>(R * N), 4, 2.0f);
  auto bias = random_bf16_values(static_cast<size_t>(N), 5);
  for (Activation act : {Activation::kNone, Activation::kGeluTanh, Activation::kGeluErf}) {
    std::vector<uint16_t> out(x.size());
    be.bias_activation(view(x, {R, N}), view(bias, {N}), act, view(out, {R, N}));
    for (int64_t i = 0; i < R * N; ++i) {
      const float y = round_bf16(x[static_cast<size_t>(i)] + bias[static_cast<size_t>(i % N)]);
      const float a = act == Activation::kNone ? y : act == Activation::kGeluTanh ? gelu_tanh(y) : gelu_erf(y);
      EXPECT_EQ(out[static_cast<size_t>(i)], f32_to_bf16_bits(a));
    }
  }
  // No bias: a null view.
  std::vector<uint16_t> out(x.size());
  be.bias_activation(view(x, {R, N}), TensorView{}, Activation::kNone, view(out, {R, N}));
  EXPECT_EQ(out[7], f32_to_bf16_bits(x[7]));
}

TEST(VisionOps, RopeTableRotatesHalvesInFp32OnStridedRows) {
  cpu::CpuBackend be;
  const int64_t T = 3, H = 2, D = 8, ld = 3 * H * D;  // q inside a [T, 3, H, D] qkv row
  auto rows = random_bf16_values(static_cast<size_t>(T * ld), 6);
  auto qkv = to_bf16(rows);
  auto cos = random_f32(static_cast<size_t>(T * D), 7), sin = random_f32(static_cast<size_t>(T * D), 8);
  TensorView q = TensorView::contiguous(qkv.data(), DType::kBF16, {T, H, D});
  q.stride[0] = ld;
  be.rope_table(q, view(cos, {T, D}), view(sin, {T, D}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const float* x = rows.data() + t * ld + h * D;
        const float rot = i < D / 2 ? -x[i + D / 2] : x[i - D / 2];
        const float want = x[i] * cos[static_cast<size_t>(t * D + i)] + rot * sin[static_cast<size_t>(t * D + i)];
        EXPECT_EQ(qkv[static_cast<size_t>(t * ld + h * D + i)], f32_to_bf16_bits(want));
      }
  // k and v of the row are untouched.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = H * D; i < ld; ++i)
      EXPECT_EQ(qkv[static_cast<size_t>(t * ld + i)], f32_to_bf16_bits(rows[static_cast<size_t>(t * ld + i)]));
}

// out rows of dense attention over one segment, in double (p = softmax of the scaled dots).
std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, int64_t row0, int64_t rows, int64_t H, int64_t D) {
  std::vector<double> out(static_cast<size_t>(rows * H * D));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> s(static_cast<size_t>(rows));
      double mx = -1e300, l = 0;
      for (int64_t j = 0; j < rows; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i)
          d += static_cast<double>(q[static_cast<size_t>(((row0 + t) * H + h) * D + i)]) *
               k[static_cast<size_t>(((row0 + j) * H + h) * D + i)];
        s[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      for (auto& e : s) l += (e = std::exp(e - mx));
      for (int64_t i = 0; i < D; ++i) {
        double o = 0;
        for (int64_t j = 0; j < rows; ++j) o += s[static_cast<size_t>(j)] / l * v[static_cast<size_t>(((row0 + j) * H + h) * D + i)];
        out[static_cast<size_t>((t * H + h) * D + i)] = o;
      }
    }
  return out;
}

TEST(VisionOps, DenseAttentionStaysInsideSegmentsAndMatchesDouble) {
  const int64_t H = 2, D = 72, A = 37, B = 70, T = A + B;  // not multiples of the item or key blocks
  const auto qv = random_bf16_values(static_cast<size_t>(T * H * D), 9), kv = random_bf16_values(static_cast<size_t>(T * H * D), 10),
             vv = random_bf16_values(static_cast<size_t>(T * H * D), 11);
  auto q = to_bf16(qv), k = to_bf16(kv), v = to_bf16(vv);
  const std::vector<DenseSegment> both{{0, A}, {A, B}};
  std::vector<uint16_t> first;
  for (cpu::Isa isa : test::isas()) {
    cpu::CpuBackend be(isa);
    for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
      std::vector<uint16_t> out(static_cast<size_t>(T * H * D));
      be.dense_attention(both, view(q, {T, H, D}), view(k, {T, H, D}), view(v, {T, H, D}), view(out, {T, H * D}), math);
      // Against double: bf16 output, plus bf16 scores/probabilities for eager.
      for (const DenseSegment& s : both) {
        const auto want = reference_attention(qv, kv, vv, s.row0, s.rows, H, D);
        const auto got = from_bf16(out);
        double err = 0, norm = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          err += std::pow(got[static_cast<size_t>(s.row0 * H * D) + i] - want[i], 2);
          norm += want[i] * want[i];
        }
        EXPECT_LT(std::sqrt(err / norm), math == AttentionMath::kFp32 ? 0.005 : 0.02) << cpu::isa_name(isa);
      }
      // The second segment alone (its rows only) gives the same bits: attention never crosses segments.
      std::vector<uint16_t> alone(static_cast<size_t>(B * H * D));
      TensorView qb = view(q, {T, H, D}).rows(A, B), kb = view(k, {T, H, D}).rows(A, B), vb = view(v, {T, H, D}).rows(A, B);
      const std::vector<DenseSegment> one{{0, B}};
      be.dense_attention(one, qb, kb, vb, view(alone, {B, H * D}), math);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), out.begin() + A * H * D)) << cpu::isa_name(isa);
      if (math == AttentionMath::kHfEager) {
        // The dots and P.V sums are the canonical ones: every tier gives the same bits.
        if (first.empty()) first = out;
        EXPECT_EQ(out, first) << cpu::isa_name(isa);
      }
    }
  }
}

TEST(VisionOps, RejectsBadViews) {
  cpu::CpuBackend be;
  std::vector<uint16_t> x(64);
  std::vector<float> w(8), b(7);
  EXPECT_THROW(be.layernorm(view(x, {8, 8}), view(w, {8}), view(b, {7}), 1e-6f, view(x, {8, 8})), std::invalid_argument);
  const std::vector<DenseSegment> bad{{4, 8}};
  EXPECT_THROW(be.dense_attention(bad, view(x, {8, 1, 8}), view(x, {8, 1, 8}), view(x, {8, 1, 8}), view(x, {8, 8}),
                                  AttentionMath::kHfEager),
               std::out_of_range);
}

}  // namespace
}  // namespace fp4serve::kernels
