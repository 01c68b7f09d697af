#include "server/routes/chat_images.h"

#include <string>

#include "server/openai/openai_error.h"
#include "vision/content_hash.h"
#include "vision/image_error.h"

namespace fp4serve::server {
namespace {

using openai::ApiError;
using openai::ApiException;

[[noreturn]] void refuse(const std::string& message, const char* param = "image") {
  ApiError e;
  e.status = 400;
  e.type = "BadRequestError";
  e.message = message;
  e.param = param;
  throw ApiException(std::move(e));
}

std::int64_t run_length(const vision::PixelPatches& p, const ImageServing& s) {
  return p.grid.num_llm_tokens(s.processor->merge_size);
}

}  // namespace

PreparedImages prepare_chat_images(const std::vector<openai::ChatImagePart>& parts, const ImageServing& serving) {
  if (parts.empty()) return {};
  // [vllm: multimodal/processing BaseProcessingInfo.validate_num_items]. A model without a tower
  // supports 0 images; a limit set under what the model supports gets the hint to raise it.
  const int limit = serving.processor ? serving.image_limit : 0;
  if (static_cast<std::int64_t>(parts.size()) > limit) {
    std::string msg = "At most " + std::to_string(limit) + " image(s) may be provided in one prompt.";
    if (serving.processor) msg += " Set `--limit-mm-per-prompt` to increase this limit.";
    refuse(msg);
  }
  PreparedImages out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    try {
      const vision::MediaBytes bytes = vision::load_media_url(parts[i].url, serving.fetch);
      const vision::RgbImage rgb = vision::decode_image(bytes.data, serving.decode, bytes.mime);
      out.push_back(std::make_shared<const vision::PixelPatches>(vision::preprocess_image(rgb, *serving.processor)));
    } catch (const vision::ImageError& e) {
      refuse(std::string(e.what()) + (parts.size() > 1 ? " (image " + std::to_string(i + 1) + ")" : ""), "image_url");
    } catch (const std::bad_alloc&) {
      refuse("the image is too large to process", "image_url");
    }
  }
  return out;
}

void expand_image_pads(std::vector<std::int32_t>& ids, const PreparedImages& images, const ImageServing& serving) {
  if (images.empty()) return;
  std::size_t pads = 0;
  for (std::int32_t id : ids) pads += id == serving.image_pad_id;
  if (pads != images.size()) {
    refuse("the rendered prompt has " + std::to_string(pads) + " <|image_pad|> token(s) for " +
           std::to_string(images.size()) + " image(s); the chat template must place one per image part");
  }
  std::vector<std::int32_t> out;
  std::int64_t extra = 0;
  for (const auto& img : images) extra += run_length(*img, serving) - 1;
  out.reserve(ids.size() + static_cast<std::size_t>(extra));
  std::size_t next = 0;
  for (std::int32_t id : ids) {
    if (id != serving.image_pad_id) {
      out.push_back(id);
      continue;
    }
    out.insert(out.end(), static_cast<std::size_t>(run_length(*images[next++], serving)), id);
  }
  ids = std::move(out);
}

engine::MultimodalInputs locate_image_runs(const std::vector<std::int32_t>& ids, const PreparedImages& images,
                                           const ImageServing& serving) {
  engine::MultimodalInputs out;
  if (images.empty()) return out;
  std::size_t i = 0;
  for (const auto& img : images) {
    while (i < ids.size() && ids[i] != serving.image_pad_id) ++i;
    const std::size_t start = i;
    while (i < ids.size() && ids[i] == serving.image_pad_id) ++i;
    if (static_cast<std::int64_t>(i - start) != run_length(*img, serving)) {
      refuse("truncate_prompt_tokens cut into an image's tokens; keep whole images in the prompt",
             "truncate_prompt_tokens");
    }
    engine::ImageInput in;
    in.pixels = img;
    in.offset = static_cast<int>(start);
    in.num_tokens = static_cast<int>(i - start);
    in.content_hash = vision::content_hash(*img);
    out.push_back(std::move(in));
  }
  return out;
}

}  // namespace fp4serve::server
