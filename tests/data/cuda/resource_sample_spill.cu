// Input of the resource check's self-test (scripts/cuda_resource_check.py --self-test), compiled
// by capture_resource_sample.sh: a kernel whose register cap (__launch_bounds__: 1024 threads x 2
// blocks = 32 registers) forces spills, one with a stack frame (a per-thread array at run-time
// indices), and one that needs neither.
__global__ void __launch_bounds__(1024, 2) spilling_kernel(const float* x, float* out, int n) {
  float acc[48];
#pragma unroll
  for (int j = 0; j < 48; ++j) acc[j] = x[j];
  for (int i = 0; i < n; ++i) {
#pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = acc[j] * x[i + j] + acc[(j + 1) % 48];
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 48; ++j) s += acc[j];
  out[threadIdx.x] = s;
}
__global__ void local_array_kernel(const int* idx, float* out) {
  float a[64];
  for (int i = 0; i < 64; ++i) a[idx[i] & 63] = out[i] * 2.0f;
  out[threadIdx.x] = a[idx[threadIdx.x] & 63];
}
__global__ void clean_kernel(const float* x, float* out) {
  __shared__ float tile[256];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[255 - threadIdx.x];
}
