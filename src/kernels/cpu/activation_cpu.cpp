#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/activation.h"
#include "kernels/cpu/activation_cpu.h"

namespace fp4serve::kernels {

void embedding_lookup(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t T,
                      uint16_t* out) {
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      throw std::out_of_range("embedding_lookup: token id " + std::to_string(ids[t]) + " at position " +
                              std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    std::memcpy(out + t * hidden, table + static_cast<int64_t>(ids[t]) * hidden, sizeof(uint16_t) * hidden);
  }
}

}  // namespace fp4serve::kernels
