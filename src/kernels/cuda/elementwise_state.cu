// GDN state copy/zero on CUDA (elementwise_cuda.h): every byte range of every layer in one launch.
// Exact (bytes move unchanged).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/elementwise_cuda.h"
#include "kernels/cuda/elementwise_state.h"
#include "kernels/cuda/graph_launch.cuh"

namespace fp4serve::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocksPerJob = 128;

// Blocks (x) share a range, ranges spread over y (grid-stride over both). 16-byte moves when the
// range's ends and both pointers allow them, bytes otherwise (never, for the states' layouts).
__global__ void state_copy_jobs_kernel(const StateCopyJob* __restrict__ jobs, int n) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int j = blockIdx.y; j < n; j += gridDim.y) {
    const StateCopyJob job = jobs[j];
    char* d = static_cast<char*>(job.dst);
    const char* s = static_cast<const char*>(job.src);
    const auto bytes = static_cast<int64_t>(job.bytes);
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | job.bytes) & 15u) == 0) {
      const int64_t n16 = bytes / 16;
      for (int64_t i = tid; i < n16; i += stride)
        reinterpret_cast<uint4*>(d)[i] = s ? reinterpret_cast<const uint4*>(s)[i] : make_uint4(0, 0, 0, 0);
    } else {
      for (int64_t i = tid; i < bytes; i += stride) d[i] = s ? s[i] : 0;
    }
  }
}

}  // namespace

void run_state_copy_jobs(CudaContext& ctx, const std::vector<StateCopyJob>& jobs, const char* op) {
  if (jobs.empty()) return;
  uint64_t largest = 0;
  for (const StateCopyJob& j : jobs) largest = std::max(largest, j.bytes);
  const uint64_t per_block = uint64_t{kThreads} * 16 * 4;  // four 16-byte moves per thread
  const auto bx = static_cast<unsigned>(std::clamp<uint64_t>((largest + per_block - 1) / per_block, 1, kMaxBlocksPerJob));
  const auto by = static_cast<unsigned>(std::min<std::size_t>(jobs.size(), 65535));
  const StateCopyJob* d_jobs = ctx.upload(std::span<const StateCopyJob>(jobs), op);
  launch_kernel(ctx, op, state_copy_jobs_kernel, dim3(bx, by), kThreads, 0, d_jobs, static_cast<int>(jobs.size()));
  check_launch(op, std::to_string(jobs.size()) + " ranges");
}

void state_copy(CudaContext& ctx, std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& dims) {
  run_state_copy_jobs(ctx, state_copy_jobs(dst, src, dims), "state_copy");
}

void state_zero(CudaContext& ctx, std::span<const GdnStateRef> dst, const GdnDims& dims) {
  run_state_copy_jobs(ctx, state_zero_jobs(dst, dims), "state_zero");
}

}  // namespace fp4serve::kernels::cuda
