// Everything the model remembers about one sequence between steps: the Gated DeltaNet conv and
// recurrent states of every linear-attention layer, and the K/V rows of every full-attention layer
// (contiguous here; the engine's paged cache hands the kernels a block table instead).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace fp4serve::model {

struct SequenceState {
  int64_t length = 0;    // tokens processed so far = position of the next token
  int64_t capacity = 0;  // KV rows reserved per attention layer
  kernels::KvDtype kv_dtype = kernels::KvDtype::kBf16;
  std::vector<std::vector<uint16_t>> conv;  // per GDN layer: [Kc-1, conv_dim] bf16 raw inputs
  std::vector<std::vector<float>> ssm;      // per GDN layer: [Hv, dk, dv] fp32
  std::vector<std::vector<uint8_t>> k;      // per attention layer: [capacity, Hkv, D] bf16 or fp8
  std::vector<std::vector<uint8_t>> v;
};

}  // namespace fp4serve::model
