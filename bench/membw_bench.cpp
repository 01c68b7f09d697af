// Read-bandwidth roofline: stream a buffer of 4x the last-level cache (at least 1 GiB, huge pages)
// on all cores -- the same thread pool, buffer and loop `fp4serve bench model` quotes -- so GEMV
// figures from the same machine can be quoted as a fraction of what memory delivers.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "kernels/cpu/thread_pool.h"
#include "tools/bench/roofline.h"

namespace {

using fp4serve::tools::bench::ReadBuffer;

void BM_StreamRead(benchmark::State& state) {
  static const ReadBuffer buf(fp4serve::tools::bench::default_bandwidth_buffer_bytes());
  for (auto _ : state) benchmark::DoNotOptimize(fp4serve::tools::bench::parallel_sum_words(buf.data(), buf.words()));
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(buf.words()) * 8.0,
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["MiB"] = static_cast<double>(buf.words() * 8 >> 20);
  state.counters["threads"] = fp4serve::kernels::cpu::num_threads();
}
BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
