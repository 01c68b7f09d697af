// The chunked delta-rule kernel (gdn_chunked.cuh): the phases of each chunk in order, a
// __syncthreads between phases; every thread reaches every __syncthreads (the chunk loop and the
// phase bounds are the same for the whole block; only the work inside a phase is per thread).
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/gdn_chunked.h"
#include "kernels/cuda/graph_launch.cuh"

namespace fp4serve::kernels::cuda {
namespace {

using namespace gdn_chunked;

__global__ void __launch_bounds__(kChunkThreads) gdn_chunked_kernel(const RuleArgs a) {
  extern __shared__ float smem[];
  const ChunkLayout lay = chunk_layout(a.dk);
  Chunk c = chunk_at(smem, lay, a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y));
  const int tid = static_cast<int>(threadIdx.x);
  const int tile_elems = a.dk * kRuleCols;
  for (int idx = tid; idx < tile_elems; idx += kChunkThreads) chunk_load_state(a, c, idx);
  for (int64_t t0 = 0; t0 < a.rows; t0 += kGdnChunk) {
    c.t0 = t0;
    c.L = static_cast<int>(a.rows - t0 < kGdnChunk ? a.rows - t0 : kGdnChunk);
    __syncthreads();  // the state load, or the last chunk's phase 6, has read what phase 1 rewrites
    const int n_load = c.L * (c.dk > kRuleCols ? c.dk : kRuleCols);
    for (int idx = tid; idx < n_load; idx += kChunkThreads) chunk_load(a, c, idx);
    __syncthreads();
    if (tid == 0) chunk_cumsum(c);
    __syncthreads();
    const int n_scores = c.L * (c.L > kRuleCols ? c.L : kRuleCols);
    for (int idx = tid; idx < n_scores; idx += kChunkThreads) chunk_scores(a, c, idx);
    __syncthreads();
    if (tid < kRuleCols) chunk_solve(c, tid);
    __syncthreads();
    for (int idx = tid; idx < c.L * kRuleCols; idx += kChunkThreads) chunk_out(a, c, idx);
    __syncthreads();  // phase 5 read S0
    for (int idx = tid; idx < tile_elems; idx += kChunkThreads) chunk_state(c, idx);
  }
  __syncthreads();
  for (int idx = tid; idx < tile_elems; idx += kChunkThreads) chunk_store_state(a, c, idx);
}

}  // namespace

void launch_gdn_chunked(CudaContext& ctx, const RuleArgs& a, unsigned heads, unsigned tiles, std::size_t smem) {
  if (smem > kMaxSmemDefault)
    check(cudaFuncSetAttribute(gdn_chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "gdn_sequence chunked", "shared memory opt-in");
  launch_kernel(ctx, "gdn_sequence chunked delta rule", gdn_chunked_kernel, dim3(heads, tiles), kChunkThreads, smem, a);
  check_launch("gdn_sequence chunked delta rule", std::string("dk ") + std::to_string(a.dk),
               std::string("rows ") + std::to_string(a.rows));
}

}  // namespace fp4serve::kernels::cuda
