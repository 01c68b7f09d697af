#include "checkpoint/generation_config.h"

#include <sstream>

#include "checkpoint/json_field.h"

namespace fp4serve {

GenerationConfig GenerationConfig::parse(std::string_view json_text, const std::string& file) {
  const CheckpointJson doc = parse_json_text(json_text, file);
  const JsonField root(doc, file, "");
  if (!root.is_object()) root.fail("expected a JSON object at the top level");

  GenerationConfig g;
  if (auto f = root.find("eos_token_id")) g.eos_token_ids = f->is_array() ? f->as_int_list() : std::vector{f->as_int()};
  if (auto f = root.find("bos_token_id")) g.bos_token_id = f->as_int();
  if (auto f = root.find("pad_token_id")) g.pad_token_id = f->as_int();
  if (auto f = root.find("do_sample")) g.do_sample = f->as_bool();
  if (auto f = root.find("temperature")) {
    g.temperature = f->as_double();
    if (*g.temperature < 0.0) f->fail("must not be negative");
  }
  if (auto f = root.find("top_k")) {
    g.top_k = f->as_int();
    if (*g.top_k < 0) f->fail("must not be negative");
  }
  if (auto f = root.find("top_p")) {
    g.top_p = f->as_double();
    if (!(*g.top_p > 0.0 && *g.top_p <= 1.0)) f->fail("must be in (0, 1]");
  }
  if (auto f = root.find("min_p")) {
    g.min_p = f->as_double();
    if (!(*g.min_p >= 0.0 && *g.min_p <= 1.0)) f->fail("must be in [0, 1]");
  }
  if (auto f = root.find("repetition_penalty")) {
    g.repetition_penalty = f->as_double();
    if (!(*g.repetition_penalty > 0.0)) f->fail("must be positive");
  }
  if (auto f = root.find("presence_penalty")) g.presence_penalty = f->as_double();
  if (auto f = root.find("max_new_tokens")) {
    g.max_new_tokens = f->as_int();
    if (*g.max_new_tokens < 0) f->fail("must not be negative");
  }
  return g;
}

GenerationConfig GenerationConfig::load(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return parse(read_text_file(path), path.string());
}

std::string GenerationConfig::describe() const {
  std::ostringstream o;
  if (eos_token_ids.empty() && !do_sample && !temperature && !top_k && !top_p && !min_p && !repetition_penalty &&
      !presence_penalty && !max_new_tokens)
    return "generation defaults: none from the checkpoint\n";
  o << "generation defaults: eos [";
  for (size_t i = 0; i < eos_token_ids.size(); ++i) o << (i ? ", " : "") << eos_token_ids[i];
  o << "]";
  if (do_sample) o << ", do_sample " << (*do_sample ? "true" : "false");
  if (temperature) o << ", temperature " << *temperature;
  if (top_k) o << ", top_k " << *top_k;
  if (top_p) o << ", top_p " << *top_p;
  if (min_p) o << ", min_p " << *min_p;
  if (repetition_penalty) o << ", repetition_penalty " << *repetition_penalty;
  if (presence_penalty) o << ", presence_penalty " << *presence_penalty;
  if (max_new_tokens) o << ", max_new_tokens " << *max_new_tokens;
  o << "\n";
  return o.str();
}

}  // namespace fp4serve
