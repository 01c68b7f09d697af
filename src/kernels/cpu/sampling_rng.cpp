#include "kernels/cpu/sampling_rng.h"

namespace fp4serve::kernels::cpu {

namespace {
// Philox constants (Random123).
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> c) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return c;
}

double philox_uniform(uint64_t key, RngStream stream, uint64_t index) {
  const auto out = philox4x32({static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)},
                              {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               static_cast<uint32_t>(stream), 0u});
  const uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace fp4serve::kernels::cpu
