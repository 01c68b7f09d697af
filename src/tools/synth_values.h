// The random values of a synthetic checkpoint and how each tensor's bytes are derived from them.
//
// Every tensor's bytes come from one or more "sources": logical fp32 matrices [rows, cols] whose row
// r is drawn by its own generator, seeded from (--seed, source name, r). A linear module's source is
// its HF module path, so the same --seed gives the same weights in every format: the BF16 fused
// experts.gate_up_proj holds exactly the values that the FP8 / NVFP4 / INT4 checkpoints quantize for
// experts.{e}.gate_proj and up_proj. Values that stand for bf16 weights are rounded to bf16 first,
// as the real quantized releases were made from the bf16 model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4serve::synth {

struct Distribution {
  enum class Kind : uint8_t { kNormal, kLogUniform };
  Kind kind = Kind::kNormal;
  float mean = 0.0f;  // kNormal: mean + stddev * N(0, 1)
  float stddev = 0.02f;
  float lo = 1.0f;    // kLogUniform: log(uniform(lo, hi))
  float hi = 16.0f;
  bool bf16_grid = true;  // round every value to the nearest bf16

  static Distribution normal(float mean, float stddev, bool bf16_grid = true) {
    Distribution d;
    d.mean = mean;
    d.stddev = stddev;
    d.bf16_grid = bf16_grid;
    return d;
  }
  static Distribution log_uniform(float lo, float hi) {
    Distribution d;
    d.kind = Kind::kLogUniform;
    d.lo = lo;
    d.hi = hi;
    d.bf16_grid = false;
    return d;
  }
};

struct Source {
  std::string name;     // what the values are keyed by (module path or tensor name)
  uint64_t seed = 0;    // name_seed(--seed, name)
  int64_t rows = 0;
  int64_t cols = 0;
  Distribution dist;
};

Source make_source(uint64_t user_seed, std::string name, int64_t rows, int64_t cols, Distribution dist);

// Row r of the source: cols values. Deterministic, independent of any other row.
void generate_row(const Source& s, int64_t r, float* out);
// All rows [r0, r1) into out[(r - r0) * cols + c], in parallel (OpenMP).
void generate_rows(const Source& s, int64_t r0, int64_t r1, float* out);
// The largest |value| of the whole source (parallel over rows; the same for any thread count).
float source_abs_max(const Source& s);

// The value distribution of the unquantized small tensors, by tensor name (docs/model-arch.md §2.1,
// §2.2): the (1+w) RMSNorm weights are stored near 0, the gated GDN norm's near 1, A_log is
// log(uniform(1, 16)) in fp32, dt_bias small, the depthwise conv N(0, 0.2); everything else
// (linears, embeddings, router) N(0, 0.02).
Distribution distribution_for_tensor(const std::string& tensor_name);

}  // namespace fp4serve::synth
