// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/attention_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void kv_write(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) {
  throw CudaError("kv_write", "not implemented yet", cudaErrorNotSupported);
}

void attention(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
               const TensorView& out, AttentionMath math) {
  throw CudaError("attention", "not implemented yet", cudaErrorNotSupported);
}

void dense_attention(CudaContext& ctx, std::span<const DenseSegment> segments, const TensorView& q,
                     const TensorView& k, const TensorView& v, const TensorView& out, AttentionMath math) {
  throw CudaError("dense_attention", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
