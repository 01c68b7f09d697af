// The ops a ViT needs beyond the text model's (the vision tower of Qwen3.5/3.6, docs/model-arch.md §2.6),
// with the numerics of transformers running the tower in bf16 on the CPU
// [transformers: models/qwen3_5_moe/modeling_qwen3_5_moe.py, Qwen3_5MoeVision*]:
//
//   layernorm        nn.LayerNorm on bf16 rows, computed in fp32, one rounding:
//                    mean, var (population) of the row; r = 1 / sqrt(var + eps);
//                    out = bf16((x * r + (-r * mean)) * w + b)     (torch's CPU LayerNorm kernel's form)
//   bias_activation  an nn.Linear's bias and the activation after it, on the linear's fp32 sums:
//                    y = bf16(x + bias); out = act == kNone ? y : bf16(act(y))   (the activation in fp32)
//                    kGeluTanh: (0.5 * y) * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3)))  (gelu_pytorch_tanh)
//                    kGeluErf:  (y * 0.5) * (1 + erf(y * sqrt(1/2)))                     (nn.GELU())
//   rope_table       rotary with per-row cos/sin tables (the 2-D vision rotary: the tower fills the
//                    tables from each patch's (row, col)); fp32 math, one rounding:
//                    out[i] = bf16(x[i] * cos[i] + rot_half(x)[i] * sin[i]),
//                    rot_half(x) = concat(-x[D/2 : D], x[0 : D/2])
//   dense attention  non-causal attention of every row of a segment over all rows of the same segment
//                    (one segment per image: HF's cu_seqlens), q/k/v [T, H, D] bf16, the score and
//                    softmax numerics of attention.h's AttentionMath without the output gate.
#pragma once

#include <cstdint>

namespace fp4serve::kernels {

enum class Activation : uint8_t { kNone, kGeluTanh, kGeluErf };

// Rows [row0, row0 + rows) of a step's [T, ...] tensors that attend to each other (one image).
struct DenseSegment {
  int64_t row0 = 0;
  int64_t rows = 0;
};

}  // namespace fp4serve::kernels
