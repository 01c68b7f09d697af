// NVFP4 W4A16 GEMV/GEMM throughput (kernels/linear.h) in weight bytes per second, per CPU path.
// Compare with membw_bench's read bandwidth from the same machine for the roofline ratio.
//   Expert shapes (Qwen3.6: gate/up [512, 2048], down [2048, 512]):
//     *_hot   one expert, resident in cache after the first call (cache bandwidth)
//     *_cold  256 experts stacked, a different one each call (DRAM, like MoE decode)
//   lm_head-like [248320, 2048].
// Args: {isa (0 scalar, 1 avx2, 2 avx512), M}.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/linear.h"

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

void isa_args(benchmark::internal::Benchmark* b) {
  for (int isa : {0, 1, 2})
    for (int m : {1, 8, 64}) b->Args({isa, m});
}
void isa_args_gemv(benchmark::internal::Benchmark* b) {
  for (int isa : {0, 1, 2}) b->Args({isa, 1});
}

BENCHMARK(BM_Nvfp4_GateUp_512x2048_hot)->Apply(isa_args)->UseRealTime();
BENCHMARK(BM_Nvfp4_GateUp_512x2048_cold)->Apply(isa_args_gemv)->UseRealTime();
BENCHMARK(BM_Nvfp4_Down_2048x512_hot)->Apply(isa_args)->UseRealTime();
BENCHMARK(BM_Nvfp4_Down_2048x512_cold)->Apply(isa_args_gemv)->UseRealTime();
BENCHMARK(BM_Nvfp4_LmHead_248320x2048)->Apply(isa_args_gemv)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
