#include "engine/sampler_processors.h"

#include <limits>

#include "engine/bad_words.h"

namespace fp4serve::engine {

namespace {
constexpr uint32_t kInPrompt = 0x80000000u;
constexpr uint32_t kCountMask = 0x7fffffffu;

bool in_row(std::span<float> row, int64_t token) {
  return token >= 0 && token < static_cast<int64_t>(row.size());
}
}  // namespace

void apply_bad_words(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> output_ids, LogitsEditLog& log) {
  if (params.bad_words_token_ids.empty()) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t id : banned_next_tokens(params.bad_words_token_ids, output_ids)) {
    if (in_row(row, id)) log.set(row, id, kNegInf);
  }
}

void apply_min_tokens(std::span<float> row, const SamplingParams& params, std::size_t num_output,
                      std::span<const int64_t> model_eos_ids, LogitsEditLog& log) {
  if (params.min_tokens <= 0 || static_cast<int64_t>(num_output) >= params.min_tokens) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // vLLM's all_stop_token_ids = stop_token_ids + EOS ids, whether or not ignore_eos is set.
  for (int64_t id : params.stop_token_ids) {
    if (in_row(row, id)) log.set(row, static_cast<int32_t>(id), kNegInf);
  }
  for (int64_t id : model_eos_ids) {
    if (in_row(row, id)) log.set(row, static_cast<int32_t>(id), kNegInf);
  }
}

void apply_logit_bias(std::span<float> row, const SamplingParams& params, LogitsEditLog& log) {
  for (const auto& [id, bias] : params.logit_bias) {
    if (!in_row(row, id)) continue;
    const auto t = static_cast<int32_t>(id);
    log.set(row, t, row[static_cast<std::size_t>(t)] + static_cast<float>(bias));
  }
}

void apply_penalties(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch, LogitsEditLog& log) {
  if (!params.has_penalties()) return;
  if (scratch.counts.size() < row.size()) scratch.counts.assign(row.size(), 0u);
  scratch.touched.clear();
  auto touch = [&](int32_t id) -> uint32_t& {
    uint32_t& c = scratch.counts[static_cast<std::size_t>(id)];
    if (c == 0) scratch.touched.push_back(id);
    return c;
  };
  for (int32_t id : prompt_ids) {
    if (in_row(row, id)) touch(id) |= kInPrompt;
  }
  for (int32_t id : output_ids) {
    if (in_row(row, id)) {
      uint32_t& c = touch(id);
      c = (c & kInPrompt) | ((c & kCountMask) + 1);
    }
  }
  // vLLM keeps the penalties as float32 tensors.
  const auto rep = static_cast<float>(params.repetition_penalty);
  const auto freq = static_cast<float>(params.frequency_penalty);
  const auto pres = static_cast<float>(params.presence_penalty);
  for (int32_t id : scratch.touched) {
    uint32_t& c = scratch.counts[static_cast<std::size_t>(id)];
    const uint32_t count = c & kCountMask;
    c = 0;
    float x = row[static_cast<std::size_t>(id)];
    // Repetition: every touched token is in the prompt or the output. The CUDA kernel divides
    // positive logits and multiplies the others (vllm csrc/sampler.cu).
    if (rep != 1.0f) x = x > 0.0f ? x / rep : x * rep;
    if (count > 0) {
      x -= freq * static_cast<float>(count);
      x -= pres;
    }
    log.set(row, id, x);
  }
}

}  // namespace fp4serve::engine
