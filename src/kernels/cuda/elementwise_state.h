// GDN state copy/zero on CUDA: the host half. Every layer's conv and recurrent state of an entry is
// one byte range; state_copy/state_zero become one list of ranges that a single kernel moves
// (elementwise_state.cu), instead of one cudaMemcpyAsync per range (two per layer, 60 calls for the
// model's 30 GDN layers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/gdn.h"

namespace fp4serve::kernels::cuda {

// bytes at dst = bytes at src, or zeros when src is null. Trivially copyable: uploaded as is.
struct StateCopyJob {
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
};

// The ranges of state_copy(dst, src): per layer its conv state ((Kc-1) * conv_dim bf16) and its
// recurrent state (Hv * dk * dv f32); a range copied onto itself is left out. Throws
// std::invalid_argument when the layer counts differ or a pointer is null.
std::vector<StateCopyJob> state_copy_jobs(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src,
                                     const GdnDims& dims);
// The ranges of state_zero(dst) (src null). Throws std::invalid_argument for a null pointer.
std::vector<StateCopyJob> state_zero_jobs(std::span<const GdnStateRef> dst, const GdnDims& dims);

// Enqueues `jobs` on the stream: one launch (elementwise_state.cu).
struct CudaContext;
void run_state_copy_jobs(CudaContext& ctx, const std::vector<StateCopyJob>& jobs, const char* op);

}  // namespace fp4serve::kernels::cuda
