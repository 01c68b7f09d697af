// Placeholder until the kernels land: every entry point reports that it is not implemented.
#include "kernels/cuda/sampling_cuda.h"

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

void sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
            std::span<SampleResult> out) {
  throw CudaError("sample", "not implemented yet", cudaErrorNotSupported);
}

}  // namespace fp4serve::kernels::cuda
