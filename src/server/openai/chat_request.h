// POST /v1/chat/completions: the body -> a typed, validated ChatRequest whose messages, tools and
// template kwargs are ready for make_chat_template_context(), with vLLM's checks in vLLM's order
// [vllm: entrypoints/openai/chat_completion/protocol.py ChatCompletionRequest, serving.py,
// entrypoints/chat_utils.py]. Content parts: text, and image_url (collected in ChatRequest::images).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/request_common.h"
#include "server/openai/request_template.h"
#include "server/openai/tool_parser.h"

namespace fp4serve::server::openai {

// How message content reaches the template (vLLM --chat-template-content-format): "string" joins
// the text parts with "\n"; "openai" keeps [{"type":"text","text":...}] lists.
enum class ContentFormat { kString, kOpenAI };

struct ChatParseOptions {
  ContentFormat content_format = ContentFormat::kString;
  Json default_chat_template_kwargs = Json::object();  // --default-chat-template-kwargs
  std::string response_role = "assistant";             // --response-role
};

// One image_url content part, in prompt order: fetched, decoded and preprocessed by the chat route.
struct ChatImagePart {
  std::string url;
  std::string detail;  // "auto", "low", "high" or ""; Qwen's processor has no use for it (as vLLM)
};

struct ChatRequest {
  CommonRequestFields common;
  std::string model_name;
  Json messages = Json::array();  // the conversation as the template sees it
  std::vector<ChatImagePart> images;  // the image parts of all messages, in order
  Json tools;                     // null, or the tools as vLLM dumps them for the template
  ToolChoice tool_choice = ToolChoice::kNone;  // (tool_parser.h) "auto" when tools come without one
  std::string tool_choice_function;            // the named function (kNamed)
  bool parallel_tool_calls = true;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool top_logprobs_null = false;  // sent as null (vLLM's None: echo then asks no prompt logprobs)
  std::optional<int64_t> max_tokens;             // deprecated field
  std::optional<int64_t> max_completion_tokens;  // wins over max_tokens
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the caller trims the render after the final message
  bool include_reasoning = true;
  std::optional<std::string> reasoning_effort;
  Json chat_template_kwargs = Json::object();  // merged; safe for make_chat_template_context
  // The request's own template (only with --trust-request-chat-template); "" means the server's,
  // as vLLM's `request.chat_template or default_template`.
  std::optional<std::string> chat_template;
  std::string response_role = "assistant";     // role of the answer (first stream chunk)
  std::vector<std::string> ignored_fields;

  // The requested output length and the field it came from (build_tok_params).
  std::optional<int64_t> requested_max_tokens() const {
    return max_completion_tokens ? max_completion_tokens : max_tokens;
  }
  std::string max_tokens_param() const {
    return max_completion_tokens ? "max_completion_tokens" : "max_tokens";
  }
  int64_t max_output_tokens() const { return requested_max_tokens().value_or(0); }
  // The engine's logprobs count: top_logprobs when logprobs is true.
  std::optional<int64_t> engine_logprobs() const {
    return logprobs ? std::optional<int64_t>(top_logprobs) : std::nullopt;
  }
  // echo: the content of the last message when its role is the answer's role, else "".
  std::string echo_prefix() const;
  // Tool calls are parsed from the output only for tool_choice "auto" with tools.
  bool auto_tools() const { return tool_choice == ToolChoice::kAuto && !tools.is_null(); }
};

// By value: the parser normalizes the body in place (the string overload moves its parse in, so a
// body is never copied).
ChatRequest parse_chat_request(Json body, const ServerLimits& limits,
                               const ChatParseOptions& options = {});
ChatRequest parse_chat_request(std::string_view body_text, const ServerLimits& limits,
                               const ChatParseOptions& options = {});
inline ChatRequest parse_chat_request(const std::string& body_text, const ServerLimits& limits,
                                      const ChatParseOptions& options = {}) {
  return parse_chat_request(std::string_view(body_text), limits, options);
}

engine::SamplingParams to_sampling_params(const ChatRequest& request, int64_t max_tokens,
                                          const DefaultSamplingParams& defaults,
                                          const ServerLimits& limits,
                                          bool* temperature_raised = nullptr);

// The messages / tools readers, shared with /tokenize's chat form: messages become the template's
// conversation (text parts only, tool-call arguments parsed), tools are dumped as vLLM hands them
// to the template. Faults go to the reader; vLLM-level refusals throw ApiException.
void read_chat_messages(BodyReader& reader, const Json& body, ContentFormat format, Json& out);
void read_chat_tools(BodyReader& reader, Json& out);

// Python's json.loads error text ("Expecting value: line 1 column 1 (char 0)"), approximated.
std::string python_json_error(std::string_view text);

}  // namespace fp4serve::server::openai
