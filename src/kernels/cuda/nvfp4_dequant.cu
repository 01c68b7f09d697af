#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/nvfp4_dequant.h"

namespace fp4serve::cuda {
namespace {

__constant__ float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// e4m3fn decode without a table: the exponent/mantissa fields scaled by powers of two.
__device__ float e4m3_to_float(uint8_t b) {
  const int e = (b >> 3) & 0xF, m = b & 0x7;
  if (e == 0xF && m == 0x7) return __int_as_float(0x7FC00000);  // NaN
  const float mag = e == 0 ? ldexpf(static_cast<float>(m), -9) : ldexpf(8.0f + m, e - 10);
  return (b & 0x80) ? -mag : mag;
}

__global__ void nvfp4_dequant_kernel(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                                     float global_scale, int64_t rows, int64_t cols,
                                     __nv_bfloat16* __restrict__ out) {
  const int64_t pair = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t total = rows * cols / 2;
  if (pair >= total) return;
  const int64_t elem = pair * 2;
  const int64_t n = elem / cols, k = elem % cols;
  const float s = e4m3_to_float(scales[n * (cols / 16) + k / 16]) * global_scale;
  const uint8_t byte = packed[pair];
  out[elem] = __float2bfloat16_rn(kE2M1[byte & 0xF] * s);
  out[elem + 1] = __float2bfloat16_rn(kE2M1[byte >> 4] * s);
}

std::string err(cudaError_t e) { return e == cudaSuccess ? std::string() : cudaGetErrorString(e); }

}  // namespace

std::string nvfp4_dequantize_bf16(const uint8_t* packed, const uint8_t* block_scales, float global_scale,
                                  int64_t rows, int64_t cols, uint16_t* out_bf16) {
  if (cols % 16 != 0) return "cols must be a multiple of 16";
  const int64_t pairs = rows * cols / 2;
  const int threads = 256;
  const int64_t blocks = (pairs + threads - 1) / threads;
  if (blocks == 0) return {};
  nvfp4_dequant_kernel<<<static_cast<unsigned>(blocks), threads>>>(
      packed, block_scales, global_scale, rows, cols, reinterpret_cast<__nv_bfloat16*>(out_bf16));
  return err(cudaGetLastError());
}

std::string nvfp4_dequantize_bf16_host(const uint8_t* packed, const uint8_t* block_scales,
                                       float global_scale, int64_t rows, int64_t cols, uint16_t* out_bf16) {
  uint8_t *d_packed = nullptr, *d_scales = nullptr;
  uint16_t* d_out = nullptr;
  const size_t n_packed = rows * cols / 2, n_scales = rows * cols / 16, n_out = rows * cols;
  std::string e;
  auto run = [&]() -> std::string {
    if (auto r = err(cudaMalloc(&d_packed, n_packed)); !r.empty()) return r;
    if (auto r = err(cudaMalloc(&d_scales, n_scales)); !r.empty()) return r;
    if (auto r = err(cudaMalloc(&d_out, n_out * 2)); !r.empty()) return r;
    if (auto r = err(cudaMemcpy(d_packed, packed, n_packed, cudaMemcpyHostToDevice)); !r.empty()) return r;
    if (auto r = err(cudaMemcpy(d_scales, block_scales, n_scales, cudaMemcpyHostToDevice)); !r.empty()) return r;
    if (auto r = nvfp4_dequantize_bf16(d_packed, d_scales, global_scale, rows, cols, d_out); !r.empty()) return r;
    return err(cudaMemcpy(out_bf16, d_out, n_out * 2, cudaMemcpyDeviceToHost));
  };
  e = run();
  cudaFree(d_packed);
  cudaFree(d_scales);
  cudaFree(d_out);
  return e;
}

std::string describe_devices() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return std::string("no CUDA device usable: ") + cudaGetErrorString(e);
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string s;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, i);
    s += std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 20) + " MiB)";
    s += "; ";
  }
  s += "driver " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) + ", runtime " +
       std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  return s;
}

}  // namespace fp4serve::cuda
