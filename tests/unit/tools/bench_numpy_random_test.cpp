// NumpyGenerator against values printed by numpy 2.2 (np.random.default_rng(seed).integers(...)),
// so the random dataset draws what `vllm bench serve --seed` draws.
#include <gtest/gtest.h>

#include <vector>

#include "tools/bench/numpy_random.h"

namespace fp4serve::tools::bench {
namespace {

TEST(BenchNumpyRandom, SeedZeroSmallRangesMatchNumpy) {
  NumpyGenerator r(0);
  EXPECT_EQ(r.integers(0, 10, 5), (std::vector<std::int64_t>{8, 6, 5, 2, 3}));
  // The buffered upper half of the last 64-bit draw carries into the next call, as in numpy.
  EXPECT_EQ(r.integers(0, 151643, 3), (std::vector<std::int64_t>{6213, 11409, 2506}));
}

TEST(BenchNumpyRandom, OffsetRangeMatchesNumpy) {
  NumpyGenerator r(0);
  EXPECT_EQ(r.integers(3, 7, 4), (std::vector<std::int64_t>{6, 5, 5, 4}));
}

TEST(BenchNumpyRandom, SixtyFourBitRangesMatchNumpy) {
  NumpyGenerator r(12345);
  EXPECT_EQ(r.integers(0, std::int64_t{1} << 40, 3), (std::vector<std::int64_t>{249958600114, 348279477705, 876712591924}));
  EXPECT_EQ(r.integers(5, 100, 3), (std::vector<std::int64_t>{66, 69, 98}));
}

TEST(BenchNumpyRandom, MultiWordSeedAndNegativeLowMatchNumpy) {
  NumpyGenerator r((std::uint64_t{1} << 40) + 3);
  EXPECT_EQ(r.integers(-5, 5, 4), (std::vector<std::int64_t>{2, 2, -1, 4}));
  EXPECT_EQ(r.integers(0, std::int64_t{1} << 62, 2),
            (std::vector<std::int64_t>{2182152584693574434, 299071029661050192}));
}

TEST(BenchNumpyRandom, EmptyRangeIsRefused) { EXPECT_THROW(NumpyGenerator(0).integers(5, 5), std::invalid_argument); }

}  // namespace
}  // namespace fp4serve::tools::bench
