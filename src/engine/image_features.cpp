#include "engine/image_features.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace fp4serve::engine {

std::span<const model::EmbeddingRows> ImageFeatures::rows_for(const MultimodalPrompt& mm,
                                                              const model::VisionEncoder& encoder, int start, int n) {
  rows_.clear();
  if (features_.size() < mm.images.size()) features_.resize(mm.images.size());
  const int end = start + n;
  const auto H = static_cast<std::size_t>(encoder.out_hidden());
  for (std::size_t i = 0; i < mm.images.size(); ++i) {
    const ImageInput& im = mm.images[i];
    const int b = std::max(start, im.offset), e = std::min(end, im.offset + im.num_tokens);
    if (im.offset >= end) break;
    if (b >= e) continue;
    std::vector<float>& f = features_[i];
    if (f.empty()) {
      f = encoder.encode(*im.pixels);
      ++num_encoded_;
      if (f.size() != static_cast<std::size_t>(im.num_tokens) * H)
        throw std::runtime_error(fmt::format("the vision encoder returned {} values for an image of {} rows of {}",
                                             f.size(), im.num_tokens, H));
    }
    rows_.push_back(model::EmbeddingRows{b - start, e - b, f.data() + static_cast<std::size_t>(b - im.offset) * H});
  }
  return rows_;
}

void ImageFeatures::release_before(const MultimodalPrompt& mm, int computed) {
  for (std::size_t i = 0; i < features_.size() && i < mm.images.size(); ++i) {
    if (mm.images[i].offset + mm.images[i].num_tokens <= computed && !features_[i].empty())
      std::vector<float>().swap(features_[i]);
  }
}

std::size_t ImageFeatures::bytes_held() const {
  std::size_t n = 0;
  for (const auto& f : features_) n += f.size() * sizeof(float);
  return n;
}

}  // namespace fp4serve::engine
