// Read-bandwidth roofline: stream a 1 GiB buffer on all cores (the same thread pool the kernels
// use, the loop `fp4serve bench model` quotes), so GEMV figures from the same run can be quoted as a fraction of what memory delivers.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "tools/bench/roofline.h"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;

void BM_StreamRead1GiB(benchmark::State& state) {
  static std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> v(kBytes / 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;  // touch every page
    return v;
  }();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        fp4serve::tools::bench::parallel_sum_words(buf.data(), static_cast<int64_t>(buf.size())));
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kBytes), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.counters["threads"] = fp4serve::kernels::cpu::num_threads();
}
BENCHMARK(BM_StreamRead1GiB)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
