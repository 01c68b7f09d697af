// Qwen's block-FP8 weights (Qwen/Qwen3.6-35B-A3B-FP8): float8_e4m3fn [N, K] with one dequant factor
// `weight_scale_inv` per 128x128 block ([ceil(N/128), ceil(K/128)]; the name says "inv" but it is the
// multiplier: W = fp8 * weight_scale_inv, as in DeepSeek-V3's and vLLM's block-FP8 path).
#pragma once

#include <cstdint>
#include <vector>

namespace fp4serve {

inline constexpr int kFp8BlockSize = 128;

struct Fp8BlockWeight {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> data;         // [N, K] e4m3
  std::vector<float> scale_inv;      // [ceil(N/128), ceil(K/128)]
};

// amax/448 per block, RNE saturating e4m3 cast (what Qwen's and DeepSeek's exporters do).
Fp8BlockWeight fp8_block_quantize(const float* w, int64_t rows, int64_t cols);
void fp8_block_dequantize(const uint8_t* data, const float* scale_inv, int64_t rows, int64_t cols,
                          float* out);

// Per-tensor FP8 (ModelOpt FP8 linears): W = fp8 * weight_scale.
void fp8_tensor_dequantize(const uint8_t* data, float scale, int64_t count, float* out);

}  // namespace fp4serve
