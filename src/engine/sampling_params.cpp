#include "engine/sampling_params.h"

#include "tokenizer/chat_template/jinja_value.h"

#include <unordered_set>

namespace fp4serve::engine {

// The chat template engine already prints floats as Python's repr (its `string` filter); one
// implementation serves both.
std::string python_float_repr(double value) { return jinja::py_float_repr(value); }

namespace {

std::string py(double v) { return python_float_repr(v); }

// Python's repr of a list of ints: "[1, 2, 3]".
std::string py_list(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

// Python's repr of a list of str: "['a', 'b']".
std::string py_string_list(const std::vector<std::string>& items) {
  return jinja::py_repr(jinja::Value::from_json(nlohmann::ordered_json(items)));
}

std::optional<SamplingParamsError> fail(std::string message, std::string parameter = {}) {
  return SamplingParamsError{std::move(message), std::move(parameter)};
}

// SamplingParams._verify_args (the checks that apply to the fields we carry), in vLLM's order.
std::optional<SamplingParamsError> verify_args(const SamplingParams& p,
                                               const SamplingLimits& limits) {
  if (p.n < 1) return fail("n must be at least 1, got " + std::to_string(p.n) + ".");
  if (p.n > limits.max_n_sequences) {
    return fail("n must be at most " + std::to_string(limits.max_n_sequences) + ", got " +
                std::to_string(p.n) +
                ". To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.");
  }
  if (!(-2.0 <= p.presence_penalty && p.presence_penalty <= 2.0)) {
    return fail("presence_penalty must be in [-2, 2], got " + py(p.presence_penalty) + ".");
  }
  if (!(-2.0 <= p.frequency_penalty && p.frequency_penalty <= 2.0)) {
    return fail("frequency_penalty must be in [-2, 2], got " + py(p.frequency_penalty) + ".");
  }
  if (!std::isfinite(p.repetition_penalty)) {
    return fail("repetition_penalty must be a finite number, got " + py(p.repetition_penalty) +
                ".");
  }
  if (p.repetition_penalty <= 0.0) {
    return fail("repetition_penalty must be greater than zero, got " + py(p.repetition_penalty) +
                ".");
  }
  if (!std::isfinite(p.temperature)) {
    return fail("temperature must be a finite number, got " + py(p.temperature) + ".",
                "temperature");
  }
  if (p.temperature < 0.0) {
    return fail("temperature must be non-negative, got " + py(p.temperature) + ".", "temperature");
  }
  // Upper bound added upstream by vllm-project/vllm#44965 (2026-06); earlier releases had none.
  if (p.temperature > 2.0) {
    return fail("temperature must be in [0, 2], got " + py(p.temperature) + ".", "temperature");
  }
  if (!(0.0 < p.top_p && p.top_p <= 1.0)) {
    return fail("top_p must be in (0, 1], got " + py(p.top_p) + ".", "top_p");
  }
  if (p.top_k < -1) {
    return fail("top_k must be 0 (disable), or at least 1, got " + std::to_string(p.top_k) + ".");
  }
  if (!(0.0 <= p.min_p && p.min_p <= 1.0)) {
    return fail("min_p must be in [0, 1], got " + py(p.min_p) + ".");
  }
  if (p.max_tokens && *p.max_tokens < 1) {
    return fail("max_tokens must be at least 1, got " + std::to_string(*p.max_tokens) + ".",
                "max_tokens");
  }
  if (p.min_tokens < 0) {
    return fail("min_tokens must be greater than or equal to 0, got " +
                std::to_string(p.min_tokens) + ".");
  }
  if (p.max_tokens && p.min_tokens > *p.max_tokens) {
    return fail("min_tokens must be less than or equal to max_tokens=" +
                std::to_string(*p.max_tokens) + ", got " + std::to_string(p.min_tokens) + ".");
  }
  if (p.logprobs && *p.logprobs != -1 && *p.logprobs < 0) {
    return fail("logprobs must be non-negative or -1, got " + std::to_string(*p.logprobs) + ".",
                "logprobs");
  }
  if (p.prompt_logprobs && *p.prompt_logprobs != -1 && *p.prompt_logprobs < 0) {
    return fail("prompt_logprobs must be non-negative or -1, got " +
                    std::to_string(*p.prompt_logprobs) + ".",
                "prompt_logprobs");
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return fail("stop cannot contain an empty string.");
  }
  for (const std::string& w : p.bad_words) {
    if (w.empty()) {
      return fail("bad_words cannot contain an empty string. Got bad_words=" +
                  py_string_list(p.bad_words));
    }
  }
  return std::nullopt;
}

// SamplingParams.verify(model_config): _validate_logprobs, then _validate_logit_bias.
std::optional<SamplingParamsError> verify_against_model(const SamplingParams& p,
                                                        const SamplingLimits& limits) {
  const int64_t max_logprobs = limits.max_logprobs == -1 ? limits.vocab_size : limits.max_logprobs;
  if (p.logprobs && *p.logprobs != 0) {
    const int64_t requested = *p.logprobs == -1 ? limits.vocab_size : *p.logprobs;
    if (requested > max_logprobs) {
      return fail("Requested sample logprobs of " + std::to_string(requested) +
                      ", which is greater than max allowed: " + std::to_string(max_logprobs),
                  "logprobs");
    }
  }
  if (p.prompt_logprobs && *p.prompt_logprobs != 0) {
    const int64_t requested = *p.prompt_logprobs == -1 ? limits.vocab_size : *p.prompt_logprobs;
    if (requested > max_logprobs) {
      return fail("Requested prompt logprobs of " + std::to_string(requested) +
                      ", which is greater than max allowed: " + std::to_string(max_logprobs),
                  "prompt_logprobs");
    }
  }
  if (!p.logit_bias.empty()) {
    std::vector<int64_t> invalid;
    for (const auto& [token, bias] : p.logit_bias) {
      if (token < 0 || token >= limits.vocab_size) invalid.push_back(token);
    }
    if (!invalid.empty()) {
      return fail("token_id(s) " + py_list(invalid) +
                      " in logit_bias contain out-of-vocab token ids. Vocabulary size: " +
                      std::to_string(limits.vocab_size),
                  "logit_bias");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<SamplingParamsError> prepare_sampling_params(SamplingParams& p,
                                                           const SamplingLimits& limits,
                                                           bool* temperature_raised) {
  // from_optional: biases clamped to [-100, 100].
  for (auto& [token, bias] : p.logit_bias) {
    bias = std::min(kLogitBiasClamp, std::max(-kLogitBiasClamp, bias));
  }
  // __post_init__, in its order.
  if (temperature_raised) *temperature_raised = false;
  if (0.0 < p.temperature && p.temperature < kMinRandomTemperature) {
    p.temperature = kMinRandomTemperature;
    if (temperature_raised) *temperature_raised = true;
  }
  if (p.seed && *p.seed == -1) p.seed.reset();
  {
    std::unordered_set<int64_t> seen;
    std::vector<int64_t> unique;
    for (int64_t id : p.stop_token_ids) {
      if (seen.insert(id).second) unique.push_back(id);
    }
    p.stop_token_ids = std::move(unique);
  }
  {
    std::unordered_set<std::string> seen;
    std::vector<std::string> unique;
    for (std::string& w : p.bad_words) {
      if (seen.insert(w).second) unique.push_back(std::move(w));
    }
    p.bad_words = std::move(unique);
  }
  if (auto err = verify_args(p, limits)) return err;
  if (p.greedy()) {
    p.top_p = 1.0;
    p.top_k = 0;
    p.min_p = 0.0;
    if (p.n > 1)
      return fail("n must be 1 when using greedy sampling, got " + std::to_string(p.n) + ".");
  }
  return verify_against_model(p, limits);
}

SamplingParams child_sampling_params(const SamplingParams& parent, int64_t index) {
  SamplingParams child = parent;
  child.n = 1;
  // Python ints do not overflow; wrap rather than invoke undefined behaviour at the int64 edge.
  if (parent.seed) {
    child.seed =
        static_cast<int64_t>(static_cast<uint64_t>(*parent.seed) + static_cast<uint64_t>(index));
  }
  return child;
}

}  // namespace fp4serve::engine
