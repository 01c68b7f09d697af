// The images of a chat request, from image_url parts to the engine's ImageInputs: the per-prompt
// limit (vLLM's validate_num_items), loading (vision::load_media_url), decoding and Qwen's
// preprocessing, then each <|image_pad|> of the tokenized prompt expanded to the image's
// grid.num_llm_tokens(merge) copies, as transformers' Qwen3VLProcessor expands the text, so the
// image tokens count in usage and in the max-model-len check. Every fault is an ApiException (400).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/multimodal_input.h"
#include "server/openai/chat_request.h"
#include "vision/image_decode.h"
#include "vision/image_processor.h"
#include "vision/media_source.h"
#include "vision/pixel_patches.h"

namespace fp4serve::server {

struct ImageServing {
  // The model has a vision tower (config.json's vision_config) and a preprocessor config; without
  // one every image is refused as vLLM refuses them for a text-only model.
  std::optional<vision::ImageProcessorConfig> processor;
  int image_limit = 999;  // --limit-mm-per-prompt image
  std::int32_t image_pad_id = -1;
  vision::MediaFetchOptions fetch;
  vision::DecodeLimits decode;
};

using PreparedImages = std::vector<std::shared_ptr<const vision::PixelPatches>>;

// Limit, load, decode, preprocess; in the parts' order.
PreparedImages prepare_chat_images(const std::vector<openai::ChatImagePart>& parts, const ImageServing& serving);

// Expands the prompt's <|image_pad|> tokens (one per image, in order) to each image's run.
void expand_image_pads(std::vector<std::int32_t>& ids, const PreparedImages& images, const ImageServing& serving);

// The engine's ImageInputs from the final prompt (after truncation): one run per image, in order.
engine::MultimodalInputs locate_image_runs(const std::vector<std::int32_t>& ids, const PreparedImages& images,
                                           const ImageServing& serving);

}  // namespace fp4serve::server
