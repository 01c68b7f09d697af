// One Gated DeltaNet decode step (kernels/gdn.h gdn_recurrent, T = 1) for Qwen3.6's shape: 32 V
// heads of a 128x128 fp32 state (2 MiB). "GB/s" counts the state read once and written once per
// step (4 MiB), the minimum traffic of the step. Arg: isa (0 scalar, 1 avx2, 2 avx512, ... as supported here).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/gdn.h"
#include "kernels/cpu/gdn_cpu.h"

namespace {

using namespace fp4serve::kernels;

void BM_GdnDecodeStep(benchmark::State& state) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  if (!cpu::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  GdnDims d;  // 16 k heads, 32 v heads, 128 x 128
  std::vector<uint16_t> qkv(d.conv_dim());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = f32_to_bf16_bits(0.01f * static_cast<float>(i % 97) - 0.4f);
  std::vector<float> g(d.Hv, -0.05f), beta(d.Hv, 0.5f), S(d.state_elems(), 0.001f);
  std::vector<uint16_t> out(d.value_dim());
  for (auto _ : state) {
    gdn_recurrent(qkv.data(), 1, d, g.data(), beta.data(), S.data(), out.data(), isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * 4.0 * static_cast<double>(d.state_elems()),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(cpu::isa_name(isa)));
}
void isa_args(benchmark::internal::Benchmark* b) {
  for (cpu::Isa isa : cpu::supported_isas()) b->Arg(static_cast<int>(isa));
}
BENCHMARK(BM_GdnDecodeStep)->Apply(isa_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
