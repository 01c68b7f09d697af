// The `serve` flags for image input, with vLLM's names and JSON forms (vllm/engine/arg_utils.py,
// config/multimodal.py): --limit-mm-per-prompt '{"image": N}' (N = 0: images refused and the vision
// tower not needed), --allowed-local-media-path (file:// URLs only under it), --allowed-media-domains,
// and fp4serve's --vision-device cpu|same (where the vision tower runs; the seeds' "tower on the
// CPU, language model on the GPU" as one flag). The engine side (h-mrope) reads MediaSettings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/routes/chat_images.h"

namespace CLI {
class App;
}

namespace fp4serve {
class LoadedCheckpoint;
namespace tokenizer {
class Tokenizer;
}
}  // namespace fp4serve

namespace fp4serve::tools {

struct MediaFlags {
  std::string limit_mm_per_prompt;  // JSON object text; "" = vLLM's default
  std::string vision_device = "same";
  std::string allowed_local_media_path;
  std::vector<std::string> allowed_media_domains;
};
void add_media_flags(CLI::App& cmd, MediaFlags& flags);

enum class VisionDevice { kSame, kCpu };

struct MediaSettings {
  // Images per prompt; vLLM's default when --limit-mm-per-prompt leaves it unset is 999.
  static constexpr int kDefaultLimit = 999;
  int image_limit = kDefaultLimit;
  bool image_limit_set = false;  // given on the command line (vLLM's message then suggests no raise)
  VisionDevice vision_device = VisionDevice::kSame;
  std::string allowed_local_media_path;  // resolved directory, "" = file:// refused
  std::vector<std::string> allowed_media_domains;

  // --limit-mm-per-prompt '{"image": 0}': the tower need not be loaded.
  bool vision_tower_needed() const { return image_limit > 0; }
};

// Throws std::invalid_argument naming the flag (vLLM's messages where it has one).
MediaSettings resolve_media_flags(const MediaFlags& flags);

// What the chat route needs for images: the checkpoint's preprocessor_config.json (when config.json
// has a vision_config and the tokenizer an <|image_pad|>), the limits and sources, the fetch
// settings from the environment (VLLM_IMAGE_FETCH_TIMEOUT...). One log line per decision.
server::ImageServing make_image_serving(const MediaSettings& settings, const LoadedCheckpoint& checkpoint,
                                        const tokenizer::Tokenizer& tokenizer, std::vector<std::string>& log);

}  // namespace fp4serve::tools
