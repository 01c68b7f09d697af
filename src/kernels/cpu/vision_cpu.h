// The CPU twins of the vision tower's ops (kernels/vision.h has the numerics). Scalar fp32 code in a
// fixed order per element or row, split over rows, so results do not depend on threads or on how
// many images share a call; the attention's dots and P.V sums are the kernel table's canonical ones.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/vision.h"

namespace fp4serve::kernels {

// x, out [rows, D] bf16 (may alias; row strides ldx, ldo); w, b [D] f32 holding bf16 values.
void layernorm_rows(const uint16_t* x, int64_t ldx, int64_t rows, int64_t D, const float* w, const float* b, float eps,
                    uint16_t* out, int64_t ldo);

// x [rows, N] f32 (row stride ldx), bias [N] f32 (nullptr: none), out [rows, N] bf16 (row stride ldo).
void bias_activation_rows(const float* x, int64_t ldx, int64_t rows, int64_t N, const float* bias, Activation act,
                          uint16_t* out, int64_t ldo);

// In place on x [T, H, D] bf16 (row stride ldx elements between tokens, heads contiguous);
// cos, sin [T, D] f32.
void rope_table_rows(uint16_t* x, int64_t ldx, int64_t T, int64_t H, int64_t D, const float* cos, const float* sin);

// q, k, v [T, H, D] bf16 with token strides ldq/ldk/ldv (heads contiguous within a token); out [T, H*D]
// bf16 (token stride ldo). Every segment's rows attend to all rows of the segment.
void dense_attention(std::span<const DenseSegment> segments, const uint16_t* q, int64_t ldq, const uint16_t* k,
                     int64_t ldk, const uint16_t* v, int64_t ldv, int64_t T, int64_t H, int64_t D, uint16_t* out,
                     int64_t ldo, AttentionMath math, cpu::Isa isa = cpu::active_isa());

}  // namespace fp4serve::kernels
