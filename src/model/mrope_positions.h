// M-RoPE positions of a sequence that holds images (transformers Qwen3_5MoeModel.get_rope_index and
// get_vision_position_ids; vLLM MRotaryEmbedding.get_input_positions; docs/model-arch.md §2.3.1).
//   * A text token advances all three axes (t, h, w) together by one.
//   * An image whose run of tokens begins where the next position is p gets, for its token at frame f,
//     row r, column c of the merged grid, (p + f, p + r, p + c); the text after it starts at
//     p + max(rows, cols) (HF: current_pos += max(h, w) // spatial_merge_size, whatever the frames).
// So every text token sits at its index plus a delta that only changes after an image, and the last
// delta (HF's rope_deltas) places every later token: decode positions are cache length + delta on
// all three axes. A sequence without images has delta 0 everywhere: plain 1-D positions.
//
// HF groups consecutive image tokens (itertools.groupby over mm_token_type_ids), so two image runs
// with no token between them would take one grid there; the chat template always puts
// <|vision_start|>/<|vision_end|> around an image, and here each image keeps its own grid, as vLLM.
#pragma once

#include <cstdint>
#include <span>

namespace fp4serve::model {

struct MropeImage {
  int64_t offset = 0;  // index in the sequence of the image's first token
  int64_t frames = 1;  // merged grid (HF image_grid_thw divided by (1, merge, merge))
  int64_t rows = 0;
  int64_t cols = 0;
  // Filled by place_mrope_images:
  int64_t start = 0;        // position of the image's first token on every axis
  int64_t delta_after = 0;  // position minus index of the tokens after the image
  int64_t num_tokens() const { return frames * rows * cols; }
  int64_t end() const { return offset + num_tokens(); }
};

// Fills start and delta_after of each image, in sequence order. Throws std::invalid_argument when
// the images are not in ascending, non-overlapping order or a grid is empty.
void place_mrope_images(std::span<MropeImage> images);

// Positions of tokens first .. first + count - 1 of the sequence, one array per axis (count each).
// images: placed (place_mrope_images); tokens past the last image continue at index + its delta.
void mrope_positions(std::span<const MropeImage> images, int64_t first, int64_t count, int64_t* t, int64_t* h,
                     int64_t* w);

// HF rope_deltas: position minus index of every token after the last image (0 without images).
inline int64_t mrope_delta(std::span<const MropeImage> images) {
  return images.empty() ? 0 : images.back().delta_after;
}

}  // namespace fp4serve::model
