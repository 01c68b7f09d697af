#include "tools/bench/roofline.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"

namespace fp4serve::tools::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Sums 64-bit words with four independent chains (vectorized by the compiler at -O2).
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

// Runs loop(iters) once per thread, all threads at once; returns the wall seconds of the region.
template <class Loop>
double run_on_all_threads(int64_t iters, Loop loop) {
  const int threads = kernels::cpu::num_threads();
  std::vector<float> sink(static_cast<size_t>(threads));
  const auto t0 = clock_type::now();
  kernels::cpu::parallel_for(threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) sink[static_cast<size_t>(t)] = loop(iters);
  });
  const double s = seconds_since(t0);
  volatile float keep = sink[0];
  (void)keep;
  return s;
}

// Calibrates the iteration count so one timed region takes about `seconds`, then reports the best
// of three regions in GFLOP/s.
template <class Loop>
double peak_gflops(double seconds, double flops_per_iter, Loop loop) {
  int64_t iters = 1 << 16;
  double s = run_on_all_threads(iters, loop);
  while (s < seconds / 4 && iters < (int64_t{1} << 40)) {
    iters *= 2;
    s = run_on_all_threads(iters, loop);
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / std::max(s, 1e-9)));
  double best = 1e300;
  for (int r = 0; r < 3; ++r) best = std::min(best, run_on_all_threads(iters, loop));
  const double flops = flops_per_iter * static_cast<double>(iters) * kernels::cpu::num_threads();
  return flops / best / 1e9;
}

}  // namespace

uint64_t parallel_sum_words(const uint64_t* words, int64_t n) {
  const int64_t blocks = static_cast<int64_t>(kernels::cpu::num_threads()) * 16;
  std::vector<uint64_t> partial(static_cast<size_t>(blocks));
  kernels::cpu::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t w0 = n * b / blocks, w1 = n * (b + 1) / blocks;
      partial[static_cast<size_t>(b)] = sum_words(words + w0, w1 - w0);
    }
  });
  uint64_t total = 0;
  for (uint64_t v : partial) total += v;
  return total;
}

ReadBuffer::ReadBuffer(uint64_t bytes) : words_(static_cast<int64_t>(std::max<uint64_t>(bytes / 8, 1024))) {
  // Transparent huge pages, as the packed weights the kernels stream (kernels/packed_weight.h):
  // with 4 KB pages the buffer paid TLB misses the weights no longer pay and read ~20% slower.
  const size_t size = static_cast<size_t>(words_) * 8;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, size, MADV_HUGEPAGE);
  data_ = static_cast<uint64_t*>(p);
  // First touch from the threads that will read it (NUMA placement).
  const int64_t blocks = static_cast<int64_t>(kernels::cpu::num_threads()) * 16;
  kernels::cpu::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t w = words_ * b / blocks, e = words_ * (b + 1) / blocks; w < e; ++w) data_[w] = static_cast<uint64_t>(w);
  });
}

ReadBuffer::~ReadBuffer() { munmap(data_, static_cast<size_t>(words_) * 8); }

uint64_t default_bandwidth_buffer_bytes() {
  return std::max<uint64_t>(uint64_t{1} << 30, 4 * static_cast<uint64_t>(kernels::cpu::last_level_cache_bytes()));
}

double measure_read_bandwidth_gbs(uint64_t buffer_bytes, int passes) {
  const ReadBuffer buf(buffer_bytes);
  double best = 1e300;
  volatile uint64_t keep = 0;
  for (int p = 0; p < std::max(1, passes); ++p) {
    const auto t0 = clock_type::now();
    keep = keep + parallel_sum_words(buf.data(), buf.words());
    best = std::min(best, seconds_since(t0));
  }
  return static_cast<double>(buf.words()) * 8.0 / best / 1e9;
}

double measure_fp32_fma_gflops(double seconds, const char** isa_used) {
  using kernels::cpu::Isa;
  if (kernels::cpu::isa_supported(Isa::kAvx512)) {
    if (isa_used) *isa_used = "avx512";
    return peak_gflops(seconds, kFmaChains * 16.0 * 2.0, fma_loop_avx512);
  }
  if (kernels::cpu::isa_supported(Isa::kAvx2)) {
    if (isa_used) *isa_used = "avx2";
    return peak_gflops(seconds, kFmaChains * 8.0 * 2.0, fma_loop_avx2);
  }
  // Baseline x86-64 (SSE2 has no FMA): a mul+add per element, 4 lanes, counted as 2 flops.
  if (isa_used) *isa_used = "scalar";
  return peak_gflops(seconds, kFmaChains * 2.0, [](int64_t iters) {
    float acc[kFmaChains];
    for (int i = 0; i < kFmaChains; ++i) acc[i] = 0.001f * static_cast<float>(i);
    for (int64_t it = 0; it < iters; ++it)
      for (float& a : acc) a = a * 0.999999f + 1e-7f;
    float s = 0;
    for (float a : acc) s += a;
    return s;
  });
}

std::optional<double> measure_bf16_dot_gflops(double seconds) {
  const auto& f = kernels::cpu::cpu_features();
  if (!f.avx512_bf16 || !kernels::cpu::isa_supported(kernels::cpu::Isa::kAvx512)) return std::nullopt;
  return peak_gflops(seconds, kFmaChains * 32.0 * 2.0, bf16_dot_loop_avx512bf16);
}

Roofline measure_roofline(uint64_t buffer_bytes, double compute_seconds) {
  Roofline r;
  r.threads = kernels::cpu::num_threads();
  r.buffer_bytes = buffer_bytes;
  r.read_gbs = measure_read_bandwidth_gbs(buffer_bytes);
  r.fp32_fma_gflops = measure_fp32_fma_gflops(compute_seconds, &r.fma_isa);
  r.bf16_dot_gflops = measure_bf16_dot_gflops(compute_seconds);
  return r;
}

}  // namespace fp4serve::tools::bench
