// Attention on CUDA (attention.h's numerics): KV write into the paged bf16 / fp8 cache, causal gated
// GQA attention (prefill flash-style, decode split over the keys with a fixed-order merge), and the
// vision tower's dense attention per segment.
#pragma once

#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void kv_write(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v);
void attention(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
               const TensorView& out, AttentionMath math);
void dense_attention(CudaContext& ctx, std::span<const DenseSegment> segments, const TensorView& q,
                     const TensorView& k, const TensorView& v, const TensorView& out, AttentionMath math);

// For tests: the device address of the last attention op's plan counts (attention_plan.h's
// PlanCounts: items per launch, split partials), valid until a later op reuses the scratch. A test
// reads it after synchronizing to see that a replayed decode took the split path.
const void* last_attention_plan_counts();

}  // namespace fp4serve::kernels::cuda
