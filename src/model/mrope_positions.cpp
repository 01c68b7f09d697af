#include "model/mrope_positions.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fp4serve::model {

void place_mrope_images(std::span<MropeImage> images) {
  int64_t delta = 0, prev_end = 0;
  for (MropeImage& im : images) {
    if (im.frames <= 0 || im.rows <= 0 || im.cols <= 0)
      throw std::invalid_argument("M-RoPE image with an empty grid at token " + std::to_string(im.offset));
    if (im.offset < prev_end)
      throw std::invalid_argument("M-RoPE images out of order or overlapping at token " + std::to_string(im.offset));
    im.start = im.offset + delta;
    // The text after the image resumes at start + max(rows, cols), not at start + its token count.
    delta = im.start + std::max(im.rows, im.cols) - im.end();
    im.delta_after = delta;
    prev_end = im.end();
  }
}

void mrope_positions(std::span<const MropeImage> images, int64_t first, int64_t count, int64_t* t, int64_t* h,
                     int64_t* w) {
  // The first image that ends after `first`; images before it only set the delta.
  auto it = std::upper_bound(images.begin(), images.end(), first,
                             [](int64_t j, const MropeImage& im) { return j < im.end(); });
  int64_t delta = it == images.begin() ? 0 : std::prev(it)->delta_after;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = first + i;
    if (it != images.end() && j >= it->end()) {
      delta = it->delta_after;
      ++it;
    }
    if (it != images.end() && j >= it->offset) {
      const int64_t k = j - it->offset, plane = it->rows * it->cols;
      t[i] = it->start + k / plane;
      h[i] = it->start + (k % plane) / it->cols;
      w[i] = it->start + k % it->cols;
    } else {
      t[i] = h[i] = w[i] = j + delta;
    }
  }
}

}  // namespace fp4serve::model
