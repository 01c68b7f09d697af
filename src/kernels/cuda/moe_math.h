// The MoE block's element math as __host__ __device__ functions: the kernels call them on the GPU,
// and tests/unit/kernels/cuda_moe_route_test.cpp calls the very same functions on the CPU against
// the CPU backend (kernels/cpu/moe_cpu.cpp), bit for bit. Compiles with g++ (no CUDA headers needed)
// and with nvcc.
//
// exp: glibc_expf.h's exp_f32, glibc's expf operation for operation (a one-ulp difference in a
// probability would move the softmax sum and could flip a tie-close expert choice).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/glibc_expf.h"

#if defined(__CUDACC__)
#define FP4_MOE_HD __host__ __device__ __forceinline__
#else
#define FP4_MOE_HD inline
#endif

namespace fp4serve::kernels::cuda::moe {

using bits::bf16_bits;
using bits::bf16_value;
using bits::bits_f32;
using bits::f32_bits;
using bits::round_bf16;
using glibc::exp_f32;

// kernels/activation.h's formulas (torch's): x / (1 + exp(-x)) and 1 / (1 + exp(-x)).
FP4_MOE_HD float silu(float x) { return x / (1.0f + exp_f32(-x)); }
FP4_MOE_HD float sigmoid(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// The SwiGLU of an expert (moe_cpu.cpp's swiglu_bf16): h = bf16(bf16(silu(bf16(g))) * bf16(u)),
// g and u the f32 outputs of the gate and up linears.
FP4_MOE_HD float swiglu(float g, float u) { return round_bf16(round_bf16(silu(round_bf16(g))) * round_bf16(u)); }

// One routed term added to a token's running sum (HF eager: acc = bf16(acc + bf16(bf16(d) * w)),
// w already a bf16 value).
FP4_MOE_HD float add_routed(float acc, float d, float w) { return round_bf16(acc + round_bf16(round_bf16(d) * w)); }

// The shared expert's gate from its f32 linear output: bf16(sigmoid(bf16(s))).
FP4_MOE_HD float shared_gate(float s) { return round_bf16(sigmoid(round_bf16(s))); }

// The gated shared expert added to the routed sum: bf16(acc + bf16(gate * bf16(sd))).
FP4_MOE_HD float add_shared(float acc, float gate, float sd) { return round_bf16(acc + round_bf16(gate * round_bf16(sd))); }

}  // namespace fp4serve::kernels::cuda::moe
