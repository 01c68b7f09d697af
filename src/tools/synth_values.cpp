#include "tools/synth_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/float_formats.h"
#include "tools/synth_quantize.h"
#include "tools/synth_random.h"

namespace fp4serve::synth {

Source make_source(uint64_t user_seed, std::string name, int64_t rows, int64_t cols, Distribution dist) {
  Source s;
  s.seed = name_seed(user_seed, name);
  s.name = std::move(name);
  s.rows = rows;
  s.cols = cols;
  s.dist = dist;
  return s;
}

namespace {

// Round to the nearest bf16 (ties to even) and back, on the bits: the values are finite.
inline float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

void generate_row(const Source& s, int64_t r, float* out) {
  auto rng = Xoshiro256Plus::for_row(s.seed, static_cast<uint64_t>(r));
  const Distribution& d = s.dist;
  if (d.kind == Distribution::Kind::kLogUniform) {
    for (int64_t c = 0; c < s.cols; ++c) {
      out[c] = static_cast<float>(std::log(d.lo + (d.hi - d.lo) * rng.uniform()));
    }
    return;
  }
  int64_t c = 0;
  for (; c + 1 < s.cols; c += 2) rng.normal_pair(out[c], out[c + 1]);
  if (c < s.cols) {
    float spare;
    rng.normal_pair(out[c], spare);
  }
  const float mean = d.mean, stddev = d.stddev;
  if (d.bf16_grid) {
    for (c = 0; c < s.cols; ++c) out[c] = bf16_round(mean + stddev * out[c]);
  } else {
    for (c = 0; c < s.cols; ++c) out[c] = mean + stddev * out[c];
  }
}

void generate_rows(const Source& s, int64_t r0, int64_t r1, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t r = r0; r < r1; ++r) generate_row(s, r, out + (r - r0) * s.cols);
}

float source_abs_max(const Source& s) {
  float amax = 0.0f;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(s.cols));
    float local = 0.0f;
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < s.rows; ++r) {
      generate_row(s, r, row.data());
      local = std::max(local, abs_max(row.data(), s.cols));
    }
#pragma omp critical
    amax = std::max(amax, local);
  }
  return amax;
}

Distribution distribution_for_tensor(const std::string& name) {
  auto ends = [&](const char* suffix) { return name.ends_with(suffix); };
  if (ends("linear_attn.A_log")) return Distribution::log_uniform(1.0f, 16.0f);
  if (ends("linear_attn.norm.weight")) return Distribution::normal(1.0f, 0.02f, /*bf16_grid=*/false);
  if (ends("linear_attn.dt_bias")) return Distribution::normal(0.0f, 0.1f);
  if (ends("conv1d.weight")) return Distribution::normal(0.0f, 0.2f);
  // The vision tower's LayerNorm weights (plain w, around 1).
  if (name.starts_with("model.visual.") && (ends("norm1.weight") || ends("norm2.weight") || ends("norm.weight")))
    return Distribution::normal(1.0f, 0.02f);
  return Distribution::normal(0.0f, 0.02f);
}

}  // namespace fp4serve::synth
