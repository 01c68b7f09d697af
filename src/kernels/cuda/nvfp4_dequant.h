// CUDA twin of tensor/nvfp4.h's nvfp4_dequantize: NVFP4 (packed e2m1, e4m3 block scales, fp32
// global scale) to bf16, one thread per byte pair. The CPU version is the reference it is tested
// against on the GPU machine (scripts/gpu-check.sh).
#pragma once

#include <cstdint>
#include <string>

namespace fp4serve::cuda {

// Device pointers. Returns an empty string on success, else the CUDA error text.
std::string nvfp4_dequantize_bf16(const uint8_t* packed, const uint8_t* block_scales, float global_scale,
                                  int64_t rows, int64_t cols, uint16_t* out_bf16);

// Host-side convenience for tests: copies in, runs, copies out. Errors as above.
std::string nvfp4_dequantize_bf16_host(const uint8_t* packed, const uint8_t* block_scales,
                                       float global_scale, int64_t rows, int64_t cols, uint16_t* out_bf16);

// "NVIDIA H200 (sm_90), driver 13.0, runtime 13.0" or the reason no device is usable.
std::string describe_devices();

}  // namespace fp4serve::cuda
