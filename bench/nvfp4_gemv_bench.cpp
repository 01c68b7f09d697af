// NVFP4 W4A16 GEMV/GEMM throughput (kernels/linear.h) in weight bytes per second, per CPU path.
// Compare with membw_bench's read bandwidth from the same machine for the roofline ratio.
//   Expert shapes (Qwen3.6: gate/up [512, 2048], down [2048, 512]):
//     *_hot   one expert, resident in cache after the first call (cache bandwidth)
//     *_cold  256 experts stacked, a different one each call (DRAM, like MoE decode)
//   lm_head-like [248320, 2048].
//   MoeBlock: the whole sparse-MoE layer (kernels/moe.h) at Qwen3.6 shapes: 256 NVFP4 experts
//     (gate/up [512, 2048], down [2048, 512]), top-8, bf16 router and shared expert (I = 512); each
//     call takes the next of 64 token batches, so the routed experts change (DRAM, like decode).
//     GB/s counts the weight bytes one call must read (routed experts, shared expert, router),
//     each expert once however many of the call's tokens it serves.
// Args: {isa (0 scalar, 1 avx2, 2 avx512, ... as supported here), M}.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/moe.h"
#include "kernels/cpu/moe_cpu.h"

namespace {

using namespace fp4serve::kernels;

struct Nvfp4Stack {
  int64_t count, n, k;
  std::vector<uint8_t> packed, scales;
  Nvfp4Stack(int64_t count_, int64_t n_, int64_t k_) : count(count_), n(n_), k(k_) {
    packed.resize(count * n * k / 2);
    scales.resize(count * n * k / 16);
    uint32_t s = 12345;
    for (auto& b : packed) b = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
    for (auto& b : scales) b = static_cast<uint8_t>(0x28 + ((s = s * 1664525u + 1013904223u) >> 29));
  }
  WeightView view(int64_t i) const {
    return nvfp4_weight(packed.data() + i * n * k / 2, scales.data() + i * n * k / 16, 1e-3f, n, k);
  }
  int64_t bytes_per_matrix() const { return n * k / 2 + n * k / 16; }
};

benchmark::Counter flops_counter(int64_t M, int64_t N, int64_t K) {
  return benchmark::Counter(2.0 * static_cast<double>(M * N * K), benchmark::Counter::kIsIterationInvariantRate,
                            benchmark::Counter::kIs1000);
}

void run(benchmark::State& state, const Nvfp4Stack& w, bool rotate) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  const int64_t M = state.range(1);
  if (!cpu::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  std::vector<float> x(M * w.k, 0.01f), y(M * w.n);
  int64_t i = 0;
  for (auto _ : state) {
    linear(x.data(), M, w.view(rotate ? (i++ % w.count) : 0), y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.bytes_per_matrix()),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = flops_counter(M, w.n, w.k);
  state.SetLabel(std::string(cpu::isa_name(isa)));
}

void BM_Nvfp4_GateUp_512x2048_hot(benchmark::State& s) {
  static Nvfp4Stack w(1, 512, 2048);
  run(s, w, false);
}
void BM_Nvfp4_GateUp_512x2048_cold(benchmark::State& s) {
  static Nvfp4Stack w(256, 512, 2048);
  run(s, w, true);
}
void BM_Nvfp4_Down_2048x512_hot(benchmark::State& s) {
  static Nvfp4Stack w(1, 2048, 512);
  run(s, w, false);
}
void BM_Nvfp4_Down_2048x512_cold(benchmark::State& s) {
  static Nvfp4Stack w(256, 2048, 512);
  run(s, w, true);
}
void BM_Nvfp4_LmHead_248320x2048(benchmark::State& s) {
  static Nvfp4Stack w(1, 248320, 2048);
  run(s, w, false);
}

// Every CPU path this machine runs (cpu::supported_isas(), so new tiers show up here unasked).
// Attention-sized dense weights in the other formats (q_proj-like [4096, 2048]), resident in L3 or
// not depending on the machine: GB/s of weight bytes and GFLOP/s, to compare the avx512 tiers.
void run_dense(benchmark::State& state, const WeightView& w, double bytes) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  const int64_t M = state.range(1);
  if (!cpu::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  std::vector<float> x(M * w.k, 0.01f), y(M * w.n);
  for (auto _ : state) {
    linear(x.data(), M, w, y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = flops_counter(M, w.n, w.k);
  state.SetLabel(std::string(cpu::isa_name(isa)));
}

void BM_Bf16_4096x2048(benchmark::State& s) {
  static std::vector<uint16_t> d(4096 * 2048, 0x3C00);
  run_dense(s, bf16_weight(d.data(), 4096, 2048), 2.0 * d.size());
}
void BM_Fp8Block_4096x2048(benchmark::State& s) {
  static std::vector<uint8_t> d(4096 * 2048, 0x34);
  static std::vector<float> sc(32 * 16, 0.01f);
  run_dense(s, fp8_block_weight(d.data(), sc.data(), false, 4096, 2048), static_cast<double>(d.size()));
}

struct MoeLayer {
  static constexpr int64_t E = 256, H = 2048, I = 512, Is = 512;
  Nvfp4Stack gate_up{1, E * 2 * I, H}, down{1, E * H, I};
  std::vector<uint16_t> router, shared_gate, shared_up, shared_down, sgate;
  MoeWeights w;
  MoeLayer() {
    auto bf16_random = [](int64_t n, uint32_t seed, float scale) {
      std::vector<uint16_t> v(n);
      for (auto& b : v) {
        seed = seed * 1664525u + 1013904223u;
        b = f32_to_bf16_bits(scale * (static_cast<float>(seed >> 8) / 16777216.0f - 0.5f));
      }
      return v;
    };
    router = bf16_random(E * H, 1, 0.2f);
    shared_gate = bf16_random(Is * H, 2, 0.05f);
    shared_up = bf16_random(Is * H, 3, 0.05f);
    shared_down = bf16_random(H * Is, 4, 0.05f);
    sgate = bf16_random(H, 5, 0.05f);
    w.router = bf16_weight(router.data(), E, H);
    w.shared = {bf16_weight(shared_gate.data(), Is, H), bf16_weight(shared_up.data(), Is, H),
                bf16_weight(shared_down.data(), H, Is)};
    w.shared_gate = bf16_weight(sgate.data(), 1, H);
    w.top_k = 8;
    const WeightView gu = gate_up.view(0), dn = down.view(0);
    for (int64_t e = 0; e < E; ++e)
      w.experts.push_back({slice_rows(gu, e * 2 * I, I), slice_rows(gu, e * 2 * I + I, I), slice_rows(dn, e * H, H)});
  }
};

void BM_Nvfp4_MoeBlock(benchmark::State& state) {
  static MoeLayer layer;
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  const int64_t T = state.range(1);
  if (!cpu::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  constexpr int kBatches = 64;
  std::vector<uint16_t> x(kBatches * T * MoeLayer::H), out(T * MoeLayer::H);
  uint32_t s = 99;
  for (auto& b : x) {
    s = s * 1664525u + 1013904223u;
    b = f32_to_bf16_bits(static_cast<float>((s >> 8) % 2001) / 1000.0f - 1.0f);
  }
  // Bytes each batch reads: distinct routed experts (from the same routing the kernel does).
  std::vector<double> bytes(kBatches);
  const double expert_bytes = 3.0 * MoeLayer::I * MoeLayer::H * (0.5 + 1.0 / 16);
  const double dense_bytes = 2.0 * (MoeLayer::E * MoeLayer::H + 3 * MoeLayer::Is * MoeLayer::H + MoeLayer::H);
  for (int b = 0; b < kBatches; ++b) {
    std::vector<float> xf(T * MoeLayer::H), logits(T * MoeLayer::E), rw(T * 8);
    bf16_to_f32(x.data() + b * T * MoeLayer::H, xf.data(), T * MoeLayer::H);
    linear(xf.data(), T, layer.w.router, logits.data(), cpu::Isa::kScalar);
    round_bf16_inplace(logits.data(), T * MoeLayer::E);
    std::vector<int32_t> idx(T * 8);
    moe_route(logits.data(), T, MoeLayer::E, 8, idx.data(), rw.data());
    std::vector<bool> hit(MoeLayer::E, false);
    int distinct = 0;
    for (int32_t e : idx) distinct += hit[e] ? 0 : (hit[e] = true, 1);
    bytes[b] = distinct * expert_bytes + dense_bytes;
  }
  double total = 0;
  int i = 0;
  for (auto _ : state) {
    const int b = i++ % kBatches;
    moe_block(x.data() + b * T * MoeLayer::H, T, layer.w, out.data(), isa);
    total += bytes[b];
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(total, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(T) * i, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(cpu::isa_name(isa)));
}

void isa_args(benchmark::internal::Benchmark* b) {
  for (cpu::Isa isa : cpu::supported_isas())
    for (int m : {1, 8, 64}) b->Args({static_cast<int>(isa), m});
}
void isa_args_gemv(benchmark::internal::Benchmark* b) {
  for (cpu::Isa isa : cpu::supported_isas()) b->Args({static_cast<int>(isa), 1});
}

BENCHMARK(BM_Nvfp4_GateUp_512x2048_hot)->Apply(isa_args)->UseRealTime();
BENCHMARK(BM_Nvfp4_GateUp_512x2048_cold)->Apply(isa_args_gemv)->UseRealTime();
BENCHMARK(BM_Nvfp4_Down_2048x512_hot)->Apply(isa_args)->UseRealTime();
BENCHMARK(BM_Nvfp4_Down_2048x512_cold)->Apply(isa_args_gemv)->UseRealTime();
BENCHMARK(BM_Bf16_4096x2048)->ArgsProduct({{2, 3}, {1, 64}})->UseRealTime();
BENCHMARK(BM_Fp8Block_4096x2048)->ArgsProduct({{2, 3}, {1, 64}})->UseRealTime();
BENCHMARK(BM_Nvfp4_MoeBlock)->ArgsProduct({{2, 3}, {1, 8}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nvfp4_LmHead_248320x2048)->Apply(isa_args_gemv)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
