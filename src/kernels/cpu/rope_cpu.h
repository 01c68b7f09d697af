// The CPU entry point of RoPE (kernels/rope.h has the configuration and the math).
#pragma once

#include <cstdint>
#include "kernels/rope.h"

namespace fp4serve::kernels {

// In place on x [T, heads, head_dim] bf16. pos_t/pos_h/pos_w: [T] positions per axis (text: the
// same array three times).
void apply_rope(uint16_t* x, int64_t T, int64_t heads, const RopeConfig& cfg, const int64_t* pos_t,
                const int64_t* pos_h, const int64_t* pos_w);
// Text-only convenience: one position per token for all axes.
inline void apply_rope_text(uint16_t* x, int64_t T, int64_t heads, const RopeConfig& cfg, const int64_t* pos) {
  apply_rope(x, T, heads, cfg, pos, pos, pos);
}

}  // namespace fp4serve::kernels
