#include "server/openai/small_endpoints.h"

#include <limits>

#include "server/openai/completion_request.h"
#include "server/openai/prompt_length.h"
#include "server/openai/response_common.h"

namespace fp4serve::server::openai {

Json models_list_json(const std::vector<ModelCardInfo>& cards) {
  Json data = Json::array();
  for (const auto& card : cards) {
    Json perm = Json::object();
    perm["id"] = "modelperm-" + random_uuid_hex();
    perm["object"] = "model_permission";
    perm["created"] = card.created;
    perm["allow_create_engine"] = false;
    perm["allow_sampling"] = true;
    perm["allow_logprobs"] = true;
    perm["allow_search_indices"] = false;
    perm["allow_view"] = true;
    perm["allow_fine_tuning"] = false;
    perm["organization"] = "*";
    perm["group"] = nullptr;
    perm["is_blocking"] = false;
    Json c = Json::object();
    c["id"] = card.id;
    c["object"] = "model";
    c["created"] = card.created;
    c["owned_by"] = "vllm";
    c["root"] = card.root;
    c["parent"] = card.parent ? Json(*card.parent) : Json();
    c["max_model_len"] = card.max_model_len;
    c["permission"] = Json::array({std::move(perm)});
    data.push_back(std::move(c));
  }
  Json out = Json::object();
  out["object"] = "list";
  out["data"] = std::move(data);
  return out;
}

Json version_json(const std::string& version) { return Json{{"version", version}}; }

namespace {

void check_model(const std::optional<std::string>& model, const ServerLimits& limits) {
  if (!model || model->empty()) return;
  for (const auto& name : limits.served_model_names) {
    if (name == *model) return;
  }
  throw ApiException(model_not_found(*model));
}

}  // namespace

TokenizeRequest parse_tokenize_request(std::string_view text, const ServerLimits& limits,
                                       const ChatParseOptions& options) {
  return parse_tokenize_request(parse_json_body(text, "TokenizeCompletionRequest"), limits, options);
}

TokenizeRequest parse_tokenize_request(const Json& body, const ServerLimits& limits,
                                       const ChatParseOptions& options) {
  if (!body.is_object()) parse_json_body(body.dump(), "TokenizeCompletionRequest");  // throws model_type
  TokenizeRequest req;
  BodyReader reader(body);
  req.model = reader.string_field("model");
  req.return_token_strs = reader.bool_field("return_token_strs").value_or(false);
  if (body.contains("messages")) {
    req.chat = true;
    auto field = [&](const char* key) { return body.contains(key) ? &body[key] : nullptr; };
    if (py_truthy(field("continue_final_message")) && py_truthy(field("add_generation_prompt"))) {
      // TokenizeChatRequest raises a plain ValueError here (no parameter).
      ValidationIssue issue{"value_error", {"body"},
                            "Value error, Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                            body, "{'error': ValueError('Cannot set both `continue_final_message` and `add_generation_prompt` to True.')}",
                            false, std::nullopt};
      throw ApiException(request_validation_error({issue}));
    }
    read_chat_messages(reader, body, options.content_format, req.messages);
    read_chat_tools(reader, req.tools);
    req.add_generation_prompt = reader.bool_field("add_generation_prompt", false).value_or(true);
    req.continue_final_message = reader.bool_field("continue_final_message", false).value_or(false);
    req.add_special_tokens = reader.bool_field("add_special_tokens", false).value_or(false);
    Json kwargs = options.default_chat_template_kwargs.is_object() ? options.default_chat_template_kwargs : Json::object();
    const std::optional<Json> user = reader.object_field("chat_template_kwargs");
    if (user) {
      for (const auto& [k, v] : user->items()) {
        if (!v.is_null() && v != "auto") kwargs[k] = v;
      }
    }
    req.chat_template = reader.string_field("chat_template");
    check_request_chat_template(body, user, limits);
    req.chat_template_kwargs = template_variables(std::move(kwargs));
    reader.object_field("mm_processor_kwargs");
  } else {
    if (!body.contains("prompt")) {
      // Neither union branch validates: pydantic reports both.
      reader.issues().push_back(missing_field_issue("prompt", body));
      reader.issues().push_back(missing_field_issue("messages", body));
    } else if (auto prompt = reader.string_field("prompt", false)) {
      req.prompt = *prompt;
    }
    req.add_special_tokens = reader.bool_field("add_special_tokens", false).value_or(true);
  }
  reader.throw_if_issues();
  req.ignored_fields = reader.unknown_fields();
  check_model(req.model, limits);
  return req;
}

Json tokenize_response_json(const std::vector<int32_t>& ids, int64_t max_model_len,
                            const std::optional<std::vector<std::string>>& token_strs) {
  std::vector<int32_t> copy = ids;
  apply_prompt_length_rules(copy, 0, max_model_len);
  Json out = Json::object();
  out["count"] = ids.size();
  out["max_model_len"] = max_model_len;
  Json tokens = Json::array();
  for (int32_t id : ids) tokens.push_back(id);
  out["tokens"] = std::move(tokens);
  out["token_strs"] = token_strs ? Json(*token_strs) : Json();
  return out;
}

DetokenizeRequest parse_detokenize_request(std::string_view text, const ServerLimits& limits) {
  return parse_detokenize_request(parse_json_body(text, "DetokenizeRequest"), limits);
}

DetokenizeRequest parse_detokenize_request(const Json& body, const ServerLimits& limits) {
  if (!body.is_object()) parse_json_body(body.dump(), "DetokenizeRequest");
  DetokenizeRequest req;
  BodyReader reader(body);
  req.model = reader.string_field("model");
  if (!body.contains("tokens")) {
    reader.issues().push_back(missing_field_issue("tokens", body));
  } else if (auto ids = reader.int_list_field("tokens", false)) {
    for (int64_t id : *ids) {
      if (id < 0 || id > std::numeric_limits<int32_t>::max() || id >= limits.sampling.vocab_size) {
        throw ApiException(value_error("Token id " + std::to_string(id) + " is out of vocabulary"));
      }
      req.tokens.push_back(static_cast<int32_t>(id));
    }
  }
  reader.throw_if_issues();
  req.ignored_fields = reader.unknown_fields();
  check_model(req.model, limits);
  std::vector<int32_t> copy = req.tokens;
  apply_prompt_length_rules(copy, 0, limits.max_model_len);
  return req;
}

Json detokenize_response_json(const std::string& text) { return Json{{"prompt", text}}; }

}  // namespace fp4serve::server::openai
