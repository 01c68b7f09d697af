#include "kernels/attention.h"
#include "kernels/cpu/kernel_table.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/attention_cpu.h"

namespace fp4serve::kernels {
namespace {

constexpr int Hq = 4, Hkv = 2, D = 64;

struct Data {
  int64_t T;
  std::vector<uint16_t> q, k, v, gate;
};

Data make_data(int64_t T, uint32_t seed) {
  Data d{T, {}, {}, {}, {}};
  d.q = test::to_bf16(test::random_f32(T * Hq * D, seed));
  d.k = test::to_bf16(test::random_f32(T * Hkv * D, seed + 1));
  d.v = test::to_bf16(test::random_f32(T * Hkv * D, seed + 2));
  d.gate = test::to_bf16(test::random_f32(T * Hq * D, seed + 3, 2.0f));
  return d;
}

// Storage for a KV cache in either layout.
struct Cache {
  std::vector<uint16_t> k16, v16;
  std::vector<uint8_t> k8, v8;
  std::vector<int32_t> table;
  KvView view;
};

Cache make_cache(KvDtype dt, int64_t capacity, int64_t block_size) {
  Cache c;
  const int64_t blocks = block_size > 0 ? (capacity + block_size - 1) / block_size + 3 : 1;
  const int64_t rows = block_size > 0 ? blocks * block_size : capacity;
  const int64_t n = rows * Hkv * D;
  if (dt == KvDtype::kBf16) {
    c.k16.assign(n, 0x7FC0);  // NaN fill: reading an unwritten row would show
    c.v16.assign(n, 0x7FC0);
    c.view.k = c.k16.data();
    c.view.v = c.v16.data();
  } else {
    c.k8.assign(n, 0x7F);
    c.v8.assign(n, 0x7F);
    c.view.k = c.k8.data();
    c.view.v = c.v8.data();
    c.view.k_scale = 0.05f;
    c.view.v_scale = 0.03f;
  }
  c.view.dtype = dt;
  c.view.n_kv_heads = Hkv;
  c.view.head_dim = D;
  if (block_size > 0) {
    c.table.resize(blocks);
    std::iota(c.table.begin(), c.table.end(), 0);
    std::reverse(c.table.begin(), c.table.end());  // blocks out of order on purpose
    c.view.block_table = c.table.data();
    c.view.num_table_entries = blocks;
    c.view.block_size = block_size;
  } else {
    c.view.capacity = capacity;
  }
  return c;
}

std::vector<uint16_t> run(const Data& d, Cache& c, Isa isa, const std::vector<int64_t>& split,
                          AttentionMath math = AttentionMath::kHfEager) {
  std::vector<uint16_t> out(d.T * Hq * D);
  int64_t t0 = 0;
  for (int64_t n : split) {
    kv_write(c.view, d.k.data() + t0 * Hkv * D, d.v.data() + t0 * Hkv * D, n, t0);
    AttentionSeq s;
    s.q = d.q.data() + t0 * Hq * D;
    s.gate = d.gate.data() + t0 * Hq * D;
    s.T = n;
    s.pos0 = t0;
    s.kv = c.view;
    s.out = out.data() + t0 * Hq * D;
    gated_attention({s}, Hq, isa, math);
    t0 += n;
  }
  return out;
}

TEST(Attention, ContiguousBf16MatchesDoubleSoftmax) {
 for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
  const bool eager = math == AttentionMath::kHfEager;
  Data d = make_data(7, 1);
  Cache c = make_cache(KvDtype::kBf16, 7, 0);
  auto out = run(d, c, Isa::kScalar, {7}, math);
  auto q = test::from_bf16(d.q), k = test::from_bf16(d.k), v = test::from_bf16(d.v), g = test::from_bf16(d.gate);
  for (int64_t t = 0; t < d.T; ++t) {
    for (int h = 0; h < Hq; ++h) {
      const int kvh = h / (Hq / Hkv);
      std::vector<double> s(t + 1);
      double mx = -1e300;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += double(q[(t * Hq + h) * D + i]) * k[(j * Hkv + kvh) * D + i];
        // eager: bf16 matmul output, bf16 scaling (HF eager_attention_forward)
        s[j] = eager ? round_bf16(round_bf16(static_cast<float>(dot)) * static_cast<float>(1.0 / std::sqrt(double(D)))) : dot / std::sqrt(double(D));
        mx = std::max(mx, s[j]);
      }
      double l = 0;
      for (auto& x : s) l += (x = std::exp(x - mx));
      if (eager)  // probabilities cast to bf16 before P @ V
        for (auto& x : s) x = round_bf16(static_cast<float>(x / l));
      for (int i = 0; i < D; ++i) {
        double o = 0;
        for (int64_t j = 0; j <= t; ++j) o += s[j] * v[(j * Hkv + kvh) * D + i];
        if (!eager) o /= l;
        const double gg = g[(t * Hq + h) * D + i];
        const double want = o / (1 + std::exp(-gg));
        ASSERT_NEAR(bf16_bits_to_f32(out[(t * Hq + h) * D + i]), want, std::ldexp(std::fabs(want), -6) + 1e-6)
            << t << " " << h << " " << i << " eager " << eager;
      }
    }
  }
 }
}

TEST(Attention, PagedEqualsContiguousAndSplitsAndPathsAndThreadsAreBitIdentical) {
  Data d = make_data(21, 5);
  for (KvDtype dt : {KvDtype::kBf16, KvDtype::kFp8E4M3}) {
    Cache ref_cache = make_cache(dt, d.T, 0);
    const auto ref = run(d, ref_cache, Isa::kScalar, {21});
    {
      Cache a = make_cache(dt, d.T, 0), b = make_cache(dt, d.T, 16);
      EXPECT_EQ(run(d, a, Isa::kScalar, {21}, AttentionMath::kFp32), run(d, b, test::isas().back(), {4, 17}, AttentionMath::kFp32));
    }
    for (Isa isa : test::isas()) {
      for (int64_t bs : {0, 1, 4, 16}) {
        for (auto split : std::vector<std::vector<int64_t>>{{21}, {1, 7, 13}, std::vector<int64_t>(21, 1)}) {
          Cache c = make_cache(dt, d.T, bs);
          cpu::set_num_threads(split.size() == 1 ? 1 : 2);
          EXPECT_EQ(run(d, c, isa, split), ref) << cpu::isa_name(isa) << " block " << bs << " pieces " << split.size();
        }
      }
    }
    cpu::set_num_threads(0);
  }
}

// The attention primitives (kernel_table.h dots / weighted_sum): every tier's bits equal scalar's
// for row lengths around the 16/32-lane and 256-column boundaries and key counts around 4.
TEST(Attention, BatchedDotsAndWeightedSumsMatchScalarBitForBit) {
  for (int64_t n : {1, 15, 16, 17, 31, 33, 100, 256, 300, 529})
    for (int64_t L : {1, 3, 4, 5, 9}) {
      const int64_t ld = n + 3;
      const auto q = test::random_f32(n, 1);
      const auto K = test::random_f32(L * ld, 2);
      const auto p = test::random_f32(L, 3);
      const auto acc0 = test::random_f32(n, 4);
      std::vector<float> ref_dots(L), ref_acc = acc0;
      const cpu::KernelTable& s = cpu::kernel_table(Isa::kScalar);
      s.dots(q.data(), K.data(), ld, L, n, ref_dots.data());
      s.weighted_sum(p.data(), K.data(), ld, L, n, ref_acc.data());
      for (int64_t j = 0; j < L; ++j) ASSERT_EQ(ref_dots[j], s.dot(q.data(), K.data() + j * ld, n));
      for (Isa isa : test::isas()) {
        const cpu::KernelTable& kt = cpu::kernel_table(isa);
        std::vector<float> d(L), a = acc0;
        kt.dots(q.data(), K.data(), ld, L, n, d.data());
        kt.weighted_sum(p.data(), K.data(), ld, L, n, a.data());
        for (int64_t j = 0; j < L; ++j)
          ASSERT_TRUE(test::same_bits(d[j], ref_dots[j])) << cpu::isa_name(isa) << " n=" << n << " L=" << L << " j=" << j;
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(test::same_bits(a[i], ref_acc[i])) << cpu::isa_name(isa) << " n=" << n << " L=" << L << " i=" << i;
      }
    }
}

TEST(Attention, Fp8CacheStoresScaledCodesAndReadsThemBack) {
  Data d = make_data(3, 9);
  Cache c = make_cache(KvDtype::kFp8E4M3, 3, 0);
  kv_write(c.view, d.k.data(), d.v.data(), 3, 0);
  for (int64_t i = 0; i < 3 * Hkv * D; ++i) {
    ASSERT_EQ(c.k8[i], f32_to_e4m3(bf16_bits_to_f32(d.k[i]) / 0.05f));
    ASSERT_EQ(c.v8[i], f32_to_e4m3(bf16_bits_to_f32(d.v[i]) / 0.03f));
  }
  Cache small = make_cache(KvDtype::kBf16, 2, 0);
  EXPECT_THROW(kv_write(small.view, d.k.data(), d.v.data(), 3, 0), std::out_of_range);
}

}  // namespace
}  // namespace fp4serve::kernels
