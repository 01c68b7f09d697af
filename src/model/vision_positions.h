// The per-patch position inputs of the vision tower, computed on the host for one image in HF's patch
// order (each 2x2 merge block contiguous, blocks in raster order, repeated per temporal slice)
// [transformers: vision_utils.py get_vision_position_ids, get_vision_bilinear_indices_and_weights]:
//
//   rotary    dim = head_dim / 2, inv_freq[i] = 1 / theta^(2i / dim) (fp32), i < dim / 2;
//             f = concat(row * inv_freq, col * inv_freq) (dim values); cos/sin of concat(f, f) in fp32.
//   pos embed the side x side table bilinearly interpolated to the h x w grid (align_corners):
//             y = linspace(0, side - 1, h) (fp32, torch's two-sided formula), y0 = int(y),
//             y1 = min(y0 + 1, side - 1), fy = y - y0 (same for x); the 4 corner rows weighted by
//             (1-fy)(1-fx), (1-fy)fx, fy(1-fx), fy fx (fp32), summed in that order in fp32, then bf16.
#pragma once

#include <cstdint>
#include <vector>

#include "vision/pixel_patches.h"

namespace fp4serve::model {

// (row, col) of each patch, in HF's order: 2 * grid.num_patches() values.
std::vector<int32_t> vision_patch_positions(const vision::ImageGrid& grid, int merge);

// Appends grid.num_patches() rows of head_dim cos and sin values.
void append_vision_rotary(const vision::ImageGrid& grid, int merge, int head_dim, float theta, std::vector<float>& cos,
                          std::vector<float>& sin);

// torch.linspace(start, end, steps) in fp32, element i (scalar kernel).
float torch_linspace_f32(float start, float end, int64_t steps, int64_t i);

// Appends grid.num_patches() rows of `hidden` bf16 values: the interpolated position embedding.
// table: [side * side, hidden] bf16.
void append_vision_pos_embed(const vision::ImageGrid& grid, int merge, const uint16_t* table, int64_t side,
                             int64_t hidden, std::vector<uint16_t>& out);

}  // namespace fp4serve::model
