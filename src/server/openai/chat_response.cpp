#include "server/openai/chat_response.h"

#include <algorithm>

#include "server/openai/logprobs_format.h"

namespace fp4serve::server::openai {

namespace {

bool as_token_ids(const ChatRequest& request, const ResponseContext& context) {
  return request.common.return_tokens_as_token_ids.value_or(context.return_tokens_as_token_ids);
}

Json opt_string(const std::optional<std::string>& s) { return s ? Json(*s) : Json(); }

Json token_id_list(const std::vector<int32_t>& ids) {
  Json out = Json::array();
  for (int32_t id : ids) out.push_back(id);
  return out;
}

Json tool_call_json(const ToolCall& call) {
  Json fn = Json::object();
  fn["name"] = call.name;
  fn["arguments"] = call.arguments;
  Json out = Json::object();
  out["id"] = call.id.empty() ? make_chat_tool_call_id() : call.id;
  out["type"] = "function";
  out["function"] = std::move(fn);
  return out;
}

// DeltaToolCall as pydantic writes it: fields in declaration order (id, type, index, function),
// only those that were set.
Json delta_tool_call_json(const ToolCallDelta& d) {
  Json out = Json::object();
  if (d.id) {
    out["id"] = *d.id;
    out["type"] = "function";
  }
  out["index"] = d.index;
  Json fn = Json::object();
  if (d.name) fn["name"] = *d.name;
  fn["arguments"] = d.arguments;
  out["function"] = std::move(fn);
  return out;
}

}  // namespace

Json build_chat_response(const ChatRequest& request, const ChatResult& result,
                         const ResponseContext& context, bool reasoning_parser) {
  Json choices = Json::array();
  int64_t completion_tokens = 0;
  const std::string echo = request.common.echo ? request.echo_prefix() : "";
  for (std::size_t i = 0; i < result.sequences.size(); ++i) {
    const ChatSequence& seq = result.sequences[i];
    if (is_generation_error(seq.finish_reason)) throw ApiException(internal_server_error());
    const bool hide = !request.include_reasoning && reasoning_parser;
    std::vector<ToolCall> calls = seq.message.tool_calls;
    if (!request.parallel_tool_calls && calls.size() > 1) calls.resize(1);  // maybe_filter_parallel_tool_calls
    Json message = Json::object();
    message["role"] = request.response_role;
    std::optional<std::string> content = seq.message.content;
    if (request.common.echo) content = echo + content.value_or("");
    message["content"] = opt_string(content);
    message["refusal"] = nullptr;
    message["annotations"] = nullptr;
    message["audio"] = nullptr;
    message["function_call"] = nullptr;
    if (!calls.empty()) {
      Json tc = Json::array();
      for (const auto& call : calls) tc.push_back(tool_call_json(call));
      message["tool_calls"] = std::move(tc);
    }
    const std::optional<std::string> reasoning = request.include_reasoning ? seq.message.reasoning : std::nullopt;
    message["reasoning"] = opt_string(reasoning);
    if (context.emit_reasoning_content) message["reasoning_content"] = opt_string(reasoning);

    Json choice = Json::object();
    choice["index"] = i;
    choice["message"] = std::move(message);
    if (request.logprobs && context.tokenizer && !hide) {
      choice["logprobs"] = chat_logprobs_json(*context.tokenizer, seq.token_ids, seq.logprobs,
                                              response_top_logprobs(request.common, request.top_logprobs),
                                              as_token_ids(request, context));
    } else {
      choice["logprobs"] = nullptr;
    }
    // "tool_calls" for calls under "auto", and for "required" whenever the engine stopped normally;
    // a named function keeps the engine's reason (tool_parser.h).
    const bool tools_called = (request.auto_tools() || request.tool_choice == ToolChoice::kRequired) &&
                              !seq.message.tool_calls.empty();
    choice["finish_reason"] = chat_finish_reason(seq.finish_reason, request.tool_choice, tools_called);
    choice["stop_reason"] = stop_reason_json(seq.stop_reason);
    choice["token_ids"] = request.common.return_token_ids && !hide ? token_id_list(seq.token_ids) : Json();
    choices.push_back(std::move(choice));
    completion_tokens += static_cast<int64_t>(seq.token_ids.size());
  }
  Json out = Json::object();
  out["id"] = context.id;
  out["object"] = "chat.completion";
  out["created"] = context.created;
  out["model"] = context.model;
  out["choices"] = std::move(choices);
  out["service_tier"] = nullptr;
  out["system_fingerprint"] = context.system_fingerprint ? Json(*context.system_fingerprint) : Json();
  out["usage"] = usage_json(static_cast<int64_t>(result.prompt_token_ids.size()), completion_tokens, true,
                            context.enable_prompt_tokens_details ? std::optional<int64_t>(result.num_cached_tokens)
                                                                 : std::nullopt);
  // One list for the request (vLLM's RequestOutput.prompt_logprobs): the first sequence's.
  const bool has_prompt_logprobs = !result.sequences.empty() && result.sequences.front().prompt_logprobs;
  out["prompt_logprobs"] = has_prompt_logprobs && context.tokenizer
                               ? prompt_logprobs_json(*context.tokenizer, *result.sequences.front().prompt_logprobs)
                               : Json();
  out["prompt_token_ids"] = request.common.return_token_ids ? token_id_list(result.prompt_token_ids) : Json();
  out["kv_transfer_params"] = nullptr;
  return out;
}

ChatStream::ChatStream(const ChatRequest& request, ResponseContext context, bool reasoning_parser)
    : request_(request), context_(std::move(context)), reasoning_parser_(reasoning_parser) {
  n_ = static_cast<std::size_t>(request.common.n);
  num_tokens_.assign(n_, 0);
  finish_sent_.assign(n_, false);
  tools_streamed_.assign(n_, false);
  std::tie(include_usage_, continuous_usage_) =
      should_include_usage(request.common.stream_options, context_.force_include_usage);
}

Json ChatStream::chunk_base() const {
  Json chunk = Json::object();
  chunk["id"] = context_.id;
  chunk["object"] = "chat.completion.chunk";
  chunk["created"] = context_.created;
  chunk["model"] = context_.model;
  return chunk;
}

std::string ChatStream::start(int64_t num_prompt_tokens, int64_t num_cached_tokens) {
  if (started_ || done_) return "";
  started_ = true;
  prompt_tokens_ = num_prompt_tokens;
  cached_tokens_ = num_cached_tokens;
  std::string events;
  for (std::size_t i = 0; i < n_; ++i) {
    Json delta = Json::object();
    delta["role"] = request_.response_role;
    delta["content"] = "";
    Json choice = Json::object();
    choice["index"] = i;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    Json chunk = chunk_base();
    chunk["choices"] = Json::array({std::move(choice)});
    if (continuous_usage_) chunk["usage"] = usage_json(prompt_tokens_, 0, false, std::nullopt);
    events += sse_event(chunk);
  }
  if (request_.common.echo) {
    const std::string prefix = request_.echo_prefix();
    if (!prefix.empty()) {
      for (std::size_t i = 0; i < n_; ++i) {
        Json choice = Json::object();
        choice["index"] = i;
        choice["delta"] = Json{{"content", prefix}};
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = nullptr;
        Json chunk = chunk_base();
        chunk["choices"] = Json::array({std::move(choice)});
        if (continuous_usage_) chunk["usage"] = usage_json(prompt_tokens_, 0, false, std::nullopt);
        events += sse_event(chunk);
      }
    }
  }
  return events;
}

std::string ChatStream::on_delta(const engine::SequenceDelta& delta, const ChatDeltaParts& parts) {
  if (done_) return "";
  const auto i = static_cast<std::size_t>(delta.index);
  if (i >= n_ || finish_sent_[i]) return "";
  if (is_generation_error(delta.finish_reason)) return fail(internal_server_error());
  const bool hide = !request_.include_reasoning && reasoning_parser_;
  Json logprobs;  // null
  if (request_.logprobs && context_.tokenizer && !hide) {
    logprobs = chat_logprobs_json(*context_.tokenizer, delta.token_ids, delta.logprobs,
                                  response_top_logprobs(request_.common, request_.top_logprobs),
                                  as_token_ids(request_, context_));
  }
  if (delta.text.empty() && delta.token_ids.empty() && num_tokens_[i] == 0) return "";  // chunked prefill
  num_tokens_[i] += static_cast<int64_t>(delta.token_ids.size());

  std::vector<ToolCallDelta> calls = parts.tool_calls;
  if (!request_.parallel_tool_calls) {
    calls.erase(std::remove_if(calls.begin(), calls.end(), [](const ToolCallDelta& c) { return c.index > 0; }),
                calls.end());
  }
  ChatDeltaParts shown = parts;
  shown.tool_calls = calls;
  if (!request_.include_reasoning) shown.reasoning.reset();
  if (!shown.tool_calls.empty()) tools_streamed_[i] = true;
  const bool include_ids = request_.common.return_token_ids && !hide;
  if (shown.empty() && !delta.finished() && logprobs.is_null() && !include_ids) return "";

  Json d = Json::object();
  if (shown.content) d["content"] = *shown.content;
  if (shown.reasoning) {
    d["reasoning"] = *shown.reasoning;
    if (context_.emit_reasoning_content) d["reasoning_content"] = *shown.reasoning;
  }
  if (!shown.tool_calls.empty()) {
    Json tc = Json::array();
    for (const auto& c : shown.tool_calls) tc.push_back(delta_tool_call_json(c));
    d["tool_calls"] = std::move(tc);
  }
  Json choice = Json::object();
  choice["index"] = i;
  choice["delta"] = std::move(d);
  choice["logprobs"] = std::move(logprobs);
  if (delta.finished()) {
    choice["finish_reason"] = chat_stream_finish_reason(delta.finish_reason, request_.tool_choice, tools_streamed_[i]);
    choice["stop_reason"] = stop_reason_json(delta.stop_reason);
    finish_sent_[i] = true;
  } else {
    choice["finish_reason"] = nullptr;
  }
  choice["token_ids"] = include_ids ? token_id_list(delta.token_ids) : Json();
  Json chunk = chunk_base();
  chunk["choices"] = Json::array({std::move(choice)});
  if (continuous_usage_) chunk["usage"] = usage_json(prompt_tokens_, num_tokens_[i], false, std::nullopt);
  if (!include_usage_ && context_.system_fingerprint && delta.finished()) {
    chunk["system_fingerprint"] = *context_.system_fingerprint;
  }
  return sse_event(chunk);
}

std::string ChatStream::finish() {
  if (done_) return "";
  done_ = true;
  std::string events;
  if (include_usage_) {
    int64_t completion = 0;
    for (int64_t c : num_tokens_) completion += c;
    Json chunk = chunk_base();
    chunk["choices"] = Json::array();
    chunk["usage"] = usage_json(prompt_tokens_, completion, context_.enable_prompt_tokens_details,
                                cached_tokens_);
    if (context_.system_fingerprint) chunk["system_fingerprint"] = *context_.system_fingerprint;
    events += sse_event(chunk);
  }
  return events + kSseDone;
}

std::string ChatStream::fail(const ApiError& error) {
  if (done_) return "";
  done_ = true;
  return sse_event(error) + kSseDone;
}

}  // namespace fp4serve::server::openai
