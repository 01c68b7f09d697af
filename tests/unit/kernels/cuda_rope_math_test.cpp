// The CUDA rope's cos/sin (src/kernels/cuda/rope_math.h: host and device in one source, IEEE double
// only, so these are the device's bits) against the CPU's rope_cos_sin, on the host: the model's
// configuration over a wide range of positions, and a small one with distinct M-RoPE axes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda/rope_math.h"
#include "kernels/rope.h"

namespace fp4serve::kernels {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// cos/sin for one token as the CUDA kernel computes them.
void cuda_cos_sin(const RopeConfig& cfg, const float* inv_freq, int64_t t, int64_t h, int64_t w, float* c, float* s) {
  const int half = cfg.rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const int axis = cuda::elem::rope_axis(i, cfg.sections[1], cfg.sections[2]);
    const int64_t p = axis == 0 ? t : axis == 1 ? h : w;
    float sv, cv;
    cuda::elem::sincos_f32(static_cast<float>(p) * inv_freq[i], &sv, &cv);
    c[i] = c[i + half] = round_bf16(cv);
    s[i] = s[i + half] = round_bf16(sv);
  }
}

// Differences between the two, over `tokens` (t, h, w) triples.
int count_differences(const RopeConfig& cfg, const std::vector<std::array<int64_t, 3>>& tokens) {
  std::vector<float> inv(cfg.rotary_dim / 2);
  cuda::elem::rope_inv_freq(cfg, inv.data());
  std::vector<float> c0(cfg.rotary_dim), s0(cfg.rotary_dim), c1(cfg.rotary_dim), s1(cfg.rotary_dim);
  int bad = 0;
  for (const auto& p : tokens) {
    rope_cos_sin(cfg, p[0], p[1], p[2], c0.data(), s0.data());
    cuda_cos_sin(cfg, inv.data(), p[0], p[1], p[2], c1.data(), s1.data());
    for (int i = 0; i < cfg.rotary_dim; ++i) {
      if (bits_of(c0[i]) != bits_of(c1[i]) || bits_of(s0[i]) != bits_of(s1[i])) {
        if (bad++ < 5)
          ADD_FAILURE() << "position (" << p[0] << ", " << p[1] << ", " << p[2] << ") i " << i << ": cpu cos/sin "
                        << c0[i] << "/" << s0[i] << ", cuda " << c1[i] << "/" << s1[i];
      }
    }
  }
  return bad;
}

TEST(CudaRopeMath, SinCosAreCorrectlyRoundedOnFloats) {
  // Against glibc's double sin/cos rounded to float, on angles across the reduction's range:
  // quadrant boundaries, tiny angles, negative angles, and the largest angles positions reach.
  std::mt19937 rng(7);
  std::vector<float> angles = {0.0f, -0.0f, 1e-30f, 0.78539816f, 1.5707964f, 3.1415927f, -3.1415927f, 262143.0f,
                               1048575.0f, 1.6e6f};
  std::uniform_real_distribution<float> wide(-300000.0f, 300000.0f), narrow(-7.0f, 7.0f);
  for (int i = 0; i < 200000; ++i) angles.push_back(i % 2 ? wide(rng) : narrow(rng));
  int bad = 0;
  for (float a : angles) {
    float s, c;
    cuda::elem::sincos_f32(a, &s, &c);
    const float ws = static_cast<float>(std::sin(static_cast<double>(a)));
    const float wc = static_cast<float>(std::cos(static_cast<double>(a)));
    if (bits_of(s) != bits_of(ws) || bits_of(c) != bits_of(wc)) {
      if (bad++ < 5) ADD_FAILURE() << "angle " << a << ": " << s << "/" << c << " vs " << ws << "/" << wc;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaRopeMath, QwenTextPositionsMatchTheCpu) {
  RopeConfig cfg;  // head_dim 256, rotary 64, theta 1e7
  std::vector<std::array<int64_t, 3>> tokens;
  for (int64_t p = 0; p < 40000; ++p) tokens.push_back({p, p, p});
  for (int64_t p = 40000; p < 262144; p += 7) tokens.push_back({p, p, p});
  EXPECT_EQ(count_differences(cfg, tokens), 0);
}

TEST(CudaRopeMath, MRopeAxesMatchTheCpu) {
  RopeConfig cfg;
  RopeConfig small;
  small.head_dim = 64, small.rotary_dim = 32, small.theta = 1e4f;
  small.sections[0] = 6, small.sections[1] = 5, small.sections[2] = 5;
  std::mt19937 rng(3);
  std::vector<std::array<int64_t, 3>> tokens;
  for (int i = 0; i < 20000; ++i) {
    const int64_t t = rng() % 100000;
    tokens.push_back({t, t + static_cast<int64_t>(rng() % 64), t + static_cast<int64_t>(rng() % 64)});
  }
  EXPECT_EQ(count_differences(cfg, tokens), 0);
  EXPECT_EQ(count_differences(small, tokens), 0);
}

TEST(CudaRopeMath, AxisSelection) {
  // sections (11, 11, 10): i % 3 == 1 -> h below 33, i % 3 == 2 -> w below 30, else t.
  EXPECT_EQ(cuda::elem::rope_axis(0, 11, 10), 0);
  EXPECT_EQ(cuda::elem::rope_axis(1, 11, 10), 1);
  EXPECT_EQ(cuda::elem::rope_axis(2, 11, 10), 2);
  EXPECT_EQ(cuda::elem::rope_axis(29, 11, 10), 2);
  EXPECT_EQ(cuda::elem::rope_axis(31, 11, 10), 1);
  EXPECT_EQ(cuda::elem::rope_axis(32, 11, 10), 2 * 0);  // 32 % 3 == 2 but 32 >= 30: t
  EXPECT_EQ(cuda::elem::rope_axis(34, 11, 10), 0);      // 34 % 3 == 1 but 34 >= 33: t
}

}  // namespace
}  // namespace fp4serve::kernels
