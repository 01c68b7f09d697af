// Element-wise activations with torch's CPU fp32 formulas, and the embedding lookup.
// These are shared by every ISA path (scalar code; they are a negligible part of the step), so
// they are identical everywhere by construction. For a bf16 tensor torch computes in fp32 and
// rounds once: round_bf16(silu(x)).
#pragma once

#include <cmath>
#include <cstdint>

namespace fp4serve::kernels {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }      // torch: x / (1 + exp(-x))
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }  // torch: 1 / (1 + exp(-x))
// torch.nn.functional.softplus(beta=1, threshold=20): x above the threshold is returned as is.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
// torch's CPU GELU kernels (ATen/native/cpu/Activation.cpp), in their operation order.
inline float gelu_tanh(float x) {  // approximate="tanh" (gelu_pytorch_tanh)
  const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
  const float inner = kBeta * (x + kKappa * (x * x * x));
  return 0.5f * x * (1.0f + std::tanh(inner));
}
inline float gelu_erf(float x) { return x * 0.5f * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2))); }  // exact

}  // namespace fp4serve::kernels
