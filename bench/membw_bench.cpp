// Read-bandwidth roofline: stream a 1 GiB buffer on all cores (the same thread pool the kernels
// use), so GEMV figures from the same run can be quoted as a fraction of what memory delivers.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/thread_pool.h"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;

// Sums 64-bit words with four independent chains (the compiler vectorizes this at -O2).
uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

void BM_StreamRead1GiB(benchmark::State& state) {
  static std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> v(kBytes / 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;  // touch every page
    return v;
  }();
  const int64_t words = static_cast<int64_t>(buf.size());
  const int64_t blocks = fp4serve::kernels::cpu::num_threads() * 16;
  std::vector<uint64_t> partial(blocks);
  for (auto _ : state) {
    fp4serve::kernels::cpu::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t w0 = words * b / blocks, w1 = words * (b + 1) / blocks;
        partial[b] = sum_words(buf.data() + w0, w1 - w0);
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kBytes), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.counters["threads"] = fp4serve::kernels::cpu::num_threads();
}
BENCHMARK(BM_StreamRead1GiB)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
