// Generated-token and prompt-token logprobs in each endpoint's shape, from the engine's
// SampleLogprobs / PromptLogprobs.
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
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::server::openai {

std::string logprob_token_text(const tokenizer::Tokenizer& tokenizer, int32_t token_id,
                               bool as_token_id);

// One logprobs entry per token id; nullptr is vLLM's None (the prompt's first token under echo):
// its token_logprobs and top_logprobs entries are null.
nlohmann::ordered_json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                                std::span<const int32_t> token_ids,
                                                std::span<const engine::SampleLogprobs* const> logprobs,
                                                int64_t num_top, int64_t initial_text_offset,
                                                bool as_token_id);
// The same for generated tokens only (entries past logprobs.size() are None).
nlohmann::ordered_json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                                std::span<const int32_t> token_ids,
                                                std::span<const engine::SampleLogprobs> logprobs,
                                                int64_t num_top, int64_t initial_text_offset,
                                                bool as_token_id);

// Appends pointers to `logprobs` (prompt entries: nullptr for None) to `out`.
void append_logprob_refs(std::vector<const engine::SampleLogprobs*>& out,
                         std::span<const engine::SampleLogprobs> logprobs);
void append_logprob_refs(std::vector<const engine::SampleLogprobs*>& out, const engine::PromptLogprobs& logprobs);

// vLLM's prompt_logprobs field: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...],
// per prompt token after the first a dict of the token itself (first; its rank, or its top-N
// position when it is among them) and the top-N by rank. decoded_token is decode([id]); -inf is
// clamped to -9999.0 (clamp_prompt_logprobs).
nlohmann::ordered_json prompt_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                            const engine::PromptLogprobs& logprobs);

nlohmann::ordered_json chat_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                          std::span<const int32_t> token_ids,
                                          std::span<const engine::SampleLogprobs> logprobs,
                                          int64_t top_logprobs, bool as_token_id);

// Python len() of a token text, for text_offset bookkeeping across stream chunks.
int64_t text_offset_length(const std::string& token_text);

}  // namespace fp4serve::server::openai
