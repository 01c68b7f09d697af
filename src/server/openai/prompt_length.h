// Length validation and max_tokens resolution (docs/vllm-surface.md §1.5), as vLLM's renderer does it
// [vllm: renderers/params.py TokenizeParams] and entrypoints get_max_tokens:
//   1. before tokenizing: the requested output length may not exceed max_model_len;
//   2. after tokenizing: optional truncation (truncate_prompt_tokens), then
//      prompt_len > max_model_len - requested_output -> 400 "You passed N input tokens ...";
//   3. the effective max_tokens = min(max_model_len - prompt_len, request value or the
//      generation-config max_new_tokens, override).
// "requested output" is max_tokens for completions (default 16) and max_completion_tokens or
// max_tokens or 0 for chat.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp4serve::server::openai {

// Step 1. `param` is the request field that carried the value ("max_tokens" or
// "max_completion_tokens"). Throws ApiException.
void check_max_output_tokens(int64_t max_output_tokens, const std::string& param,
                             int64_t max_model_len);

// Step 2: truncates in place ("left" keeps the last N tokens, vLLM's default; "right" the first N;
// -1 = the maximum input length), then checks the length. Throws ApiException with vLLM's text,
// param "input_tokens".
void apply_prompt_length_rules(std::vector<int32_t>& prompt_ids, int64_t max_output_tokens,
                               int64_t max_model_len,
                               std::optional<int64_t> truncate_prompt_tokens = std::nullopt,
                               const std::optional<std::string>& truncation_side = std::nullopt);

// Step 3 (get_max_tokens). `request_max_tokens`: the request's value (chat: max_completion_tokens
// if set, else max_tokens; may be absent); `default_max_tokens`: generation_config
// max_new_tokens; `override_max_tokens`: --override-generation-config max_new_tokens.
int64_t resolve_max_tokens(int64_t max_model_len, std::optional<int64_t> request_max_tokens,
                           int64_t prompt_len, std::optional<int64_t> default_max_tokens,
                           std::optional<int64_t> override_max_tokens = std::nullopt);

// The engine's admission checks on prompt ids (vLLM V1 InputProcessor): not empty, every id in
// the vocabulary. Throws ApiException (400, param null).
void check_prompt_token_ids(const std::vector<int32_t>& prompt_ids, int64_t vocab_size);

}  // namespace fp4serve::server::openai
