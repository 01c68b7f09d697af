// Generated-token logprobs in each endpoint's shape, from the engine's SampleLogprobs.
// vLLM V1 keeps, per token, a dict {sampled token, then the top-N by rank}; the sampled token
// stays first even when it is also in the top-N [vllm: v1/engine/logprobs.py _make_logprob_dict].
//  - completions: {"text_offset","token_logprobs","tokens","top_logprobs":[{token: lp}]}, the
//    dict's first N+1 entries keyed by token text (equal texts merge, as in a Python dict);
//  - chat: {"content":[{"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}]},
//    the dict's first N entries (-1 = all).
// Token text is tokenizer.decode([id]) with special tokens kept (partial UTF-8 becomes U+FFFD),
// or "token_id:<id>" with return_tokens_as_token_ids; -inf is clamped to -9999.0; text_offset
// counts code points (Python len) from `initial_text_offset`.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::server::openai {

std::string logprob_token_text(const tokenizer::Tokenizer& tokenizer, int32_t token_id,
                               bool as_token_id);

nlohmann::ordered_json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                                std::span<const int32_t> token_ids,
                                                std::span<const engine::SampleLogprobs> logprobs,
                                                int64_t num_top, int64_t initial_text_offset,
                                                bool as_token_id);

nlohmann::ordered_json chat_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                          std::span<const int32_t> token_ids,
                                          std::span<const engine::SampleLogprobs> logprobs,
                                          int64_t top_logprobs, bool as_token_id);

// Python len() of a token text, for text_offset bookkeeping across stream chunks.
int64_t text_offset_length(const std::string& token_text);

}  // namespace fp4serve::server::openai
