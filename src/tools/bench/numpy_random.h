// numpy.random.default_rng(seed) in C++: SeedSequence -> PCG64 (XSL-RR 128/64) and
// Generator.integers(low, high) for int64. `vllm bench serve` draws the random dataset's lengths,
// offsets and prefix from this generator, so reproducing it bit for bit gives the same requests
// for the same --seed (checked against numpy in tests/unit/tools/bench_dataset_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fp4serve::tools::bench {

class NumpyGenerator {
 public:
  explicit NumpyGenerator(std::uint64_t seed);

  std::uint64_t next_uint64();
  // numpy buffers the upper half of a 64-bit draw for the next 32-bit request.
  std::uint32_t next_uint32();

  // Generator.integers(low, high): uniform in [low, high), Lemire's unbiased bounded method
  // exactly as numpy's random_bounded_uint64_fill (32-bit path when the range fits).
  std::int64_t integers(std::int64_t low, std::int64_t high);
  std::vector<std::int64_t> integers(std::int64_t low, std::int64_t high, std::size_t n);

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has_uint32_ = false;
  std::uint32_t uinteger_ = 0;
};

}  // namespace fp4serve::tools::bench
