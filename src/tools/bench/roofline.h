// The machine's roofline, measured in the run that quotes it (`fp4serve bench model`): read
// bandwidth of all threads over a buffer much larger than the last-level cache, and the peak rate of
// fp32 FMA (and of bf16 dot products where the CPU has AVX-512 BF16). Decode efficiency is quoted
// against the bandwidth: active bytes per token x tokens/s / bandwidth.
#pragma once

#include <cstdint>
#include <optional>

namespace fp4serve::tools::bench {

struct Roofline {
  double read_gbs = 0;                   // GB/s (1e9), best of the timed passes
  uint64_t buffer_bytes = 0;             // the streamed buffer
  double fp32_fma_gflops = 0;            // GFLOP/s (an FMA is 2 flops), all threads
  const char* fma_isa = "scalar";        // the widest vector FMA used
  std::optional<double> bf16_dot_gflops; // vdpbf16ps (2 flops per bf16 pair); absent without avx512_bf16
  int threads = 1;
};

// Reads words[0 .. n) once on the kernels' thread pool (blocks spread over the threads) and returns
// their sum: the read-bandwidth loop, shared with bench/membw_bench.
uint64_t parallel_sum_words(const uint64_t* words, int64_t n);

// A buffer of 64-bit words for the read-bandwidth loop: huge-page backed, first touched by the
// kernels' threads.
class ReadBuffer {
 public:
  explicit ReadBuffer(uint64_t bytes);
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  ~ReadBuffer();
  const uint64_t* data() const { return data_; }
  int64_t words() const { return words_; }

 private:
  int64_t words_;
  uint64_t* data_ = nullptr;
};

// The default streamed size: 4x the last-level cache, at least 1 GiB (a buffer only twice a large
// L3 is partly served by it: adaptive replacement keeps part of a cyclic working set).
uint64_t default_bandwidth_buffer_bytes();

// Streams `buffer_bytes` (touched once first) `passes` times on the kernels' thread pool.
double measure_read_bandwidth_gbs(uint64_t buffer_bytes, int passes = 3);
// Independent FMA chains in registers on every thread, for about `seconds`.
double measure_fp32_fma_gflops(double seconds, const char** isa_used = nullptr);
std::optional<double> measure_bf16_dot_gflops(double seconds);

Roofline measure_roofline(uint64_t buffer_bytes, double compute_seconds = 0.2);

// Register-only loops per ISA (roofline_<isa>.cpp, compiled with that ISA's flags). Each runs
// `iters` iterations and returns a value derived from its accumulators so the work stays.
// Flops per iteration: kFmaChains x lanes x 2.
inline constexpr int kFmaChains = 12;
float fma_loop_avx2(int64_t iters);    // 8 lanes
float fma_loop_avx512(int64_t iters);  // 16 lanes
float bf16_dot_loop_avx512bf16(int64_t iters);  // 32 bf16 pairs per instruction

}  // namespace fp4serve::tools::bench
