#include "model/vision_positions.h"

#include <algorithm>
#include <cmath>

#include "kernels/bf16.h"

namespace fp4serve::model {

std::vector<int32_t> vision_patch_positions(const vision::ImageGrid& g, int m) {
  std::vector<int32_t> pos;
  pos.reserve(static_cast<size_t>(2 * g.num_patches()));
  for (int t = 0; t < g.t; ++t)
    for (int bh = 0; bh < g.h / m; ++bh)
      for (int bw = 0; bw < g.w / m; ++bw)
        for (int ih = 0; ih < m; ++ih)
          for (int iw = 0; iw < m; ++iw) {
            pos.push_back(bh * m + ih);
            pos.push_back(bw * m + iw);
          }
  return pos;
}

void append_vision_rotary(const vision::ImageGrid& g, int merge, int head_dim, float theta, std::vector<float>& cos,
                          std::vector<float>& sin) {
  const int dim = head_dim / 2, nf = dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(nf));
  for (int i = 0; i < nf; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta, e);
  }
  const auto pos = vision_patch_positions(g, merge);
  std::vector<float> f(static_cast<size_t>(dim));
  for (size_t p = 0; p < pos.size() / 2; ++p) {
    for (int i = 0; i < nf; ++i) {
      f[static_cast<size_t>(i)] = static_cast<float>(pos[2 * p]) * inv_freq[static_cast<size_t>(i)];
      f[static_cast<size_t>(nf + i)] = static_cast<float>(pos[2 * p + 1]) * inv_freq[static_cast<size_t>(i)];
    }
    for (int rep = 0; rep < 2; ++rep)
      for (int i = 0; i < dim; ++i) {
        cos.push_back(std::cos(f[static_cast<size_t>(i)]));
        sin.push_back(std::sin(f[static_cast<size_t>(i)]));
      }
  }
}

float torch_linspace_f32(float start, float end, int64_t steps, int64_t i) {
  if (steps == 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  return i < halfway ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
}

void append_vision_pos_embed(const vision::ImageGrid& g, int merge, const uint16_t* table, int64_t side,
                             int64_t hidden, std::vector<uint16_t>& out) {
  struct Axis {
    int64_t lo, hi;
    float frac;
  };
  auto axis = [&](int n) {
    std::vector<Axis> a(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const float y = torch_linspace_f32(0.0f, static_cast<float>(side - 1), n, i);
      const int64_t lo = static_cast<int64_t>(y);  // .int(): truncation
      a[static_cast<size_t>(i)] = {lo, std::min<int64_t>(lo + 1, side - 1), y - static_cast<float>(lo)};
    }
    return a;
  };
  const auto rows = axis(g.h), cols = axis(g.w);
  const auto pos = vision_patch_positions(g, merge);
  const size_t base = out.size();
  out.resize(base + pos.size() / 2 * static_cast<size_t>(hidden));
  for (size_t p = 0; p < pos.size() / 2; ++p) {
    const Axis& r = rows[static_cast<size_t>(pos[2 * p])];
    const Axis& c = cols[static_cast<size_t>(pos[2 * p + 1])];
    const int64_t idx[4] = {r.lo * side + c.lo, r.lo * side + c.hi, r.hi * side + c.lo, r.hi * side + c.hi};
    const float wt[4] = {(1.0f - r.frac) * (1.0f - c.frac), (1.0f - r.frac) * c.frac, r.frac * (1.0f - c.frac),
                         r.frac * c.frac};
    uint16_t* o = out.data() + base + p * static_cast<size_t>(hidden);
    for (int64_t d = 0; d < hidden; ++d) {
      float s = kernels::bf16_bits_to_f32(table[idx[0] * hidden + d]) * wt[0];
      for (int k = 1; k < 4; ++k) s = s + kernels::bf16_bits_to_f32(table[idx[k] * hidden + d]) * wt[k];
      o[d] = kernels::f32_to_bf16_bits(s);
    }
  }
}

}  // namespace fp4serve::model
