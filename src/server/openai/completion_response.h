// /v1/completions answers: the non-streaming CompletionResponse and the SSE stream, shaped as
// docs/vllm-surface.md §1.7/§1.9 and vLLM's completion/serving.py build them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "server/openai/completion_request.h"
#include "server/openai/response_common.h"

namespace fp4serve::server::openai {

// One finished sequence, accumulated by the caller from the engine's deltas.
struct CompletionSequence {
  std::string text;                              // the generated text (stop strings applied)
  std::vector<int32_t> token_ids;
  std::vector<engine::SampleLogprobs> logprobs;  // when the request asked for logprobs
  std::string finish_reason;                     // "stop" | "length" | "abort" | "error"
  engine::StopReason stop_reason;
  std::optional<engine::PromptLogprobs> prompt_logprobs;  // prompt_logprobs, or echo with logprobs
};

// One prompt of the request and its n sequences (in sequence-index order).
struct CompletionPromptResult {
  std::string prompt_text;  // for echo (the text prompt, or the decoded token prompt)
  std::vector<int32_t> prompt_token_ids;
  int64_t num_cached_tokens = 0;
  std::vector<CompletionSequence> sequences;
};

// The CompletionResponse JSON. A sequence that finished with "error" makes the whole answer the
// 500 vLLM sends (throws ApiException).
Json build_completion_response(const CompletionRequest& request,
                               const std::vector<CompletionPromptResult>& results,
                               const ResponseContext& context);

// The SSE stream of one completion request: feed the engine's outputs as they come (several
// prompts interleave), then finish(). Each call returns the SSE text to write (maybe empty).
class CompletionStream {
 public:
  CompletionStream(const CompletionRequest& request, ResponseContext context);

  // `prompt_index`: which prompt of the request this output belongs to; its text and ids are
  // needed for echo and usage.
  std::string on_output(std::size_t prompt_index, const std::string& prompt_text,
                        const std::vector<int32_t>& prompt_token_ids, const engine::RequestOutput& output);
  // The usage chunk when asked for, then [DONE].
  std::string finish();
  // A failure after the 200 was sent: the error event, then [DONE].
  std::string fail(const ApiError& error);
  bool done() const { return done_; }

 private:
  CompletionRequest request_;  // a copy: the stream must not dangle when the caller moves its request
  ResponseContext context_;
  std::size_t n_;
  bool include_usage_ = false, continuous_usage_ = false;
  std::vector<int64_t> text_lens_, num_tokens_, prompt_tokens_;
  std::vector<bool> echoed_;
  std::optional<int64_t> num_cached_tokens_;
  bool done_ = false;
};

}  // namespace fp4serve::server::openai
