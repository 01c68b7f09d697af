#include "kernels/cpu/sampling_processors.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/sampling_bad_words.h"

namespace fp4serve::kernels::cpu {

namespace {
constexpr uint32_t kInPrompt = 0x80000000u;
constexpr uint32_t kCountMask = 0x7fffffffu;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool in_row(std::span<float> row, int64_t token) {
  return token >= 0 && token < static_cast<int64_t>(row.size());
}
}  // namespace

void apply_token_bitmask(std::span<float> row, std::span<const int32_t> bitmask) {
  const std::size_t n = row.size();
  for (std::size_t w = 0; w * 32 < n; ++w) {
    const auto bits = static_cast<uint32_t>(bitmask[w]);
    if (bits == 0xffffffffu) continue;
    const std::size_t end = std::min(n, w * 32 + 32);
    for (std::size_t t = w * 32; t < end; ++t) {
      if (!((bits >> (t - w * 32)) & 1u)) row[t] = kNegInf;
    }
  }
}

void apply_allowed_token_ids(std::span<float> row, const SamplingOptions& options, LogitsEditLog& log) {
  const std::vector<int32_t>& allowed = options.allowed_token_ids;
  if (allowed.empty()) return;
  // One pass over the row, walking the sorted list alongside it.
  auto next = allowed.begin();
  for (std::size_t t = 0; t < row.size(); ++t) {
    while (next != allowed.end() && static_cast<std::size_t>(*next) < t) ++next;
    if (next != allowed.end() && static_cast<std::size_t>(*next) == t) continue;
    log.set(row, static_cast<int32_t>(t), kNegInf);
  }
}

void apply_reasoning_budget(std::span<float> row, const SamplingOptions& options,
                            std::span<const int32_t> output_ids, LogitsEditLog& log) {
  if (!options.reasoning_budget.active()) return;
  if (const auto forced = forced_reasoning_token(options.reasoning_budget, output_ids); forced && in_row(row, *forced))
    log.set(row, *forced, kForcedLogit);
}

void apply_bad_words(std::span<float> row, const SamplingOptions& options,
                     std::span<const int32_t> output_ids, LogitsEditLog& log) {
  for_each_banned_next_token(options.bad_words, output_ids, [&](int32_t id) {
    if (in_row(row, id)) log.set(row, id, kNegInf);
  });
}

void apply_min_tokens(std::span<float> row, const SamplingOptions& options, std::size_t num_output,
                      LogitsEditLog& log) {
  if (options.min_tokens <= 0 || static_cast<int64_t>(num_output) >= options.min_tokens) return;
  for (int64_t id : options.min_tokens_stop_ids) {
    if (in_row(row, id)) log.set(row, static_cast<int32_t>(id), kNegInf);
  }
}

void apply_logit_bias(std::span<float> row, const SamplingOptions& options, LogitsEditLog& log) {
  for (const auto& [id, bias] : options.logit_bias) {
    if (!in_row(row, id)) continue;
    log.set(row, id, row[static_cast<std::size_t>(id)] + bias);
  }
}

void apply_penalties(std::span<float> row, const SamplingOptions& options,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch, LogitsEditLog& log) {
  if (!options.has_penalties()) return;
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
  const auto rep = static_cast<float>(options.repetition_penalty);
  const auto freq = static_cast<float>(options.frequency_penalty);
  const auto pres = static_cast<float>(options.presence_penalty);
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

}  // namespace fp4serve::kernels::cpu
