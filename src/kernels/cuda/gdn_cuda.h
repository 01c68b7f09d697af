// Gated DeltaNet on CUDA (gdn.h, cpu/gdn_cpu.h): the gating, and per sequence the causal conv1d over
// its conv state followed by the delta rule with an fp32 recurrent state in place.
//
// One recurrent kernel serves prefill and decode (gdn_plan.h has the launches): sequential over the
// sequence's rows inside the kernel, a thread per column of S (Hv x dv threads), each column's
// sums over dk in the CPU's order. Its results are the CPU op's bits, so a prefill split anywhere
// (snapshots, chunked scheduling) or batched with other sequences gives the same bits, as on the CPU.
// The chunked (WY/UT) prefill form (gdn_chunked.cuh: chunks of 64 rows, fp32 state, intra-chunk work
// in parallel) is faster for long prompts but reassociates those sums: its results depend on where
// a prefill is split and differ from the CPU's beyond bits (an NMSE, ~1e-11 measured on the CPU
// emulation), so it is opt-in: FP4SERVE_GDN_CHUNKED=1 sends calls of >= 64 rows (dk <= 128) to it.
// With it on, the op harness's split/batch invariance check fails by design.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

// Throws std::invalid_argument for views or dimensions the kernels cannot take (gdn_plan.h).
void gdn_gating(CudaContext& ctx, const TensorView& a, const TensorView& b, const TensorView& A_log,
                const TensorView& dt_bias, const TensorView& g, const TensorView& beta);
void gdn_sequences(CudaContext& ctx, const GdnDims& dims, const TensorView& conv_weight,
                   std::span<const GdnSeqDesc> seqs, const TensorView& x, const TensorView& g, const TensorView& beta,
                   const TensorView& qkv_out, const TensorView& core_out);

}  // namespace fp4serve::kernels::cuda
