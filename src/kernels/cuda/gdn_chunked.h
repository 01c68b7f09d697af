// The chunked (WY/UT) delta-rule kernel of long prefills (gdn_chunked.cuh has the math): opt-in,
// since it is not split invariant bit for bit (gdn_plan.h, gdn_cuda.h).
#pragma once

#include <cstddef>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/gdn_device.cuh"

namespace fp4serve::kernels::cuda {

// One block of gdn_chunked::kChunkThreads per (v head, column tile), walking the rows a chunk at a
// time; `smem` = gdn_chunked::chunk_layout(dk).bytes (opted in above 48 KB).
void launch_gdn_chunked(CudaContext& ctx, const gdn_device::RuleArgs& a, unsigned heads, unsigned tiles,
                        std::size_t smem);

}  // namespace fp4serve::kernels::cuda
