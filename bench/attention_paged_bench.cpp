// Decode attention (kernels/attention.h gated_attention, one query token per sequence) over a paged
// KV cache at Qwen3.6-35B-A3B's shape (16 q heads, 2 kv heads, head_dim 256, block size 16), the
// blocks scattered in the pool as an engine's would be. KV in fp8 e4m3 (the NVFP4 release's
// calibrated KV cache) or bf16, context 512 or 4096 tokens, 1 or 8 sequences per call.
// Counters: GB/s of KV bytes read (context x 2 kv heads x 256 x K,V x element size, per sequence),
// GFLOP/s of q.K and p.V (2 x 2 x 16 heads x 256 x context per sequence).
// Name: PagedAttention/<kv>/isa:<i>/ctx:<c>/seqs:<s>, isa 0 scalar, 1 avx2, 2 avx512, 3 avx512_bf16 ...
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "bench_weights.h"
#include "kernels/attention.h"
#include "kernels/cpu/attention_cpu.h"

namespace {

using namespace fp4serve;

constexpr int kHq = 16, kHkv = 2, kD = 256, kBlock = 16;

void BM_PagedAttention(benchmark::State& state, kernels::KvDtype dtype) {
  const auto isa = static_cast<kernels::cpu::Isa>(state.range(0));
  const int64_t ctx = state.range(1), seqs = state.range(2);
  const int64_t elem = dtype == kernels::KvDtype::kBf16 ? 2 : 1;
  const int64_t blocks_per_seq = (ctx + kBlock - 1) / kBlock, blocks = blocks_per_seq * seqs;
  const int64_t block_bytes = kBlock * kHkv * kD * elem;
  uint32_t s = 99;
  std::vector<uint8_t> k(static_cast<size_t>(blocks * block_bytes)), v(k.size());
  if (dtype == kernels::KvDtype::kBf16) {
    for (auto* buf : {&k, &v}) {
      auto* p = reinterpret_cast<uint16_t*>(buf->data());
      for (size_t i = 0; i < buf->size() / 2; ++i) p[i] = benchutil::random_bf16(s);
    }
  } else {
    for (auto& b : k) b = benchutil::random_e4m3(s);
    for (auto& b : v) b = benchutil::random_e4m3(s);
  }
  // Blocks handed out in a shuffled order, so a sequence's blocks are not contiguous.
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[benchutil::lcg(s) % i]);
  std::vector<uint16_t> q(static_cast<size_t>(seqs * kHq * kD)), gate(q.size()), out(q.size());
  for (auto& x : q) x = benchutil::random_bf16(s);
  for (auto& x : gate) x = benchutil::random_bf16(s);
  std::vector<kernels::AttentionSeq> batch;
  for (int64_t i = 0; i < seqs; ++i) {
    kernels::KvView kv;
    kv.dtype = dtype;
    kv.k = k.data();
    kv.v = v.data();
    kv.block_size = kBlock;
    kv.block_table = order.data() + i * blocks_per_seq;
    kv.num_table_entries = blocks_per_seq;
    kv.n_kv_heads = kHkv;
    kv.head_dim = kD;
    kv.k_scale = kv.v_scale = 0.05f;
    kernels::AttentionSeq a;
    a.q = q.data() + i * kHq * kD;
    a.gate = gate.data() + i * kHq * kD;
    a.T = 1;
    a.pos0 = ctx - 1;  // the query is the context's last token
    a.kv = kv;
    a.out = out.data() + i * kHq * kD;
    batch.push_back(a);
  }
  for (auto _ : state) {
    kernels::gated_attention(batch, kHq, isa);
    benchmark::DoNotOptimize(out.data());
  }
  const double kv_bytes = static_cast<double>(seqs * ctx * kHkv * kD * 2 * elem);
  const double flops = static_cast<double>(seqs) * 2.0 * 2.0 * kHq * kD * static_cast<double>(ctx);
  benchutil::set_rate_counters(state, kv_bytes, flops);
  state.SetLabel(benchutil::isa_label(static_cast<int>(state.range(0))));
}

void register_all() {
  for (kernels::KvDtype dt : {kernels::KvDtype::kFp8E4M3, kernels::KvDtype::kBf16}) {
    const std::string name = std::string("PagedAttention/") + (dt == kernels::KvDtype::kBf16 ? "bf16" : "fp8_e4m3");
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [dt](benchmark::State& s) { BM_PagedAttention(s, dt); });
    b->ArgNames({"isa", "ctx", "seqs"})->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (int isa : benchutil::isa_args())
      for (int ctx : {512, 4096})
        for (int seqs : {1, 8}) b->Args({isa, ctx, seqs});
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
