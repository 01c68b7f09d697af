// One sparse MoE block (kernels/moe.h moe_block) at Qwen3.6-35B-A3B's shape: 256 experts, top-8,
// hidden 2048, expert width 512, a shared expert of 512, for T = 1, 8, 32 tokens, with the experts
// in NVFP4, FP8 (128-block) or BF16 and the router in bf16 (as the releases keep it).
// Counters: GB/s of the weight bytes the call actually reads (router + shared expert + the distinct
// experts its tokens route to, counted from the routing of the benchmark's input), GFLOP/s of the
// matmuls (router, top-k experts per token, shared expert), experts_hit.
// Name: MoeBlock/<format>/isa:<i>/T:<t>, isa 0 scalar, 1 avx2, 2 avx512, 3 avx512_bf16 ...
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench_weights.h"
#include "kernels/bf16.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/moe.h"
#include "kernels/cpu/moe_cpu.h"

namespace {

using namespace fp4serve;
using benchutil::WeightStack;
using kernels::WeightLayout;

constexpr int64_t kH = 2048, kI = 512, kE = 256, kTopK = 8, kShared = 512;

struct MoeSetup {
  WeightLayout format;
  WeightStack gate_up, down, shared_gate_up, shared_down, router, shared_gate;
  kernels::MoeWeights w;         // plain views
  kernels::MoeWeights w_panels;  // packed (for the panel tiers)
  std::vector<std::unique_ptr<kernels::PackedWeight>> keep;

  explicit MoeSetup(WeightLayout f)
      : format(f),
        gate_up(f, 2 * kE, kI, kH),
        down(f, kE, kH, kI),
        shared_gate_up(f, 2, kShared, kH),
        shared_down(f, 1, kH, kShared),
        router(WeightLayout::kBf16, 1, kE, kH),
        shared_gate(WeightLayout::kBf16, 1, 1, kH) {
    w.router = router.view(0);
    for (int64_t e = 0; e < kE; ++e) w.experts.push_back({gate_up.view(2 * e), gate_up.view(2 * e + 1), down.view(e)});
    w.has_shared = true;
    w.shared = {shared_gate_up.view(0), shared_gate_up.view(1), shared_down.view(0)};
    w.shared_gate = shared_gate.view(0);
    w.top_k = static_cast<int>(kTopK);
    w_panels = w;
    const kernels::cpu::Isa top = kernels::cpu::supported_isas().back();
    auto bind = [&](kernels::WeightView& v) { v = benchutil::bind_for(v, top, keep); };
    bind(w_panels.router);
    bind(w_panels.shared_gate);
    for (kernels::ExpertWeights* x : {&w_panels.shared}) {
      bind(x->gate);
      bind(x->up);
      bind(x->down);
    }
    for (auto& x : w_panels.experts) {
      bind(x.gate);
      bind(x.up);
      bind(x.down);
    }
  }
  const kernels::MoeWeights& weights_for(kernels::cpu::Isa isa) const {
    return kernels::cpu::kernel_table(isa).linear_packed != nullptr ? w_panels : w;
  }
  double expert_bytes() const { return 2.0 * gate_up.bytes_per_weight() + down.bytes_per_weight(); }
  double always_read_bytes() const {
    return router.bytes_per_weight() + 2.0 * shared_gate_up.bytes_per_weight() + shared_down.bytes_per_weight() +
           shared_gate.bytes_per_weight();
  }
};

const MoeSetup& setup_for(WeightLayout f) {
  static std::unique_ptr<MoeSetup> cur;
  if (!cur || cur->format != f) {
    cur.reset();
    cur = std::make_unique<MoeSetup>(f);
  }
  return *cur;
}

// How many distinct experts the T tokens of x route to (the router run once outside the timing).
int64_t experts_hit(const MoeSetup& s, const std::vector<uint16_t>& x, int64_t T) {
  std::vector<float> logits(static_cast<size_t>(T * kE));
  kernels::linear_bf16(x.data(), T, s.w.router, logits.data());
  kernels::round_bf16_inplace(logits.data(), T * kE);
  std::vector<int32_t> idx(static_cast<size_t>(T * kTopK));
  std::vector<float> wts(idx.size());
  kernels::moe_route(logits.data(), T, static_cast<int>(kE), static_cast<int>(kTopK), idx.data(), wts.data());
  return static_cast<int64_t>(std::set<int32_t>(idx.begin(), idx.end()).size());
}

void BM_MoeBlock(benchmark::State& state, WeightLayout f) {
  const auto isa = static_cast<kernels::cpu::Isa>(state.range(0));
  const int64_t T = state.range(1);
  const MoeSetup& s = setup_for(f);
  uint32_t seed = 777;
  std::vector<uint16_t> x(static_cast<size_t>(T * kH)), out(x.size());
  for (auto& v : x) v = benchutil::random_bf16(seed);
  const int64_t hit = experts_hit(s, x, T);
  for (auto _ : state) {
    kernels::moe_block(x.data(), T, s.weights_for(isa), out.data(), isa);
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 2.0 * static_cast<double>(T) *
                       (static_cast<double>(kE * kH) + static_cast<double>(kTopK) * 3.0 * kI * kH + 3.0 * kShared * kH + kH);
  benchutil::set_rate_counters(state, s.always_read_bytes() + static_cast<double>(hit) * s.expert_bytes(), flops);
  state.counters["experts_hit"] = static_cast<double>(hit);
  state.SetLabel(benchutil::isa_label(static_cast<int>(state.range(0))));
}

void register_all() {
  for (WeightLayout f : {WeightLayout::kNvfp4, WeightLayout::kFp8Block, WeightLayout::kBf16}) {
    auto* b = benchmark::RegisterBenchmark((std::string("MoeBlock/") + benchutil::short_format_name(f)).c_str(),
                                           [f](benchmark::State& s) { BM_MoeBlock(s, f); });
    b->ArgNames({"isa", "T"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (int isa : benchutil::isa_args())
      for (int t : {1, 8, 32}) b->Args({isa, t});
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
