// GET /v1/models, POST /tokenize, POST /detokenize, GET /version (docs/vllm-surface.md §1.6)
// [vllm: entrypoints/openai/models/serving.py, engine/protocol.py ModelCard/ModelPermission,
// entrypoints/serve/tokenize/protocol.py].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/chat_request.h"
#include "server/openai/prompt_length.h"
#include "server/openai/response_common.h"

namespace fp4serve::server::openai {

struct ModelCardInfo {
  std::string id;                     // a --served-model-name
  std::string root;                   // the model path / HF id (bench uses it as tokenizer id)
  std::optional<std::string> parent;  // base model of a LoRA card
  int64_t max_model_len = 0;
  int64_t created = 0;
};

// {"object":"list","data":[ModelCard...]}, each with one model_permission entry.
Json models_list_json(const std::vector<ModelCardInfo>& cards);

// {"version": "..."}
Json version_json(const std::string& version);

// /tokenize has two forms: {"prompt"} (completion) or {"messages"} (chat).
struct TokenizeRequest {
  std::optional<std::string> model;
  bool chat = false;
  std::string prompt;                     // completion form
  Json messages = Json::array();          // chat form: as for /v1/chat/completions
  Json tools;                             // chat form: null or the dumped tools
  Json chat_template_kwargs = Json::object();
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = true;         // completion form true, chat form false
  bool return_token_strs = false;
  std::vector<std::string> ignored_fields;
};

TokenizeRequest parse_tokenize_request(const Json& body, const ServerLimits& limits,
                                       const ChatParseOptions& options = {});
TokenizeRequest parse_tokenize_request(std::string_view body_text, const ServerLimits& limits,
                                       const ChatParseOptions& options = {});
inline TokenizeRequest parse_tokenize_request(const std::string& body_text, const ServerLimits& limits,
                                              const ChatParseOptions& options = {}) {
  return parse_tokenize_request(std::string_view(body_text), limits, options);
}

// {"count","max_model_len","tokens","token_strs"}; throws the "You passed N input tokens" 400 when
// the prompt exceeds max_model_len (the tokenizer endpoints reserve no output tokens).
Json tokenize_response_json(const std::vector<int32_t>& ids, int64_t max_model_len,
                            const std::optional<std::vector<std::string>>& token_strs);

struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<int32_t> tokens;
  std::vector<std::string> ignored_fields;
};

DetokenizeRequest parse_detokenize_request(const Json& body, const ServerLimits& limits);
DetokenizeRequest parse_detokenize_request(std::string_view body_text, const ServerLimits& limits);
inline DetokenizeRequest parse_detokenize_request(const std::string& body_text, const ServerLimits& limits) {
  return parse_detokenize_request(std::string_view(body_text), limits);
}

Json detokenize_response_json(const std::string& text);

}  // namespace fp4serve::server::openai
