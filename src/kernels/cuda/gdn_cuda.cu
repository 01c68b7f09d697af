// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/gdn_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void gdn_gating(CudaContext& ctx, const TensorView& a, const TensorView& b, const TensorView& A_log,
                const TensorView& dt_bias, const TensorView& g, const TensorView& beta) {
  throw CudaError("gdn_gating", "not implemented yet", cudaErrorNotSupported);
}

void gdn_sequence(CudaContext& ctx, const GdnDims& dims, const TensorView& conv_weight, const GdnSeqDesc& seq,
                  const TensorView& x, const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                  const TensorView& core_out) {
  throw CudaError("gdn_sequence", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
