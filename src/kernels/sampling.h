// The sampling op of the backend seam (Backend::sample): one token per logits row, with vLLM V1's
// semantics and order (vllm/v1/sample/sampler.py):
//   raw logits -> grammar bitmask (structured output) -> [logprobs of these logits, logprobs_mode "raw_logprobs": the top-N, or the
//   logprob_token_ids' when the request names them]
//   -> allowed_token_ids mask -> bad_words -> min_tokens mask -> logit_bias
//   -> repetition/frequency/presence penalties -> thinking budget (the forced end-of-reasoning
//   token's logit set to 1e9, after every other processor, as vLLM's state holder does)
//   -> greedy argmax (temperature < 1e-5), or temperature -> min_p -> top-k -> top-p -> draw.
// The CPU implementation (cpu/sampling_cpu.h) documents each stage in its own file.
//
// Padding rows of the lm_head (ids >= valid_vocab_size, e.g. 248077..248319 for Qwen3.6) are not
// tokens: they are never sampled and are left out of the logprobs' softmax. (vLLM keeps them in the
// softmax; their logits are untrained and far below the rest, so the difference is far below float
// precision in practice.)
//
// Randomness: one uniform u in [0, 1) per random row, Philox4x32-10 (cpu/sampling_rng.h). A seeded
// row's u at output position p is a function of (seed, p) alone, so the same seed gives the same
// tokens whatever the batch, the row order, the thread count or a preemption in between. Unseeded
// random rows take consecutive draws of the engine generator (SamplingConfig::seed, counter
// *engine_draws) in row order; greedy rows take none. Streams are not bit-identical to vLLM's torch
// generators; the guarantees are the same.
//
// Memory: the op writes into what the caller hands it (results, top-N arrays) and otherwise uses
// scratch the backend keeps (on the CPU: per thread, reserved for the whole vocabulary by every
// thread of the first call's team), so a step's sampling allocates nothing once warm. The logits
// rows may be edited during the call (sparse edits for bad words, min_tokens, bias and penalties)
// and are restored before it returns: the caller's logits are unchanged. (allowed_token_ids edits
// every other token of the row: O(V) per row, the price of an exact per-row mask.)
//
// Numerics contract (what every backend's sample() is tested for against the CPU op, given the same
// logits, rows and engine counter; tests/unit/kernels/sampling_op_test.cpp holds the CPU side). It
// is about the op alone: a GPU forward's logits differ from the CPU's within the forward's own
// tolerance, and end-to-end tokens are judged by that.
//   - results depend on a row's own logits, options, ids and uniform only: bit-identical whatever
//     the other rows of the call, their order and the thread or block count;
//   - the processors (allowed_token_ids, bad_words, min_tokens, logit_bias, penalties, the thinking
//     budget) are IEEE float32 operations in
//     the stated order (no fused multiply-add), so the processed row is bit-identical to the CPU
//     op's; greedy rows therefore pick the identical token (first maximum on ties);
//   - the uniform of every random row, and the engine generator's counter after the call, are
//     identical (integer Philox; the counter advances on the host in row order);
//   - top-k keeps exactly the CPU op's set (comparisons only). A random row, seeded or not, draws
//     the CPU op's token, except where a min_p or top-p boundary, or the draw's u * total, lies
//     within a relative 1e-5 of the probability mass at a candidate's edge (exp() and the
//     summation order may differ by ulps): only such rows may differ;
//   - logprobs: the top-N ids and their order are identical (ranked on the raw logits, ties to the
//     lower id); every logprob within 1e-5 absolute of the CPU op's (float32 terms, a log-sum-exp
//     accumulated in double or an equally exact tree); the rank is identical except where another
//     token's logprob is within one float ulp of the sampled one's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/reasoning_budget.h"

namespace fp4serve::kernels {

// vLLM's _SAMPLING_EPS: a temperature below it means greedy.
inline constexpr double kGreedyTemperature = 1e-5;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// A request's sampling settings in the op's form, made once when the request is admitted (the engine
// validates and resolves vLLM's SamplingParams into this).
struct SamplingOptions {
  double temperature = 1.0;         // < kGreedyTemperature: greedy
  double top_p = 1.0;               // >= 1: off
  int64_t top_k = 0;                // <= 0 or >= the vocabulary: off
  double min_p = 0.0;               // <= 0: off
  double presence_penalty = 0.0;    // on output tokens, once
  double frequency_penalty = 0.0;   // on output tokens, times their count
  double repetition_penalty = 1.0;  // on prompt and output tokens
  std::optional<uint64_t> seed;
  std::optional<int64_t> logprobs;  // top-N per sampled token; -1 = the whole valid vocabulary
  int64_t min_tokens = 0;           // stop ids masked while fewer outputs than this
  std::vector<int64_t> min_tokens_stop_ids;           // masked under min_tokens (stop ids + EOS ids)
  std::vector<std::pair<int32_t, float>> logit_bias;  // added in float32; ids outside the row ignored
  std::vector<std::vector<int32_t>> bad_words;        // token sequences (cpu/sampling_bad_words.h)
  // Only these ids may be drawn (sorted, unique); empty: no restriction. Per row, so a request's
  // mask never touches another row of the batch.
  std::vector<int32_t> allowed_token_ids;
  // When non-empty, the logprobs returned are these ids' (in this order, repeats kept) instead of
  // the top-N; ids past the valid vocabulary are scored from their raw logit all the same.
  std::vector<int32_t> logprob_token_ids;
  ReasoningBudget reasoning_budget;  // thinking_token_budget (reasoning_budget.h)

  bool greedy() const { return temperature < kGreedyTemperature; }
  // The row reports logprobs: a top-N was asked for, or explicit ids.
  bool wants_logprobs() const { return logprobs.has_value() || !logprob_token_ids.empty(); }
  bool has_penalties() const {
    return presence_penalty != 0.0 || frequency_penalty != 0.0 || repetition_penalty != 1.0;
  }
  // Entries a row's `top` must hold: 0 without logprobs, the logprob_token_ids' count when they are
  // named, else N (-1: the valid vocabulary).
  int64_t top_entries(int64_t valid_vocab_size) const {
    if (!logprob_token_ids.empty()) return static_cast<int64_t>(logprob_token_ids.size());
    if (!logprobs) return 0;
    return *logprobs == -1 ? valid_vocab_size : std::clamp<int64_t>(*logprobs, 0, valid_vocab_size);
  }
};

// One logits row of the call: row i of the logits view.
struct SampleRow {
  const SamplingOptions* options = nullptr;
  std::span<const int32_t> prompt_ids;
  std::span<const int32_t> output_ids;  // generated so far; its size is the output position
  // Room for the top-N logprobs when options->logprobs is set (at least top_entries() entries).
  std::span<TokenLogprob> top;
  // Structured output: a token may be drawn only when its bit is set (bit t of word t / 32; words
  // cover the whole logits row; xgrammar's layout). Empty: no grammar. Applied to the raw logits
  // before everything else, as vLLM applies the grammar bitmask before its sampler, so the logprobs
  // are those of the masked row (masked tokens -inf). At least one valid token must be allowed.
  std::span<const int32_t> token_bitmask;
};

struct SampleResult {
  int32_t token = -1;
  bool has_logprobs = false;  // options->wants_logprobs()
  float logprob = 0.0f;       // the token's raw logprob
  int64_t rank = 0;           // 1-based; tied tokens share the worse rank (vLLM batched_count_greater_than)
  int64_t num_top = 0;        // entries written to the row's `top`: best first (ties: lower id first),
                              // or the logprob_token_ids in their order
};

struct SamplingConfig {
  int64_t vocab_size = 0;        // length of a logits row (lm_head rows)
  int64_t valid_vocab_size = 0;  // ids that are tokens; 1..vocab_size
  uint64_t seed = 0;             // engine generator, for rows without a seed
  uint64_t* engine_draws = nullptr;  // the engine generator's counter, advanced per unseeded random row
  int num_threads = 0;           // rows sampled in parallel; 0 = the backend's default
};

// The op's logprobs of `token` under a host row (the raw logits over the ids that form the
// distribution, usually the valid vocabulary): its logprob and rank, and the best min(num_top,
// row.size()) entries into `top` (which must hold that many). For rows already in host memory, as
// prompt logprobs' rows are; the CPU op computes a sampled token's logprobs with it. The row must
// have a finite maximum.
SampleResult host_token_logprobs(std::span<const float> row, int32_t token, int64_t num_top,
                                 std::span<TokenLogprob> top);

// The same for a row that names its logprob ids (SamplingOptions::logprob_token_ids): the token's
// logprob and rank, and into `out` (ids.size() entries) the logprobs of `ids` in their order.
// `row` is the whole logits row; the distribution is its first `valid` entries, and an id past them
// (a padding row of the lm_head, which vLLM's validation admits) is scored against it all the same.
SampleResult host_token_logprobs_of_ids(std::span<const float> row, std::size_t valid, int32_t token,
                                        std::span<const int32_t> ids, std::span<TokenLogprob> out);

}  // namespace fp4serve::kernels
