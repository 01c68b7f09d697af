#include "server/openai/prompt_length.h"

#include <algorithm>

#include "server/openai/openai_error.h"

namespace fp4serve::server::openai {

void check_max_output_tokens(int64_t max_output_tokens, const std::string& param,
                             int64_t max_model_len) {
  if (max_output_tokens > max_model_len) {
    // vLLM's f-string really reads "{param}={M}cannot be greater than
    // max_model_len={max_total_tokens=}": no space, and the self-documenting `=` form.
    throw ApiException(vllm_validation_error(
        param + "=" + std::to_string(max_output_tokens) + "cannot be greater than max_model_len=" +
            "max_total_tokens=" + std::to_string(max_model_len) + ". Please request fewer output tokens.",
        param, std::to_string(max_output_tokens)));
  }
}

void apply_prompt_length_rules(std::vector<int32_t>& ids, int64_t max_output_tokens,
                               int64_t max_model_len, std::optional<int64_t> truncate,
                               const std::optional<std::string>& side) {
  const int64_t max_input_tokens = max_model_len - max_output_tokens;
  if (truncate && *truncate > max_input_tokens) {
    throw ApiException(vllm_validation_error(
        "truncate_prompt_tokens=" + std::to_string(*truncate) +
            " cannot be greater than max_model_len - max_tokens = " + std::to_string(max_input_tokens) +
            ". Please request a smaller truncation size.",
        "truncate_prompt_tokens", std::to_string(*truncate)));
  }
  if (truncate) {
    const int64_t keep = *truncate < 0 ? max_input_tokens : *truncate;
    if (keep < static_cast<int64_t>(ids.size())) {
      if (keep == 0) {
        ids.clear();
      } else if (side.value_or("left") == "left") {
        ids.erase(ids.begin(), ids.end() - keep);
      } else {
        ids.resize(static_cast<std::size_t>(keep));
      }
    }
  }
  const auto n = static_cast<int64_t>(ids.size());
  if (n > max_input_tokens) {
    throw ApiException(vllm_validation_error(
        "You passed " + std::to_string(n) + " input tokens and requested " +
            std::to_string(max_output_tokens) + " output tokens. However, the model's context length is only " +
            std::to_string(max_model_len) + " tokens, resulting in a maximum input length of " +
            std::to_string(max_input_tokens) + " tokens. Please reduce the length of the input prompt.",
        "input_tokens", std::to_string(n)));
  }
}

int64_t resolve_max_tokens(int64_t max_model_len, std::optional<int64_t> request_max_tokens,
                           int64_t prompt_len, std::optional<int64_t> default_max_tokens,
                           std::optional<int64_t> override_max_tokens) {
  if (max_model_len < prompt_len) {
    throw ApiException(value_error("Input length (" + std::to_string(prompt_len) +
                                   ") exceeds model's maximum context length (" +
                                   std::to_string(max_model_len) + ")."));
  }
  int64_t result = max_model_len - prompt_len;
  const std::optional<int64_t> fallback = request_max_tokens ? request_max_tokens : default_max_tokens;
  if (fallback) result = std::min(result, *fallback);
  if (override_max_tokens) result = std::min(result, *override_max_tokens);
  return result;
}

void check_prompt_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size) {
  if (ids.empty()) throw ApiException(value_error("The decoder prompt cannot be empty"));
  const int32_t max_id = *std::max_element(ids.begin(), ids.end());
  if (max_id >= vocab_size) {
    throw ApiException(value_error("Token id " + std::to_string(max_id) + " is out of vocabulary"));
  }
}

}  // namespace fp4serve::server::openai
