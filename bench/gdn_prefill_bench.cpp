// Gated DeltaNet prefill of one sequence (kernels/gdn.h: causal conv1d + the delta rule over T
// tokens, in chunks of the engine's prefill budget) at Qwen3.6's shape: conv_dim 8192, 16 k heads,
// 32 v heads, 128 x 128 fp32 state. The rule runs in its recurrent form (batch invariance), so the
// cost is linear in T. Counters: tok/s, GFLOP/s (about 7 dk dv flops per v head per token: decay,
// S^T k, rank-1 update, S^T q), GB/s of the state read and written once per chunk plus the
// qkv input and output activations.
// Name: GdnPrefill/isa:<i>/T:<tokens>/chunk:<c>, isa 0 scalar, 1 avx2, 2 avx512, 3 avx512_bf16 ...
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench_weights.h"
#include "kernels/gdn.h"
#include "kernels/cpu/gdn_cpu.h"

namespace {

using namespace fp4serve;

void BM_GdnPrefill(benchmark::State& state) {
  const auto isa = static_cast<kernels::cpu::Isa>(state.range(0));
  const int64_t T = state.range(1), chunk = state.range(2);
  kernels::GdnDims d;
  const int64_t C = d.conv_dim(), Vd = d.value_dim();
  uint32_t s = 4242;
  std::vector<uint16_t> raw(static_cast<size_t>(T * C)), qkv(raw.size()), out(static_cast<size_t>(T * Vd));
  for (auto& v : raw) v = benchutil::random_bf16(s);
  std::vector<uint16_t> conv_w(static_cast<size_t>(C * d.conv_kernel));
  for (auto& v : conv_w) v = benchutil::random_bf16(s);
  std::vector<float> g(static_cast<size_t>(T * d.Hv), -0.05f), beta(g.size(), 0.5f);
  std::vector<float> S(static_cast<size_t>(d.state_elems()), 0.0f);
  std::vector<uint16_t> conv_state(static_cast<size_t>(d.conv_state_elems()), 0);
  for (auto _ : state) {
    std::fill(S.begin(), S.end(), 0.0f);
    std::fill(conv_state.begin(), conv_state.end(), 0);
    for (int64_t a = 0; a < T; a += chunk) {
      const int64_t n = std::min(chunk, T - a);
      kernels::gdn_conv1d(raw.data() + a * C, n, C, conv_w.data(), d.conv_kernel, conv_state.data(), qkv.data() + a * C);
      kernels::gdn_recurrent(qkv.data() + a * C, n, d, g.data() + a * d.Hv, beta.data() + a * d.Hv, S.data(),
                             out.data() + a * Vd, isa);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double chunks = static_cast<double>((T + chunk - 1) / chunk);
  const double bytes = chunks * 2.0 * 4.0 * static_cast<double>(d.state_elems()) +
                       static_cast<double>(T) * (2.0 * 2 * C + 2.0 * Vd);
  const double flops = static_cast<double>(T) * d.Hv * 7.0 * d.dk * d.dv;
  benchutil::set_rate_counters(state, bytes, flops);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(benchutil::isa_label(static_cast<int>(state.range(0))));
}

void register_all() {
  auto* b = benchmark::RegisterBenchmark("GdnPrefill", BM_GdnPrefill);
  b->ArgNames({"isa", "T", "chunk"})->UseRealTime()->Unit(benchmark::kMillisecond);
  for (int isa : benchutil::isa_args()) {
    b->Args({isa, 512, 512});
    b->Args({isa, 512, 64});
    b->Args({isa, 4096, 2048});
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
