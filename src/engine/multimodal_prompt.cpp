#include "engine/multimodal_prompt.h"

#include <stdexcept>

#include <fmt/format.h>
#include <xxhash.h>

namespace fp4serve::engine {

void MultimodalPrompt::append_block_keys(int begin, int end, std::vector<std::uint64_t>& keys) const {
  for (const ImageInput& im : images) {
    if (im.offset >= end) break;
    if (im.offset + im.num_tokens <= begin) continue;
    keys.push_back(im.content_hash[0]);
    keys.push_back(im.content_hash[1]);
  }
}

std::shared_ptr<const MultimodalPrompt> make_multimodal_prompt(const MultimodalInputs& images,
                                                               std::span<const std::int32_t> prompt,
                                                               const ImageRules& rules) {
  if (images.empty()) return nullptr;
  if (rules.image_token_id < 0) throw std::invalid_argument("the model has no image token");
  const int merge = rules.spatial_merge_size;
  auto mm = std::make_shared<MultimodalPrompt>();
  mm->images = images;
  const auto L = static_cast<std::int64_t>(prompt.size());
  std::int64_t prev_end = 0;
  std::uint64_t key = XXH64(nullptr, 0, 0x9E3779B97F4A7C15ull);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const ImageInput& im = images[i];
    if (!im.pixels) throw std::invalid_argument(fmt::format("image {} has no pixels", i));
    const vision::ImageGrid& g = im.pixels->grid;
    if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % merge != 0 || g.w % merge != 0)
      throw std::invalid_argument(
          fmt::format("image {}: grid {}x{}x{} is not a whole number of {}x{} merge blocks", i, g.t, g.h, g.w, merge, merge));
    const std::int64_t n = g.num_llm_tokens(merge);
    if (im.num_tokens != n)
      throw std::invalid_argument(
          fmt::format("image {}: {} <|image_pad|> tokens for a grid that makes {} rows", i, im.num_tokens, n));
    if (im.pixels->patch_dim <= 0 ||
        im.pixels->values.size() != static_cast<std::size_t>(g.num_patches()) * static_cast<std::size_t>(im.pixels->patch_dim))
      throw std::invalid_argument(fmt::format("image {}: pixel values do not fill its {} patches", i, g.num_patches()));
    if (im.offset < prev_end || im.offset + n > L)
      throw std::invalid_argument(fmt::format("image {}: tokens {} .. {} are out of order or outside the prompt of {}",
                                              i, im.offset, im.offset + n - 1, L));
    for (std::int64_t j = im.offset; j < im.offset + n; ++j) {
      if (prompt[static_cast<std::size_t>(j)] != rules.image_token_id)
        throw std::invalid_argument(fmt::format("image {}: prompt token {} is {}, not the image token {}", i, j,
                                                prompt[static_cast<std::size_t>(j)], rules.image_token_id));
    }
    prev_end = im.offset + n;
    model::MropeImage m;
    m.offset = im.offset;
    m.frames = g.t;
    m.rows = g.h / merge;
    m.cols = g.w / merge;
    mm->mrope.push_back(m);
    const std::uint64_t parts[3] = {im.content_hash[0], im.content_hash[1], static_cast<std::uint64_t>(im.offset)};
    key = XXH64(parts, sizeof(parts), key);
  }
  model::place_mrope_images(mm->mrope);
  mm->content_key = key;
  return mm;
}

}  // namespace fp4serve::engine
