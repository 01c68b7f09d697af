#include "kernels/cpu/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernels/cpu/cpu_features.h"

namespace fp4serve::kernels::cpu {
namespace {

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && std::atoi(env) > 0)
    return std::atoi(env);
  return std::max(1, cpu_features().logical_cores);
}

std::atomic<int> g_threads{0};

}  // namespace

int num_threads() {
  int t = g_threads.load(std::memory_order_relaxed);
  if (t <= 0) {
    t = default_threads();
    g_threads.store(t);
  }
  return t;
}

void set_num_threads(int n) { g_threads.store(n > 0 ? n : default_threads()); }

void parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  // One contiguous range per thread, sizes differing by at most one grain.
  const int64_t chunks = std::min<int64_t>(max_chunks, threads);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t per = (max_chunks + chunks - 1) / chunks;  // grains per chunk
    const int64_t b = std::min(n, c * per * grain);
    const int64_t e = std::min(n, (c + 1) * per * grain);
    if (b < e) fn(b, e);
  }
}

}  // namespace fp4serve::kernels::cpu
