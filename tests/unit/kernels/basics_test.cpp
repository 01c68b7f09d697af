// bf16 helpers, activations, embedding and ISA selection.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "tensor/float_formats.h"
#include "kernels/cpu/activation_cpu.h"

namespace fp4serve::kernels {
namespace {

TEST(Bf16, InlineRoundingMatchesTensorModuleOnManyValues) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t a = f32_to_bf16_bits(f), b = fp4serve::f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_f32(a)));
    } else {
      ASSERT_EQ(a, b) << f;
    }
  }
  EXPECT_EQ(round_bf16(1.0f + 1.0f / 256.0f), 1.0f);          // tie -> even
  EXPECT_EQ(round_bf16(1.0f + 3.0f / 256.0f), 1.0f + 1.0f / 64.0f);
}

TEST(Activation, MatchTorchFormulas) {
  for (double x : {-30.0, -5.0, -0.5, 0.0, 0.25, 3.0, 19.9, 20.0, 20.5, 40.0}) {
    const float xf = static_cast<float>(x);
    EXPECT_NEAR(silu(xf), x / (1 + std::exp(-x)), 1e-6 * (1 + std::fabs(x)));
    EXPECT_NEAR(sigmoid(xf), 1 / (1 + std::exp(-x)), 1e-7);
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    EXPECT_NEAR(softplus(xf), sp, 1e-6 * (1 + std::fabs(x)));
  }
  EXPECT_EQ(softplus(20.5f), 20.5f);  // threshold: identity above 20
}

TEST(Embedding, CopiesRowsAndRejectsBadIds) {
  std::vector<uint16_t> table(5 * 3);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint16_t>(i);
  const int32_t ids[] = {4, 0, 4};
  std::vector<uint16_t> out(9);
  embedding_lookup(table.data(), 5, 3, ids, 3, out.data());
  EXPECT_EQ(out, (std::vector<uint16_t>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
  const int32_t bad[] = {5};
  EXPECT_THROW(embedding_lookup(table.data(), 5, 3, bad, 1, out.data()), std::out_of_range);
}

TEST(CpuFeatures, ScalarAlwaysSupportedAndNamesRoundTrip) {
  auto v = cpu::supported_isas();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front(), cpu::Isa::kScalar);
  for (auto i : v) EXPECT_EQ(cpu::parse_isa(cpu::isa_name(i)), i);
  EXPECT_THROW(cpu::parse_isa("sse9"), std::invalid_argument);
  EXPECT_FALSE(cpu::describe_cpu().empty());
  // AVX-512 implies AVX2 in our dispatch.
  if (cpu::isa_supported(cpu::Isa::kAvx512)) EXPECT_TRUE(cpu::isa_supported(cpu::Isa::kAvx2));
}

TEST(CpuFeatures, ActiveIsaCanBeLoweredAndRestored) {
  const cpu::Isa before = cpu::active_isa();
  cpu::set_active_isa(cpu::Isa::kScalar);
  EXPECT_EQ(cpu::active_isa(), cpu::Isa::kScalar);
  cpu::set_active_isa(before);
  EXPECT_EQ(cpu::active_isa(), before);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    cpu::set_num_threads(threads);
    std::vector<int> hits(1001, 0);
    cpu::parallel_for(1001, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
  cpu::set_num_threads(0);
}

}  // namespace
}  // namespace fp4serve::kernels
