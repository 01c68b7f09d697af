#include "server/openai/chat_request.h"

#include <algorithm>

#include "server/openai/client_json.h"
#include "server/openai/completion_request.h"
#include "server/openai/forced_tool_calls.h"
#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

namespace {

const Json* member(const Json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() ? nullptr : &*it;
}

[[noreturn]] void fail_before(const std::string& message, std::optional<std::string> parameter,
                              std::optional<std::string> value, const Json& body) {
  throw ApiException(request_validation_error(
      {before_validator_issue(message, std::move(parameter), std::move(value), body)}));
}

// --- ChatCompletionRequest's model_validator(mode="before") functions -------------------------

void check_generation_prompt(const Json& body) {
  if (py_truthy(member(body, "continue_final_message")) && py_truthy(member(body, "add_generation_prompt"))) {
    fail_before("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                std::nullopt, std::nullopt, body);
  }
}

void check_tool_usage(Json& body) {
  const Json* tools = member(body, "tools");
  if (tools && tools->is_array() && tools->empty()) {
    fail_before("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
                "tools", std::nullopt, body);
  }
  if (!body.contains("tool_choice") && py_truthy(tools)) body["tool_choice"] = "auto";
  const Json* tc = member(body, "tool_choice");
  if (!tc || tc->is_null() || *tc == "none") return;
  tools = member(body, "tools");
  if (!tools || tools->is_null()) {
    fail_before("When using `tool_choice`, `tools` must be set.", "tool_choice", std::nullopt, body);
  }
  if (!(tc->is_string() && (*tc == "auto" || *tc == "required")) && !tc->is_object()) {
    fail_before("Invalid value for `tool_choice`: " + echo_input(py_str(*tc)) +
                    "! Only named tools, \"none\", \"auto\" or \"required\" are supported.",
                "tool_choice", std::nullopt, body);
  }
  if (!tc->is_object()) return;
  const std::string usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
  const Json* function = member(*tc, "function");
  if (!function || !function->is_object()) {
    fail_before("Invalid value for `function`: `" + (function ? py_str(*function) : std::string("None")) +
                    "` in `tool_choice`! " + usage,
                "tool_choice.function", std::nullopt, body);
  }
  const Json* name = member(*function, "name");
  if (!name) {
    fail_before("Expected field `name` in `function` in `tool_choice`! " + usage,
                "tool_choice.function.name", std::nullopt, body);
  }
  if (!name->is_string() || name->get_ref<const std::string&>().empty()) {
    fail_before("Invalid `name` in `function`: `" + echo_input(py_str(*name)) + "` in `tool_choice`! " + usage,
                "tool_choice.function.name", std::nullopt, body);
  }
  bool found = false;
  if (tools->is_array()) {
    for (const auto& tool : *tools) {
      if (tool.is_object() && tool.contains("function") && tool["function"].is_object() &&
          tool["function"].contains("name") && tool["function"]["name"] == *name) {
        found = true;
        break;
      }
    }
  }
  if (!found) {
    fail_before("The tool specified in `tool_choice` does not match any of the specified `tools`",
                "tool_choice", std::nullopt, body);
  }
}

void check_chat_logprobs(const Json& body) {
  if (const Json* ids = member(body, "logprob_token_ids"); ids && ids->is_array()) {
    if (ids->empty()) {
      fail_before("`logprob_token_ids` must not be an empty list.", "logprob_token_ids", std::nullopt, body);
    }
    if (py_truthy(member(body, "use_beam_search"))) {
      fail_before("`logprob_token_ids` is not supported with beam search.", "logprob_token_ids",
                  std::nullopt, body);
    }
    if (!py_truthy(member(body, "logprobs"))) {
      fail_before("when using `logprob_token_ids`, `logprobs` must be set to true.", "logprob_token_ids",
                  std::nullopt, body);
    }
  }
  check_logprob_fields(body, "top_logprobs");
  if (const Json* tl = member(body, "top_logprobs"); tl && !tl->is_null()) {
    const double v = py_number(*tl);
    if (v < 0 && v != -1) {
      fail_before("`top_logprobs` must be a positive value or -1.", "top_logprobs", py_str(*tl), body);
    }
    if ((v == -1 || v > 0) && !py_truthy(member(body, "logprobs"))) {
      fail_before("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs",
                  std::nullopt, body);
    }
  }
}

// _normalize_messages_before: the deprecated reasoning_content becomes reasoning.
void normalize_messages(Json& body) {
  Json* messages = body.contains("messages") ? &body["messages"] : nullptr;
  if (!messages || !messages->is_array()) return;
  for (auto& msg : *messages) {
    if (!msg.is_object() || !msg.contains("reasoning_content")) continue;
    Json rc = msg["reasoning_content"];
    msg.erase("reasoning_content");
    if (!rc.is_null() && (!msg.contains("reasoning") || msg["reasoning"].is_null())) msg["reasoning"] = rc;
  }
}

// --- messages ---------------------------------------------------------------------------------

ValidationIssue issue(const char* type, Loc loc, const char* msg, const Json& input) {
  return ValidationIssue{type, std::move(loc), msg, input, std::nullopt, false, std::nullopt};
}

bool is_media_part(const std::string& type) {
  static const char* kMedia[] = {"image_url", "image_embeds", "image_pil", "input_audio", "audio_url",
                                 "audio_embeds", "video_url", "input_image", "file"};
  return std::any_of(std::begin(kMedia), std::end(kMedia), [&](const char* m) { return type == m; });
}

[[noreturn]] void refuse_media(const std::string& type) {
  throw ApiException(vllm_validation_error(
      "message content part type '" + type +
          "' is not supported here; send text parts ({\"type\": \"text\", \"text\": ...}) and, on "
          "/v1/chat/completions, image_url parts.",
      "messages"));
}

// An image_url part's URL [vllm: entrypoints/chat_utils.py MM_PARSER_MAP]: "image_url" parts carry
// {"url": ..., "detail": ...}, "input_image" parts (the Responses API shape) the URL string itself.
std::optional<ChatImagePart> image_part(const Json& part) {
  if (!part.is_object()) return std::nullopt;
  std::string type;
  if (part.contains("type") && part["type"].is_string()) type = part["type"].get<std::string>();
  else if (part.contains("image_url")) type = "image_url";
  if (type != "image_url" && type != "input_image") return std::nullopt;
  const Json* v = part.contains("image_url") ? &part["image_url"] : nullptr;
  ChatImagePart out;
  if (type == "image_url" && v && v->is_object() && v->contains("url") && (*v)["url"].is_string()) {
    out.url = (*v)["url"].get<std::string>();
    if (v->contains("detail") && (*v)["detail"].is_string()) out.detail = (*v)["detail"].get<std::string>();
    return out;
  }
  if (type == "input_image" && v && v->is_string()) {
    out.url = v->get<std::string>();
    return out;
  }
  throw ApiException(value_error(type == "input_image"
                                     ? "An 'input_image' part needs a string 'image_url'."
                                     : "An 'image_url' part needs an 'image_url' object with a string 'url', e.g. "
                                       "{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,...\"}}."));
}

// The text of one content part (vLLM chat_utils: text-like parts; other media refused).
std::string part_text(const Json& part) {
  if (part.is_string()) return part.get<std::string>();
  if (!part.is_object()) throw ApiException(value_error("Unknown part type: " + echo_input(py_str(part))));
  std::string type;
  if (part.contains("type") && part["type"].is_string()) {
    type = part["type"].get<std::string>();
  } else {
    for (const char* key : {"image_url", "image_pil", "image_embeds", "audio_url", "input_audio",
                            "audio_embeds", "video_url"}) {
      if (part.contains(key)) refuse_media(key);
    }
    if (part.contains("text")) type = "text";
  }
  if (is_media_part(type)) refuse_media(type);
  if (type == "text" || type == "input_text" || type == "output_text") {
    if (!part.contains("text") || !part["text"].is_string()) {
      throw ApiException(value_error("Text part requires a string 'text' field."));
    }
    return part["text"].get<std::string>();
  }
  if (type == "refusal" && part.contains("refusal") && part["refusal"].is_string()) {
    return part["refusal"].get<std::string>();
  }
  if (type.empty()) throw ApiException(value_error("Unknown part type: " + echo_input(py_str(part.value("type", Json())))));
  // vLLM raises NotImplementedError for a part type it has no parser for (HTTP 501).
  throw ApiException(not_implemented("Unknown part type: " + echo_input(type)));
}

// `images` null: image parts are refused (the /tokenize form). A message with images reaches the
// template as a list of parts in their order, {"type": "image"} for each image, as HF's
// apply_chat_template gets it, whatever the content format (the template renders each as
// <|vision_start|><|image_pad|><|vision_end|> in place).
Json parse_content(const Json& content, const Loc& loc, ContentFormat format,
                   std::vector<ValidationIssue>& issues, std::vector<ChatImagePart>* images) {
  if (content.is_null()) return format == ContentFormat::kString ? Json("") : Json::array();
  if (content.is_string()) {
    if (format == ContentFormat::kString) return content;
    return Json::array({Json{{"type", "text"}, {"text", content}}});
  }
  if (!content.is_array()) {
    issues.push_back(issue("string_type", loc, "Input should be a valid string", content));
    return Json();
  }
  std::vector<std::optional<std::string>> texts;  // nullopt: an image
  bool has_image = false;
  for (const auto& part : content) {
    if (images) {
      if (auto image = image_part(part)) {
        images->push_back(std::move(*image));
        texts.push_back(std::nullopt);
        has_image = true;
        continue;
      }
    }
    texts.push_back(part_text(part));
  }
  if (format == ContentFormat::kOpenAI || has_image) {
    Json parts = Json::array();
    for (auto& t : texts) parts.push_back(t ? Json{{"type", "text"}, {"text", *t}} : Json{{"type", "image"}});
    return parts;
  }
  std::string joined;
  for (std::size_t i = 0; i < texts.size(); ++i) joined += (i ? "\n" : "") + *texts[i];
  return joined;
}

// Assistant tool_calls: arguments given as a JSON string are parsed into an object for the
// template, "" / null become {} (vLLM chat_utils _postprocess_messages).
Json parse_tool_calls(const Json& calls) {
  Json out = Json::array();
  for (const auto& call : calls) {
    Json c = call;
    if (c.is_object() && c.contains("function") && c["function"].is_object()) {
      Json& fn = c["function"];
      const Json args = fn.contains("arguments") ? fn["arguments"] : Json();
      if (py_truthy(&args)) {
        if (!args.is_object() && !args.is_array()) {
          if (!args.is_string()) {
            throw ApiException(value_error("the JSON object must be str, bytes or bytearray, not " +
                                           std::string(args.is_boolean() ? "bool" : args.is_number_float() ? "float" : "int")));
          }
          const std::string& text = args.get_ref<const std::string&>();
          if (auto at = find_excess_nesting(text)) {
            throw ApiException(value_error("Invalid tool call arguments: " +
                                           std::string(JsonNestingError(*at, kMaxJsonNestingDepth).what())));
          }
          try {
            fn["arguments"] = Json::parse(text);
          } catch (const Json::exception&) {  // parse_error, or out_of_range for 1e309
            throw ApiException(value_error(python_json_error(text)));
          }
        }
      } else {
        fn["arguments"] = Json::object();
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

void read_messages(BodyReader& reader, const Json& body, ContentFormat format, Json& out,
                   std::vector<ChatImagePart>* images) {
  const Json* messages = reader.raw("messages");
  if (!messages) {
    reader.issues().push_back(missing_field_issue("messages", body));
    return;
  }
  if (!messages->is_array()) {
    reader.issues().push_back(issue("list_type", {"body", "messages"}, "Input should be a valid list", *messages));
    return;
  }
  auto& issues = reader.issues();
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const Json& msg = (*messages)[i];
    const Loc loc{"body", "messages", std::to_string(i)};
    if (!msg.is_object()) {
      issues.push_back(issue("dict_type", loc, "Input should be a valid dictionary", msg));
      continue;
    }
    if (!msg.contains("role")) {
      Loc l = loc;
      l.push_back("role");
      issues.push_back(issue("missing", l, "Field required", msg));
      continue;
    }
    Loc role_loc = loc;
    role_loc.push_back("role");
    auto role = coerce_string(msg["role"], role_loc, issues);
    if (!role) continue;
    Loc content_loc = loc;
    content_loc.push_back("content");
    Json content = parse_content(msg.contains("content") ? msg["content"] : Json(), content_loc, format, issues, images);
    Json m = Json::object();
    m["role"] = *role;
    m["content"] = content;
    if (*role == "assistant") {
      if (msg.contains("tool_calls") && !msg["tool_calls"].is_null()) {
        if (!msg["tool_calls"].is_array()) {
          Loc l = loc;
          l.push_back("tool_calls");
          issues.push_back(issue("list_type", l, "Input should be a valid list", msg["tool_calls"]));
          continue;
        }
        m["tool_calls"] = parse_tool_calls(msg["tool_calls"]);
      }
      if (msg.contains("reasoning") && !msg["reasoning"].is_null()) {
        // Both names: templates read either (Qwen3.5's reads reasoning_content).
        m["reasoning"] = msg["reasoning"];
        m["reasoning_content"] = msg["reasoning"];
      }
    } else if (*role == "tool" && msg.contains("tool_call_id")) {
      m["tool_call_id"] = msg["tool_call_id"];
    }
    if (msg.contains("name") && msg["name"].is_string()) m["name"] = msg["name"];
    out.push_back(std::move(m));
  }
}

// tools: list[ChatCompletionToolsParam], dumped as vLLM hands them to the template:
// {"type":"function","function":{"name","description","parameters"[,"strict"]}}, nulls kept.
void read_tools(BodyReader& reader, Json& out) {
  const Json* tools = reader.raw("tools");
  if (!tools || tools->is_null()) return;
  auto& issues = reader.issues();
  if (!tools->is_array()) {
    issues.push_back(issue("list_type", {"body", "tools"}, "Input should be a valid list", *tools));
    return;
  }
  out = Json::array();
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const Loc loc{"body", "tools", std::to_string(i)};
    if (!t.is_object()) {
      ValidationIssue is = issue("model_type", loc, "Input should be a valid dictionary or instance of ChatCompletionToolsParam", t);
      is.ctx_repr = "{'class_name': 'ChatCompletionToolsParam'}";
      issues.push_back(is);
      continue;
    }
    if (t.contains("type") && t["type"] != "function") {
      Loc l = loc;
      l.push_back("type");
      ValidationIssue is = issue("literal_error", l, "Input should be 'function'", t["type"]);
      is.ctx_repr = "{'expected': \"'function'\"}";
      issues.push_back(is);
      continue;
    }
    Loc floc = loc;
    floc.push_back("function");
    if (!t.contains("function")) {
      issues.push_back(issue("missing", floc, "Field required", t));
      continue;
    }
    const Json& f = t["function"];
    if (!f.is_object()) {
      ValidationIssue is = issue("model_type", floc, "Input should be a valid dictionary or instance of FunctionDefinition", f);
      is.ctx_repr = "{'class_name': 'FunctionDefinition'}";
      issues.push_back(is);
      continue;
    }
    Loc nloc = floc;
    nloc.push_back("name");
    if (!f.contains("name")) {
      issues.push_back(issue("missing", nloc, "Field required", f));
      continue;
    }
    auto name = coerce_string(f["name"], nloc, issues);
    if (!name) continue;
    Json fn = Json::object();
    fn["name"] = *name;
    fn["description"] = f.contains("description") ? f["description"] : Json();
    fn["parameters"] = f.contains("parameters") ? f["parameters"] : Json();
    if (f.contains("strict") && !f["strict"].is_null()) fn["strict"] = f["strict"];
    Json tool = Json::object();
    tool["type"] = "function";
    tool["function"] = std::move(fn);
    out.push_back(std::move(tool));
  }
}

// merge_kwargs(defaults, overrides): overrides win unless they are None or "auto".
void merge_over(Json& base, const Json& overrides) {
  if (!overrides.is_object()) return;
  for (const auto& [k, v] : overrides.items()) {
    if (v.is_null() || v == "auto") continue;
    base[k] = v;
  }
}

}  // namespace

void read_chat_messages(BodyReader& reader, const Json& body, ContentFormat format, Json& out) {
  read_messages(reader, body, format, out, nullptr);
}

void read_chat_tools(BodyReader& reader, Json& out) { read_tools(reader, out); }

std::string python_json_error(std::string_view text) {
  const auto err = python_json_decode_error(text);
  return err ? err->str() : std::string();
}

std::string ChatRequest::echo_prefix() const {
  if (messages.empty()) return "";
  const Json& last = messages.back();
  if (!last.contains("role") || last["role"] != response_role) return "";
  const Json& content = last["content"];
  if (content.is_string()) return content.get<std::string>();
  std::string joined;
  if (content.is_array()) {
    for (std::size_t i = 0; i < content.size(); ++i) {
      joined += (i ? "\n" : "") + content[i].value("text", std::string());
    }
  }
  return joined;
}

ChatRequest parse_chat_request(std::string_view body_text, const ServerLimits& limits,
                               const ChatParseOptions& options) {
  return parse_chat_request(parse_json_body(body_text, "ChatCompletionRequest"), limits, options);
}

namespace {

ChatRequest parse_chat_body(Json& body, const ServerLimits& limits, const ChatParseOptions& options) {
  if (!body.is_object()) {
    throw ApiException(request_validation_error({ValidationIssue{
        "model_type", {"body"}, "Input should be a valid dictionary or instance of ChatCompletionRequest",
        body, "{'class_name': 'ChatCompletionRequest'}", false, std::nullopt}}));
  }
  // model_validator(mode="before") functions, last-defined first. (check_system_message_content_type
  // only warns; drop_prompt_token_ids_with_media concerns kv_transfer_params, refused below.)
  check_generation_prompt(body);
  check_tool_usage(body);
  check_structured_outputs_count(body, Endpoint::kChat);
  check_chat_logprobs(body);
  check_stream_options(body);
  check_response_format(body);
  normalize_messages(body);
  check_cache_salt(body);

  ChatRequest req;
  req.response_role = options.response_role;
  BodyReader reader(body);
  read_common_fields(reader, Endpoint::kChat, req.common);
  read_messages(reader, body, options.content_format, req.messages, &req.images);
  read_tools(reader, req.tools);
  req.logprobs = reader.bool_field("logprobs").value_or(false);
  req.top_logprobs = reader.int_field("top_logprobs").value_or(0);
  if (const Json* tl = reader.raw("top_logprobs"); tl && tl->is_null()) req.top_logprobs_null = true;
  req.max_tokens = reader.int_field("max_tokens");
  req.max_completion_tokens = reader.int_field("max_completion_tokens");
  req.parallel_tool_calls = reader.bool_field("parallel_tool_calls").value_or(true);
  req.add_generation_prompt = reader.bool_field("add_generation_prompt", false).value_or(true);
  req.continue_final_message = reader.bool_field("continue_final_message", false).value_or(false);
  req.include_reasoning = reader.bool_field("include_reasoning", false).value_or(true);
  if (const Json* effort = reader.raw("reasoning_effort"); effort && !effort->is_null()) {
    static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (effort->is_string() && std::any_of(std::begin(kEfforts), std::end(kEfforts),
                                           [&](const char* e) { return *effort == e; })) {
      req.reasoning_effort = effort->get<std::string>();
    } else {
      reader.issues().push_back(ValidationIssue{
          "literal_error", {"body", "reasoning_effort"},
          "Input should be 'none', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max'", *effort,
          "{'expected': \"'none', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max'\"}", false,
          std::nullopt});
    }
  }
  const auto user_kwargs = reader.object_field("chat_template_kwargs");
  if (const Json* tc = reader.raw("tool_choice"); tc && !tc->is_null()) {
    if (*tc == "auto") req.tool_choice = ToolChoice::kAuto;
    else if (*tc == "required") req.tool_choice = ToolChoice::kRequired;
    else if (tc->is_object()) {
      req.tool_choice = ToolChoice::kNamed;
      req.tool_choice_function = (*tc)["function"]["name"].get<std::string>();
    }
  }
  req.chat_template = reader.string_field("chat_template");
  reader.raw("documents");
  reader.object_field("mm_processor_kwargs");
  reader.object_field("media_io_kwargs");
  reader.bool_field("return_prompt_text");
  reader.throw_if_issues();
  req.ignored_fields = reader.unknown_fields();

  // Serving.
  req.model_name = resolve_model_name(req.common, limits);
  if (py_truthy(member(body, "mm_processor_kwargs"))) {
    throw ApiException(vllm_validation_error(
        "Per-request mm_processor_kwargs are disabled by default because they can change multimodal "
        "preprocessing resource usage. Start the server with --trust-request-mm-kwargs only when "
        "clients are trusted.",
        "mm_processor_kwargs"));
  }
  if (py_truthy(member(body, "media_io_kwargs"))) {
    throw ApiException(vllm_validation_error(
        "Per-request media_io_kwargs are disabled by default because they can change multimodal media "
        "loading resource usage. Start the server with --trust-request-mm-kwargs only when clients "
        "are trusted.",
        "media_io_kwargs"));
  }
  check_request_chat_template(body, user_kwargs, limits);
  if (req.tool_choice == ToolChoice::kAuto && !limits.enable_auto_tool_choice) {
    throw ApiException(value_error(
        "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"));
  }
  // tool_choice "required" / named: the tool parser's adjust_request replaces structured_outputs
  // with the tools' schema (forced_tool_calls.h). vLLM does it only when a parser is configured;
  // fp4serve always does, so a forced call is well-formed with or without --tool-call-parser.
  if (auto schema = forced_tool_schema(req.tool_choice, req.tool_choice_function, req.tools)) {
    RequestStructuredOutputs forced;
    forced.json = std::move(*schema);
    req.common.structured_outputs = std::move(forced);
  }
  refuse_unsupported_common(body, Endpoint::kChat);
  if (py_truthy(member(body, "documents"))) {
    throw ApiException(vllm_validation_error("`documents` is not supported by fp4serve.", "documents"));
  }

  // Template kwargs: --default-chat-template-kwargs <- request kwargs <- the request's own fields
  // (ChatCompletionRequest.build_chat_params + ChatParams.with_defaults).
  Json kwargs = options.default_chat_template_kwargs.is_object() ? options.default_chat_template_kwargs : Json::object();
  merge_over(kwargs, user_kwargs.value_or(Json::object()));
  Json extra = Json::object();
  if (req.reasoning_effort) {
    extra["reasoning_effort"] = *req.reasoning_effort;
    if (!user_kwargs || !user_kwargs->contains("enable_thinking")) {
      extra["enable_thinking"] = *req.reasoning_effort != "none";
    }
  }
  merge_over(kwargs, extra);
  req.chat_template_kwargs = template_variables(std::move(kwargs));
  if (req.continue_final_message && req.add_generation_prompt) {
    // transformers' apply_chat_template refuses the pair (the request validator only sees
    // explicit values; add_generation_prompt defaults to true).
    throw ApiException(value_error(
        "continue_final_message and add_generation_prompt are not compatible. Use "
        "continue_final_message when you want the model to continue the final message, and "
        "add_generation_prompt when you want to add a header that will prompt it to start a new "
        "assistant message instead."));
  }
  if (!req.add_generation_prompt && !req.messages.empty()) {
    req.response_role = req.messages.back()["role"].get<std::string>();
  }
  return req;
}

}  // namespace

ChatRequest parse_chat_request(Json body, const ServerLimits& limits,
                               const ChatParseOptions& options) {
  try {
    return parse_chat_body(body, limits, options);
  } catch (const nlohmann::json::exception& e) {
    // A shape no check above foresaw: still a clear 400, never a crash.
    throw ApiException(value_error(std::string("Invalid request body: ") + e.what()));
  }
}

engine::SamplingParams to_sampling_params(const ChatRequest& request, int64_t max_tokens,
                                          const DefaultSamplingParams& defaults,
                                          const ServerLimits& limits, bool* temperature_raised) {
  // vLLM: echo asks for prompt logprobs at the top_logprobs count unless prompt_logprobs is given.
  std::optional<int64_t> prompt_logprobs = request.common.prompt_logprobs;
  if (!prompt_logprobs && request.common.echo && !request.top_logprobs_null) prompt_logprobs = request.top_logprobs;
  return make_sampling_params(request.common, max_tokens, request.engine_logprobs(), prompt_logprobs, defaults,
                              limits, temperature_raised);
}

}  // namespace fp4serve::server::openai
