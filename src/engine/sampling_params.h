// A request's sampling parameters, as vLLM's SamplingParams (vllm/sampling_params.py) has them,
// with vLLM's normalisation (__post_init__ / from_optional) and validation (_verify_args, verify)
// in vLLM's order and with vLLM's messages word for word, so the server can answer HTTP 400 with
// exactly the text vLLM sends.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/structured/structured_output_params.h"
#include "kernels/sampling.h"

namespace fp4serve::engine {

// vLLM's constants (vllm/sampling_params.py, vllm/v1/sample/sampler.py).
inline constexpr double kSamplingEps = kernels::kGreedyTemperature;  // temperature below this = greedy
inline constexpr double kMinRandomTemperature = 1e-2;    // _MAX_TEMP: 0 < T < this is raised to it
inline constexpr int64_t kDefaultMaxNSequences = 16384;  // VLLM_MAX_N_SEQUENCES default
inline constexpr int64_t kDefaultMaxLogprobs = 20;       // --max-logprobs default
inline constexpr double kLogitBiasClamp = 100.0;         // from_optional clamps biases to +-100
inline constexpr int64_t kMaxNumBadWords = 128;          // VLLM_MAX_NUM_BAD_WORDS default
inline constexpr int64_t kMaxLogprobTokenIds = 128;      // MAX_LOGPROB_TOKEN_IDS

struct SamplingParams {
  int64_t n = 1;
  double presence_penalty = 0.0;    // [-2, 2], on generated tokens only
  double frequency_penalty = 0.0;   // [-2, 2], times the count in the generated tokens
  double repetition_penalty = 1.0;  // > 0, on prompt and generated tokens
  double temperature = 1.0;         // [0, 2]; < 1e-5 means greedy
  double top_p = 1.0;               // (0, 1]
  int64_t top_k = 0;                // 0 or -1 = off
  double min_p = 0.0;               // [0, 1]
  std::optional<int64_t> seed;      // -1 is normalised to "none"
  std::vector<std::string> stop;
  std::vector<int64_t>
      stop_token_ids;  // the request's, plus generation_config's EOS unless ignore_eos
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::optional<int64_t> max_tokens = 16;
  int64_t min_tokens = 0;
  std::optional<int64_t> logprobs;  // top-N logprobs per generated token; -1 = whole vocabulary
  // Top-N logprobs per prompt token (plus the token's own); -1 = whole vocabulary. Set, the
  // request skips prefix-cache reads (vLLM skip_reading_prefix_cache) so every row is computed.
  std::optional<int64_t> prompt_logprobs;
  std::map<int64_t, double> logit_bias;  // token id -> bias added to the logit
  // Words never to complete; deduplicated by prepare_sampling_params, turned into token sequences
  // by tokenize_bad_words (bad_words.h) into bad_words_token_ids, which the sampling op enforces.
  std::vector<std::string> bad_words;
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  // Only these ids may be sampled (vLLM: a logits mask). Set but empty is refused.
  std::optional<std::vector<int64_t>> allowed_token_ids;
  // Logprobs of exactly these ids (and the sampled token's) per generated token, instead of a
  // top-N; the OpenAI layer leaves `logprobs` unset when they are given, as vLLM does.
  std::optional<std::vector<int64_t>> logprob_token_ids;
  // thinking_token_budget: after this many reasoning tokens the end-of-reasoning marker is forced
  // (kernels/reasoning_budget.h). The markers are the reasoning parser's, as token ids, filled by
  // the server (reasoning_markers.h); -1 from the client means unset.
  std::optional<int64_t> thinking_token_budget;
  std::vector<int32_t> reasoning_start_ids, reasoning_end_ids;
  // The structured-output constraint (vLLM `structured_outputs`), validated by the server with
  // structured_outputs_error(). With a reasoning parser the server also fills the reasoning markers
  // above: the constraint then starts after the reasoning ends (after the end marker, or at once
  // when the prompt closes the reasoning block itself).
  std::optional<StructuredOutputsParams> structured_outputs;

  bool greedy() const { return temperature < kSamplingEps; }
  bool has_penalties() const {
    return presence_penalty != 0.0 || frequency_penalty != 0.0 || repetition_penalty != 1.0;
  }
};

// What validation needs to know about the served model and server flags.
struct SamplingLimits {
  int64_t vocab_size = 0;  // model_config.get_vocab_size() (Qwen3.6: 248320, the padded lm_head)
  int64_t max_logprobs = kDefaultMaxLogprobs;  // --max-logprobs; -1 = vocab_size
  int64_t max_n_sequences = kDefaultMaxNSequences;
  // Ids that are tokens (the tokenizer's size); 0 = unknown. allowed_token_ids must name one.
  int64_t valid_vocab_size = 0;
  // A reasoning parser is configured (vLLM's reasoning_config enabled): thinking_token_budget needs it.
  bool reasoning_enabled = false;
};

// A rejected request: `message` is vLLM's text; `parameter` the field vLLM names in the error
// envelope's "param" (empty where vLLM names none).
struct SamplingParamsError {
  std::string message;
  std::string parameter;
  // Python's str() of the value vLLM attaches, where the rule states it (else the server derives
  // it from the params).
  std::optional<std::string> value = std::nullopt;
};

// vLLM SamplingParams.from_optional + __post_init__ + _verify_args + verify(model_config) and the
// InputProcessor's thinking_token_budget check, in that order: clamps logit biases to [-100, 100], turns seed -1 into none, raises 0 < T < 0.01 to 0.01
// (sets *temperature_raised so the caller can log vLLM's warning), deduplicates stop_token_ids
// keeping the first occurrence, validates, and for greedy requests resets top_p/top_k/min_p to
// their "off" values. Returns the first violated rule, or nullopt when the params are usable.
std::optional<SamplingParamsError> prepare_sampling_params(SamplingParams& params,
                                                           const SamplingLimits& limits,
                                                           bool* temperature_raised = nullptr);

// The params of the index-th sequence of an n > 1 request (vLLM ParentRequest): n = 1 and, for a
// seeded request, seed + index, so every child has its own reproducible stream.
SamplingParams child_sampling_params(const SamplingParams& parent, int64_t index);

// Python's repr() of a float ("1.0", "-1.5", "1e-05", "1e+16", "inf", "nan"): vLLM's messages
// print floats with it, and ours must read the same.
std::string python_float_repr(double value);

}  // namespace fp4serve::engine
