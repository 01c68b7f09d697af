// A request's images as the scheduler and the model runner keep them, shared by the request's
// sequences (n > 1 children, twins): the inputs (pixels, where each <|image_pad|> run sits, content
// hashes), their M-RoPE layout (model/mrope_positions.h) and what the prefix cache mixes into the
// hash of each block that holds image tokens (vLLM kv_cache_utils._gen_mm_extra_hash_keys: the
// content hash of every image overlapping the block), so the same image hits and another image with
// the same token ids does not. GDN snapshots are keyed by the same chained hashes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/multimodal_input.h"
#include "model/mrope_positions.h"

namespace fp4serve::engine {

struct MultimodalPrompt {
  MultimodalInputs images;                 // ascending, non-overlapping runs
  std::vector<model::MropeImage> mrope;    // placed, one per image
  std::uint64_t content_key = 0;           // every image's hash and place folded into one (prompt twins)

  // Appends the extra hash keys of the block holding tokens [begin, end): the two halves of the
  // content hash of each image with a token in it, in prompt order.
  void append_block_keys(int begin, int end, std::vector<std::uint64_t>& keys) const;
};

// What the engine needs to check a request's images against its prompt.
struct ImageRules {
  std::int64_t image_token_id = -1;  // <|image_pad|>
  int spatial_merge_size = 2;
};

// Checks the images against the prompt and the rules (each run in ascending order, inside the
// prompt, all <|image_pad|>, as long as the image's merged grid; pixels present and of the grid's
// size) and builds the shared form. Throws std::invalid_argument saying what is wrong.
std::shared_ptr<const MultimodalPrompt> make_multimodal_prompt(const MultimodalInputs& images,
                                                               std::span<const std::int32_t> prompt,
                                                               const ImageRules& rules);

}  // namespace fp4serve::engine
