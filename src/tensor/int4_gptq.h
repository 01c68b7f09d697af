// INT4 GPTQ / AutoRound weights in the auto_gptq packing, symmetric, group size 128:
//   qweight int32 [K/8, N]: bits 4j..4j+3 of qweight[i][n] hold q for input k = 8i + j, output n
//   scales  f16   [K/g, N]
//   qzeros  int32 [K/g, N/8]: zero points packed along N. Symmetric checkpoints store 8 for every
//           group, written as 7 by the auto_gptq v1 convention ("zero - 1") or 8 by v2/AutoRound.
//   W[n,k] = (q - 8) * scale[k/g][n]
// vLLM's gptq_marlin runs symmetric checkpoints as uint4b8 (zero fixed at 8) and never reads
// qzeros; we do the same and only check that qzeros agree with "symmetric".
#pragma once

#include <cstdint>
#include <vector>

namespace fp4serve {

struct Int4GptqWeight {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K, a multiple of the group size and of 8
  int64_t group_size = 128;
  std::vector<int32_t> qweight;   // [K/8, N]
  std::vector<int32_t> qzeros;    // [K/g, N/8], v1 convention (0x77777777)
  std::vector<uint16_t> scales;   // [K/g, N] f16
};

// GPTQ's symmetric quantizer: scale = 2*amax/15 per (group, column), q = clamp(round(w/s) + 8, 0, 15).
Int4GptqWeight int4_gptq_quantize(const float* w, int64_t rows, int64_t cols, int64_t group_size = 128);
void int4_gptq_dequantize(const int32_t* qweight, const uint16_t* scales_f16, int64_t rows, int64_t cols,
                          int64_t group_size, float* out);

// The zero-point word of a symmetric checkpoint: 0x77777777 (v1) or 0x88888888 (v2).
bool int4_gptq_zeros_are_symmetric(const int32_t* qzeros, int64_t count);

}  // namespace fp4serve
