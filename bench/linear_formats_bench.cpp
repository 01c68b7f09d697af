// Linear-layer throughput (kernels/linear.h) for the FP8 (per-tensor and 128x128-block), BF16 and
// NVFP4 weight formats at Qwen3.6-35B-A3B's real dense shapes, GEMV (M = 1) and small-batch GEMM
// (M = 8, 64), per CPU path this machine runs. Counters: GB/s of weight bytes, GFLOP/s (2 M N K).
// Weights rotate through a stack of twice the last-level cache (at least 64 MiB) so every call
// streams from DRAM, as in a decode step; on the avx512_bf16 / amx tiers they are packed into
// panels first, as the model binds them. Compare GB/s with membw_bench (or `fp4serve bench model`'s
// roofline).
// Name: Linear/<format>/<shape>/isa:<i>/M:<m>, isa 0 scalar, 1 avx2, 2 avx512, 3 avx512_bf16 ...
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_weights.h"
#include "kernels/cpu/linear_cpu.h"

namespace {

using namespace fp4serve;
using benchutil::WeightStack;
using kernels::WeightLayout;

struct Shape {
  const char* name;
  int64_t n, k;
};

// hidden 2048; attention 16 q heads (+ gate) / 2 kv heads x 256; GDN conv_dim 8192, value_dim 4096;
// shared expert 512; vocab 248320.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"attn_q_proj", 8192, 2048},   {"attn_kv_proj", 512, 2048},     {"attn_o_proj", 2048, 4096},
      {"gdn_in_proj_qkv", 8192, 2048}, {"gdn_in_proj_z", 4096, 2048}, {"gdn_out_proj", 2048, 4096},
      {"shared_gate_up", 512, 2048}, {"shared_down", 2048, 512},      {"lm_head", 248320, 2048},
  };
  return s;
}

// One weight stack alive at a time: the benchmarks of one (format, shape) are registered together.
const WeightStack& stack_for(WeightLayout f, const Shape& sh) {
  static std::unique_ptr<WeightStack> cur;
  if (!cur || cur->format != f || cur->n != sh.n || cur->k != sh.k) {
    cur.reset();
    cur = std::make_unique<WeightStack>(f, WeightStack::count_for(f, sh.n, sh.k, benchutil::dram_rotation_bytes()), sh.n, sh.k);
  }
  return *cur;
}

void run_linear(benchmark::State& state, WeightLayout f, Shape sh) {
  const auto isa = static_cast<kernels::cpu::Isa>(state.range(0));
  const int64_t M = state.range(1);
  const WeightStack& w = stack_for(f, sh);
  std::vector<float> x(static_cast<size_t>(M * sh.k), 0.01f), y(static_cast<size_t>(M * sh.n));
  (void)w.view_for(0, isa);  // packs the stack (once) outside the timing
  int64_t i = 0;
  for (auto _ : state) {
    kernels::linear(x.data(), M, w.view_for(i++, isa), y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  benchutil::set_rate_counters(state, static_cast<double>(w.bytes_per_weight()),
                               2.0 * static_cast<double>(M) * static_cast<double>(sh.n) * static_cast<double>(sh.k));
  state.SetLabel(benchutil::isa_label(static_cast<int>(state.range(0))));
}

void register_all() {
  for (WeightLayout f : {WeightLayout::kFp8Tensor, WeightLayout::kFp8Block, WeightLayout::kBf16, WeightLayout::kNvfp4}) {
    for (const Shape& sh : shapes()) {
      const bool lm_head = std::string(sh.name) == "lm_head";
      auto* b = benchmark::RegisterBenchmark(
          (std::string("Linear/") + benchutil::short_format_name(f) + "/" + sh.name).c_str(),
          [f, sh](benchmark::State& s) { run_linear(s, f, sh); });
      b->ArgNames({"isa", "M"})->UseRealTime()->Unit(lm_head ? benchmark::kMillisecond : benchmark::kMicrosecond);
      for (int isa : benchutil::isa_args()) {
        // The lm_head (0.3-1 GB) as GEMV only, and not on the scalar reference path (seconds per call).
        if (lm_head) {
          if (isa > 0) b->Args({isa, 1});
          continue;
        }
        for (int m : {1, 8, 64}) b->Args({isa, m});
      }
    }
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
