// /v1/chat/completions answers: the non-streaming ChatCompletionResponse and the SSE stream,
// shaped as docs/vllm-surface.md §1.7/§1.9 and vLLM's chat_completion/serving.py build them. The
// reasoning / content / tool-call split of the output is the caller's (reasoning_parser*,
// tool_parser*); these builders only place it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "server/openai/chat_request.h"
#include "server/openai/response_common.h"

namespace fp4serve::server::openai {

// What the parsers made of one finished sequence.
struct ChatMessageParts {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<ToolCall> tool_calls;  // the auto tool parser's or a forced tool_choice's calls
};

struct ChatSequence {
  ChatMessageParts message;
  std::vector<int32_t> token_ids;
  std::vector<engine::SampleLogprobs> logprobs;
  std::string finish_reason;
  engine::StopReason stop_reason;
  std::optional<engine::PromptLogprobs> prompt_logprobs;  // prompt_logprobs, or echo
};

struct ChatResult {
  std::vector<int32_t> prompt_token_ids;
  int64_t num_cached_tokens = 0;
  std::vector<ChatSequence> sequences;  // sequence-index order
};

// The ChatCompletionResponse JSON. finish_reason is "tool_calls" when the auto tool parser found
// calls (even after "length", as vLLM does) and for tool_choice "required" after a normal stop. A sequence that finished with "error" -> 500.
// `reasoning_parser`: whether a reasoning parser produced `reasoning` (include_reasoning=false
// then also hides logprobs, as vLLM does).
Json build_chat_response(const ChatRequest& request, const ChatResult& result,
                         const ResponseContext& context, bool reasoning_parser = false);

// What the parsers made of one step's text. `empty()` = the parser has nothing to send yet
// (vLLM's delta_message None).
struct ChatDeltaParts {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<ToolCallDelta> tool_calls;  // tool_parser.h fragments
  bool empty() const { return !reasoning && !content && tool_calls.empty(); }
};

class ChatStream {
 public:
  ChatStream(const ChatRequest& request, ResponseContext context, bool reasoning_parser = false);

  // Call once when the engine's first output for the request arrives (not before: clients stamp
  // TTFT on it): the role chunk of every choice, and the echo chunk.
  std::string start(int64_t num_prompt_tokens, int64_t num_cached_tokens);
  // One sequence's step: its new tokens/logprobs (from the engine) and their parsed text.
  // Without parsers pass ChatDeltaParts{.content = delta.text}.
  std::string on_delta(const engine::SequenceDelta& delta, const ChatDeltaParts& parts);
  std::string finish();
  std::string fail(const ApiError& error);
  bool started() const { return started_; }
  bool done() const { return done_; }

 private:
  Json chunk_base() const;
  ChatRequest request_;  // a copy: the stream must not dangle when the caller moves its request
  ResponseContext context_;
  bool reasoning_parser_;
  std::size_t n_;
  bool include_usage_ = false, continuous_usage_ = false;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  std::vector<int64_t> num_tokens_;
  std::vector<bool> finish_sent_, tools_streamed_;
  bool started_ = false, done_ = false;
};

}  // namespace fp4serve::server::openai
