#include "engine/ipc/request_codec.h"

#include <cstring>

namespace fp4serve::engine::ipc {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
std::optional<T> get_opt(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  return v.get<T>();
}

json encode_structured(const StructuredOutputsParams& s) {
  return json{{"kind", static_cast<int>(s.kind)},
              {"spec", s.spec},
              {"choice", s.choice},
              {"disable_any_whitespace", s.disable_any_whitespace},
              {"disable_additional_properties", s.disable_additional_properties},
              {"whitespace_pattern", opt(s.whitespace_pattern)}};
}

StructuredOutputsParams decode_structured(const json& j) {
  StructuredOutputsParams s;
  s.kind = static_cast<StructuredOutputsParams::Kind>(j.at("kind").get<int>());
  s.spec = j.at("spec").get<std::string>();
  s.choice = j.at("choice").get<std::vector<std::string>>();
  s.disable_any_whitespace = j.at("disable_any_whitespace").get<bool>();
  s.disable_additional_properties = j.at("disable_additional_properties").get<bool>();
  s.whitespace_pattern = get_opt<std::string>(j, "whitespace_pattern");
  return s;
}

// Pixel values as raw bytes (a float is 4 bytes on every host that runs both processes).
json encode_image(const ImageInput& im) {
  json j{{"offset", im.offset}, {"num_tokens", im.num_tokens}, {"hash", {im.content_hash[0], im.content_hash[1]}}};
  if (im.pixels) {
    const vision::PixelPatches& p = *im.pixels;
    std::vector<std::uint8_t> bytes(p.values.size() * sizeof(float));
    if (!bytes.empty()) std::memcpy(bytes.data(), p.values.data(), bytes.size());
    j["pixels"] = json{{"t", p.grid.t}, {"h", p.grid.h}, {"w", p.grid.w}, {"patch_dim", p.patch_dim},
                       {"values", json::binary(std::move(bytes))}};
  } else {
    j["pixels"] = nullptr;
  }
  return j;
}

ImageInput decode_image(const json& j) {
  ImageInput im;
  im.offset = j.at("offset").get<int>();
  im.num_tokens = j.at("num_tokens").get<int>();
  im.content_hash = {j.at("hash").at(0).get<std::uint64_t>(), j.at("hash").at(1).get<std::uint64_t>()};
  const json& p = j.at("pixels");
  if (!p.is_null()) {
    auto px = std::make_shared<vision::PixelPatches>();
    px->grid.t = p.at("t").get<int>();
    px->grid.h = p.at("h").get<int>();
    px->grid.w = p.at("w").get<int>();
    px->patch_dim = p.at("patch_dim").get<int>();
    const auto& bytes = p.at("values").get_binary();
    if (bytes.size() % sizeof(float) != 0) throw std::runtime_error("pixel values: not a whole number of floats");
    px->values.resize(bytes.size() / sizeof(float));
    if (!bytes.empty()) std::memcpy(px->values.data(), bytes.data(), bytes.size());
    im.pixels = std::move(px);
  }
  return im;
}

}  // namespace

json encode_sampling_params(const SamplingParams& p) {
  json bias = json::array();
  for (const auto& [id, b] : p.logit_bias) bias.push_back({id, b});
  return json{{"n", p.n},
              {"presence_penalty", p.presence_penalty},
              {"frequency_penalty", p.frequency_penalty},
              {"repetition_penalty", p.repetition_penalty},
              {"temperature", p.temperature},
              {"top_p", p.top_p},
              {"top_k", p.top_k},
              {"min_p", p.min_p},
              {"seed", opt(p.seed)},
              {"stop", p.stop},
              {"stop_token_ids", p.stop_token_ids},
              {"include_stop_str_in_output", p.include_stop_str_in_output},
              {"ignore_eos", p.ignore_eos},
              {"max_tokens", opt(p.max_tokens)},
              {"min_tokens", p.min_tokens},
              {"logprobs", opt(p.logprobs)},
              {"prompt_logprobs", opt(p.prompt_logprobs)},
              {"logit_bias", std::move(bias)},
              {"bad_words", p.bad_words},
              {"bad_words_token_ids", p.bad_words_token_ids},
              {"allowed_token_ids", opt(p.allowed_token_ids)},
              {"logprob_token_ids", opt(p.logprob_token_ids)},
              {"thinking_token_budget", opt(p.thinking_token_budget)},
              {"reasoning_start_ids", p.reasoning_start_ids},
              {"reasoning_end_ids", p.reasoning_end_ids},
              {"structured_outputs", p.structured_outputs ? encode_structured(*p.structured_outputs) : json(nullptr)}};
}

SamplingParams decode_sampling_params(const json& j) {
  SamplingParams p;
  p.n = j.at("n").get<int64_t>();
  p.presence_penalty = j.at("presence_penalty").get<double>();
  p.frequency_penalty = j.at("frequency_penalty").get<double>();
  p.repetition_penalty = j.at("repetition_penalty").get<double>();
  p.temperature = j.at("temperature").get<double>();
  p.top_p = j.at("top_p").get<double>();
  p.top_k = j.at("top_k").get<int64_t>();
  p.min_p = j.at("min_p").get<double>();
  p.seed = get_opt<int64_t>(j, "seed");
  p.stop = j.at("stop").get<std::vector<std::string>>();
  p.stop_token_ids = j.at("stop_token_ids").get<std::vector<int64_t>>();
  p.include_stop_str_in_output = j.at("include_stop_str_in_output").get<bool>();
  p.ignore_eos = j.at("ignore_eos").get<bool>();
  p.max_tokens = get_opt<int64_t>(j, "max_tokens");
  p.min_tokens = j.at("min_tokens").get<int64_t>();
  p.logprobs = get_opt<int64_t>(j, "logprobs");
  p.prompt_logprobs = get_opt<int64_t>(j, "prompt_logprobs");
  for (const json& e : j.at("logit_bias")) p.logit_bias[e.at(0).get<int64_t>()] = e.at(1).get<double>();
  p.bad_words = j.at("bad_words").get<std::vector<std::string>>();
  p.bad_words_token_ids = j.at("bad_words_token_ids").get<std::vector<std::vector<int32_t>>>();
  p.allowed_token_ids = get_opt<std::vector<int64_t>>(j, "allowed_token_ids");
  p.logprob_token_ids = get_opt<std::vector<int64_t>>(j, "logprob_token_ids");
  p.thinking_token_budget = get_opt<int64_t>(j, "thinking_token_budget");
  p.reasoning_start_ids = j.at("reasoning_start_ids").get<std::vector<int32_t>>();
  p.reasoning_end_ids = j.at("reasoning_end_ids").get<std::vector<int32_t>>();
  if (!j.at("structured_outputs").is_null()) p.structured_outputs = decode_structured(j.at("structured_outputs"));
  return p;
}

json encode_engine_request(const EngineRequest& r) {
  json images = json::array();
  for (const ImageInput& im : r.images) images.push_back(encode_image(im));
  json resumed = json::array();
  for (const ResumedSequence& s : r.resumed)
    resumed.push_back({{"index", s.index}, {"tokens", s.token_ids}, {"text_bytes", s.text_bytes}, {"finished", s.finished}});
  // steady_clock is CLOCK_MONOTONIC: one clock for every process on the host.
  const auto arrival_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(r.arrival_time.time_since_epoch()).count();
  return json{{"id", r.id},
              {"prompt", r.prompt_token_ids},
              {"images", std::move(images)},
              {"params", encode_sampling_params(r.params)},
              {"cache_salt_hash", r.cache_salt_hash},
              {"skip_special_tokens", r.detokenize.skip_special_tokens},
              {"spaces_between_special_tokens", r.detokenize.spaces_between_special_tokens},
              {"arrival_ns", arrival_ns},
              {"resumed", std::move(resumed)}};
}

EngineRequest decode_engine_request(const json& j) {
  EngineRequest r;
  r.id = j.at("id").get<std::string>();
  r.prompt_token_ids = j.at("prompt").get<std::vector<std::int32_t>>();
  for (const json& im : j.at("images")) r.images.push_back(decode_image(im));
  r.params = decode_sampling_params(j.at("params"));
  r.cache_salt_hash = j.at("cache_salt_hash").get<std::uint64_t>();
  r.detokenize.skip_special_tokens = j.at("skip_special_tokens").get<bool>();
  r.detokenize.spaces_between_special_tokens = j.at("spaces_between_special_tokens").get<bool>();
  r.arrival_time = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds(j.at("arrival_ns").get<std::int64_t>())));
  for (const json& s : j.at("resumed")) {
    ResumedSequence rs;
    rs.index = s.at("index").get<int>();
    rs.token_ids = s.at("tokens").get<std::vector<std::int32_t>>();
    rs.text_bytes = s.at("text_bytes").get<std::size_t>();
    rs.finished = s.at("finished").get<bool>();
    r.resumed.push_back(std::move(rs));
  }
  return r;
}

}  // namespace fp4serve::engine::ipc
