// Constants and steps follow numpy/random/bit_generator.pyx (SeedSequence), pcg64.h (PCG64) and
// distributions.c (random_bounded_uint64_fill, buffered_bounded_lemire_uint32, bounded_lemire_uint64).
#include "tools/bench/numpy_random.h"

#include <array>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp4serve::tools::bench {
namespace {

using u128 = unsigned __int128;

constexpr std::uint32_t kInitA = 0x43b0d7e5u;
constexpr std::uint32_t kMultA = 0x931e8875u;
constexpr std::uint32_t kInitB = 0x8b51f9ddu;
constexpr std::uint32_t kMultB = 0x58f38dedu;
constexpr std::uint32_t kMixMultL = 0xca01f9ddu;
constexpr std::uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr std::size_t kPoolSize = 4;

std::uint32_t hashmix(std::uint32_t value, std::uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

std::uint32_t mix(std::uint32_t x, std::uint32_t y) {
  std::uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// SeedSequence(seed).generate_state(4, uint64): the PCG64 seed (words 0,1) and increment (2,3).
std::array<std::uint64_t, 4> seed_sequence_state(std::uint64_t seed) {
  std::vector<std::uint32_t> entropy;
  if (seed == 0) entropy.push_back(0);
  for (std::uint64_t n = seed; n > 0; n >>= 32) entropy.push_back(static_cast<std::uint32_t>(n));

  std::array<std::uint32_t, kPoolSize> pool{};
  std::uint32_t hash_const = kInitA;
  for (std::size_t i = 0; i < kPoolSize; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  for (std::size_t src = 0; src < kPoolSize; ++src)
    for (std::size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (std::size_t src = kPoolSize; src < entropy.size(); ++src)
    for (std::size_t dst = 0; dst < kPoolSize; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));

  std::array<std::uint32_t, 8> words{};
  std::uint32_t hb = kInitB;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::uint32_t v = pool[i % kPoolSize];
    v ^= hb;
    hb *= kMultB;
    v *= hb;
    v ^= v >> kXShift;
    words[i] = v;
  }
  std::array<std::uint64_t, 4> out{};
  for (std::size_t i = 0; i < 4; ++i) out[i] = words[2 * i] | (static_cast<std::uint64_t>(words[2 * i + 1]) << 32);
  return out;
}

const u128 kPcgMultiplier = (static_cast<u128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

}  // namespace

NumpyGenerator::NumpyGenerator(std::uint64_t seed) {
  const auto s = seed_sequence_state(seed);
  const u128 initstate = (static_cast<u128>(s[0]) << 64) | s[1];
  const u128 initseq = (static_cast<u128>(s[2]) << 64) | s[3];
  // pcg_setseq_128_srandom_r
  state_ = 0;
  inc_ = (initseq << 1) | 1;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMultiplier + inc_;
}

std::uint64_t NumpyGenerator::next_uint64() {
  state_ = state_ * kPcgMultiplier + inc_;
  const std::uint64_t x = static_cast<std::uint64_t>(state_ >> 64) ^ static_cast<std::uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

std::uint32_t NumpyGenerator::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const std::uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<std::uint32_t>(next >> 32);
  return static_cast<std::uint32_t>(next & 0xffffffffu);
}

std::int64_t NumpyGenerator::integers(std::int64_t low, std::int64_t high) {
  if (high <= low) {
    throw std::invalid_argument("integers: high (" + std::to_string(high) + ") must exceed low (" +
                                std::to_string(low) + ")");
  }
  const std::uint64_t rng = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low) - 1;
  const std::uint64_t off = static_cast<std::uint64_t>(low);
  if (rng == 0) return low;
  if (rng <= 0xffffffffULL) {
    if (rng == 0xffffffffULL) return static_cast<std::int64_t>(off + next_uint32());
    const std::uint32_t rng_excl = static_cast<std::uint32_t>(rng) + 1;
    std::uint64_t m = static_cast<std::uint64_t>(next_uint32()) * rng_excl;
    std::uint32_t leftover = static_cast<std::uint32_t>(m);
    if (leftover < rng_excl) {
      const std::uint32_t threshold = (std::numeric_limits<std::uint32_t>::max() - static_cast<std::uint32_t>(rng)) % rng_excl;
      while (leftover < threshold) {
        m = static_cast<std::uint64_t>(next_uint32()) * rng_excl;
        leftover = static_cast<std::uint32_t>(m);
      }
    }
    return static_cast<std::int64_t>(off + (m >> 32));
  }
  if (rng == std::numeric_limits<std::uint64_t>::max()) return static_cast<std::int64_t>(off + next_uint64());
  const std::uint64_t rng_excl = rng + 1;
  u128 m = static_cast<u128>(next_uint64()) * rng_excl;
  std::uint64_t leftover = static_cast<std::uint64_t>(m);
  if (leftover < rng_excl) {
    const std::uint64_t threshold = (std::numeric_limits<std::uint64_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<u128>(next_uint64()) * rng_excl;
      leftover = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::int64_t>(off + static_cast<std::uint64_t>(m >> 64));
}

std::vector<std::int64_t> NumpyGenerator::integers(std::int64_t low, std::int64_t high, std::size_t n) {
  std::vector<std::int64_t> out(n);
  for (auto& v : out) v = integers(low, high);
  return out;
}

}  // namespace fp4serve::tools::bench
