// Attention on the GPU at the model's long-context shape, beyond what the op harness's CPU-sized
// cases reach: a 17-row prefill at the end of a 32k-token fp8 paged cache (Hq 16, Hkv 2, head_dim
// 256: the fused path, 128 chunks) against each of its tokens alone as a decode (the split path),
// bit for bit; the last token against the CPU op (NMSE); and the decode's time and the K/V bytes it
// reads per second. Needs a GPU: labelled "gpu", run by scripts/gpu-check.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels {
namespace {

constexpr int kHq = 16, kHkv = 2, kD = 256;
constexpr int64_t kCtx = 32768, kRows = 17, kBlock = 16, kPos0 = kCtx - kRows;
constexpr float kKScale = 0.05f, kVScale = 0.03f;

std::vector<uint16_t> random_bf16(std::size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(d(rng));
  return v;
}

struct Inputs {
  std::vector<uint16_t> k, v, q, gate;  // k, v: every position of the cache; q, gate: the 17 rows
  std::vector<int32_t> table;           // the sequence's blocks, shuffled over the pool
  Inputs()
      : k(random_bf16(static_cast<std::size_t>(kCtx * kHkv * kD), 1, 1.0f)),
        v(random_bf16(static_cast<std::size_t>(kCtx * kHkv * kD), 2, 1.0f)),
        q(random_bf16(static_cast<std::size_t>(kRows * kHq * kD), 3, 2.0f)),
        gate(random_bf16(static_cast<std::size_t>(kRows * kHq * kD), 4, 2.0f)),
        table(static_cast<std::size_t>(kCtx / kBlock)) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(5));
  }
};

// One backend holding the cache (written through its kv_write) and the step's q and gate.
struct Step {
  Backend& be;
  DeviceBuffer kc, vc, q, gate, out;
  KvView kv;
  Step(Backend& b, const Inputs& in) : be(b) {
    const std::size_t cache = static_cast<std::size_t>(kCtx * kHkv * kD);
    kc = be.allocate(cache, "k cache");
    vc = be.allocate(cache, "v cache");
    kv.dtype = KvDtype::kFp8E4M3;
    kv.k = kc.data();
    kv.v = vc.data();
    kv.block_size = kBlock;
    kv.block_table = in.table.data();
    kv.num_table_entries = static_cast<int64_t>(in.table.size());
    kv.n_kv_heads = kHkv;
    kv.head_dim = kD;
    kv.k_scale = kKScale;
    kv.v_scale = kVScale;
    DeviceBuffer k = be.allocate(in.k.size() * 2, "k"), v = be.allocate(in.v.size() * 2, "v");
    be.upload(k.view(DType::kBF16, {kCtx, kHkv, kD}), in.k.data());
    be.upload(v.view(DType::kBF16, {kCtx, kHkv, kD}), in.v.data());
    const AttentionSeqDesc all{{0, kCtx, 0}, kv};
    be.kv_write({&all, 1}, k.view(DType::kBF16, {kCtx, kHkv, kD}), v.view(DType::kBF16, {kCtx, kHkv, kD}));
    q = be.allocate(in.q.size() * 2, "q");
    gate = be.allocate(in.gate.size() * 2, "gate");
    out = be.allocate(in.q.size() * 2, "out");
    be.upload(q.view(DType::kBF16, {kRows, kHq, kD}), in.q.data());
    be.upload(gate.view(DType::kBF16, {kRows, int64_t{kHq} * kD}), in.gate.data());
    be.synchronize();
  }
  // Rows [row0, row0 + rows) of the step at positions kPos0 + row0 ..; returns all rows of out.
  std::vector<uint16_t> run(int64_t row0, int64_t rows, AttentionMath math) {
    const AttentionSeqDesc d{{row0, rows, kPos0 + row0}, kv};
    be.attention({&d, 1}, q.view(DType::kBF16, {kRows, kHq, kD}), gate.view(DType::kBF16, {kRows, int64_t{kHq} * kD}),
                 out.view(DType::kBF16, {kRows, int64_t{kHq} * kD}), math);
    std::vector<uint16_t> host(static_cast<std::size_t>(kRows * kHq * kD));
    be.synchronize();
    be.download(host.data(), out.view(DType::kBF16, {kRows, int64_t{kHq} * kD}));
    return host;
  }
};

TEST(CudaAttention, LongContextDecodeEqualsItsPrefillAndTheCpu) {
  std::unique_ptr<Backend> gpu = cuda::make_cuda_backend_if_present();
  ASSERT_NE(gpu, nullptr) << "no CUDA device";
  cpu::CpuBackend cpu_be;
  const Inputs in;
  Step g(*gpu, in), c(cpu_be, in);
  const std::size_t row = static_cast<std::size_t>(kHq * kD);
  for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
    SCOPED_TRACE(math == AttentionMath::kHfEager ? "hf-eager" : "fp32");
    const std::vector<uint16_t> prefill = g.run(0, kRows, math);
    for (int64_t t : {int64_t{0}, int64_t{8}, kRows - 1}) {
      const std::vector<uint16_t> alone = g.run(t, 1, math);
      EXPECT_TRUE(std::equal(alone.begin() + t * row, alone.begin() + (t + 1) * row, prefill.begin() + t * row))
          << "token " << t << ": decode (split) vs inside its prefill (fused)";
    }
    const std::vector<uint16_t> want = c.run(kRows - 1, 1, math);
    double err = 0, norm = 0;
    for (std::size_t i = (kRows - 1) * row; i < kRows * row; ++i) {
      const double w = fp4serve::bf16_to_f32(want[i]), d = fp4serve::bf16_to_f32(prefill[i]) - w;
      err += d * d;
      norm += w * w;
    }
    EXPECT_LT(err / norm, 5e-4) << "NMSE against the CPU op";
    std::printf("[attention] 32k fp8 decode vs CPU: NMSE %.3g\n", err / norm);
  }
  // The decode's time: K and V of both kv heads, fp8, read once per call.
  const AttentionSeqDesc d{{kRows - 1, 1, kCtx - 1}, g.kv};
  const TensorView q = g.q.view(DType::kBF16, {kRows, kHq, kD});
  const TensorView gate = g.gate.view(DType::kBF16, {kRows, int64_t{kHq} * kD});
  const TensorView out = g.out.view(DType::kBF16, {kRows, int64_t{kHq} * kD});
  for (int i = 0; i < 3; ++i) gpu->attention({&d, 1}, q, gate, out);
  gpu->synchronize();
  const int iters = 50;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) gpu->attention({&d, 1}, q, gate, out);
  gpu->synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  const double bytes = 2.0 * kCtx * kHkv * kD;
  std::printf("[attention] decode at 32k keys (fp8, Hq 16, Hkv 2, D 256): %.1f us, %.0f GB/s of K/V\n", s * 1e6,
              bytes / s / 1e9);
}

}  // namespace
}  // namespace fp4serve::kernels
