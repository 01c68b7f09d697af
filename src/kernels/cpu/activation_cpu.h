// The CPU embedding lookup (the activations themselves are kernels/activation.h's inline formulas).
#pragma once

#include <cstdint>

namespace fp4serve::kernels {

// out[t, :] = table[ids[t], :] (bf16 rows of `hidden`). Throws std::out_of_range naming the bad id.
void embedding_lookup(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t T,
                      uint16_t* out);

}  // namespace fp4serve::kernels
