#include "tools/serve_media_flags.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

#include "checkpoint/weight_loader.h"
#include "tokenizer/tokenizer.h"
#include "vision/media_source.h"

namespace fp4serve::tools {

void add_media_flags(CLI::App& cmd, MediaFlags& f) {
  const std::string group = "Images (vLLM's multimodal flags)";
  cmd.add_option("--limit-mm-per-prompt", f.limit_mm_per_prompt,
                 "JSON: most items per prompt per modality, e.g. '{\"image\": 4}' ('{\"image\": 0}': no images, "
                 "the vision tower is not loaded); default 999")
      ->group(group);
  cmd.add_option("--vision-device", f.vision_device,
                 "where the vision tower runs: same (the language model's device, default) or cpu")
      ->check(CLI::IsMember({"same", "cpu"}))
      ->group(group);
  cmd.add_option("--allowed-local-media-path", f.allowed_local_media_path,
                 "directory whose files file:// image URLs may read (refused otherwise)")
      ->group(group);
  cmd.add_option("--allowed-media-domains", f.allowed_media_domains,
                 "hosts http(s) image URLs may come from (every redirect hop too); default any")
      ->group(group);
}

namespace {

// vLLM's limit entry: a count, or {"count": N, ...} (the other keys size profiling inputs).
int limit_count(const std::string& modality, const nlohmann::json& v) {
  const nlohmann::json* n = &v;
  if (v.is_object()) {
    if (!v.contains("count")) return MediaSettings::kDefaultLimit;
    n = &v["count"];
  }
  if (!n->is_number_integer() || n->get<long long>() < 0) {
    throw std::invalid_argument("--limit-mm-per-prompt: the limit for '" + modality +
                                "' must be a non-negative integer, got " + n->dump());
  }
  return static_cast<int>(std::min<long long>(n->get<long long>(), 1 << 30));
}

}  // namespace

MediaSettings resolve_media_flags(const MediaFlags& f) {
  MediaSettings s;
  if (!f.limit_mm_per_prompt.empty()) {
    const auto j = nlohmann::json::parse(f.limit_mm_per_prompt, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      throw std::invalid_argument("--limit-mm-per-prompt must be a JSON object, e.g. '{\"image\": 4}'; got '" +
                                  f.limit_mm_per_prompt + "'");
    }
    for (const auto& [modality, value] : j.items()) {
      if (modality != "image" && modality != "video" && modality != "audio" && modality != "vision_chunk") {
        throw std::invalid_argument("--limit-mm-per-prompt: unknown modality '" + modality +
                                    "' (image, video, audio)");
      }
      const int n = limit_count(modality, value);
      if (modality == "image") {
        s.image_limit = n;
        s.image_limit_set = true;
      }
    }
  }
  s.vision_device = f.vision_device == "cpu" ? VisionDevice::kCpu : VisionDevice::kSame;
  if (!f.allowed_local_media_path.empty()) {
    s.allowed_local_media_path = vision::resolve_allowed_local_media_path(f.allowed_local_media_path);
  }
  s.allowed_media_domains = f.allowed_media_domains;
  return s;
}

server::ImageServing make_image_serving(const MediaSettings& settings, const LoadedCheckpoint& checkpoint,
                                        const tokenizer::Tokenizer& tokenizer, std::vector<std::string>& log) {
  server::ImageServing s;
  s.image_limit = settings.image_limit;
  s.fetch.allowed_local_media_path = settings.allowed_local_media_path;
  s.fetch.allowed_media_domains = settings.allowed_media_domains;
  s.fetch.read_environment();
  s.image_pad_id = tokenizer.token_to_id("<|image_pad|>");
  if (!checkpoint.config().has_vision_config) {
    log.push_back("Images: the model has no vision_config; image parts are refused");
    return s;
  }
  if (s.image_pad_id < 0) {
    log.push_back("Images: the tokenizer has no <|image_pad|> token; image parts are refused");
    return s;
  }
  const auto path = checkpoint.directory() / "preprocessor_config.json";
  std::ifstream in(path);
  if (in) {
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw std::runtime_error(path.string() + " is not valid JSON");
    s.processor = vision::ImageProcessorConfig::from_json(j);
  } else {
    s.processor = vision::ImageProcessorConfig{};
    log.push_back("Images: no preprocessor_config.json beside the checkpoint; Qwen3.6's image processor settings");
  }
  log.push_back("Images: at most " + std::to_string(s.image_limit) + " per prompt, patch " +
                std::to_string(s.processor->patch_size) + ", merge " + std::to_string(s.processor->merge_size) +
                ", " + std::to_string(s.processor->min_pixels) + ".." + std::to_string(s.processor->max_pixels) +
                " pixels, fetch timeout " + std::to_string(static_cast<int>(s.fetch.fetch_timeout_s)) + " s");
  return s;
}

}  // namespace fp4serve::tools
