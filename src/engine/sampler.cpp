#include "engine/sampler.h"

#include <omp.h>

#include <string>
#include <utility>

#include "engine/engine_error.h"
#include "engine/sampler_processors.h"
#include "engine/sampler_rng.h"
#include "engine/sampler_selection.h"

namespace fp4serve::engine {

namespace {

// Per-thread scratch, kept across calls so the step path does not allocate once warm.
struct Workspace {
  LogitsEditLog edits;
  PenaltyScratch penalties;
  SelectionScratch selection;
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

SampleOutput sample_row(const SampleInput& in, std::size_t valid_vocab,
                        std::span<const int64_t> eos_ids, double uniform) {
  const SamplingParams& p = *in.params;
  Workspace& ws = thread_workspace();
  const std::span<float> row = in.logits.first(valid_vocab);

  // Processors that can change the argmax, on the raw logits (vLLM apply_logits_processors).
  apply_bad_words(row, p, in.output_ids, ws.edits);
  apply_min_tokens(row, p, in.output_ids.size(), eos_ids, ws.edits);
  apply_logit_bias(row, p, ws.edits);
  apply_penalties(row, p, in.prompt_ids, in.output_ids, ws.penalties, ws.edits);

  SampleOutput out;
  if (p.greedy()) {
    out.token = argmax_first(row);
  } else {
    const RandomFilter filter{static_cast<float>(p.temperature), p.top_k, p.top_p, p.min_p};
    out.token = draw_candidate(select_candidates(row, filter, ws.selection), uniform);
  }
  ws.edits.undo(row);

  if (p.logprobs) {
    const int64_t n = *p.logprobs == -1 ? static_cast<int64_t>(valid_vocab) : *p.logprobs;
    out.logprobs = compute_sample_logprobs(row, out.token, n);
  }
  return out;
}

}  // namespace

Sampler::Sampler(SamplerConfig config) : config_(std::move(config)) {
  if (config_.vocab_size <= 0 || config_.valid_vocab_size <= 0 ||
      config_.valid_vocab_size > config_.vocab_size) {
    throw EngineConfigError(
        "sampler: valid vocabulary size " + std::to_string(config_.valid_vocab_size) +
        " must be in [1, logits row length " + std::to_string(config_.vocab_size) + "]");
  }
}

std::vector<SampleOutput> Sampler::sample(std::span<const SampleInput> batch) {
  const auto vocab = static_cast<std::size_t>(config_.vocab_size);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].params == nullptr) {
      throw EngineLogicError("sampler: row " + std::to_string(i) + " has no sampling params");
    }
    if (batch[i].logits.size() != vocab) {
      throw EngineLogicError("sampler: row " + std::to_string(i) + " has " +
                             std::to_string(batch[i].logits.size()) + " logits, expected " +
                             std::to_string(vocab));
    }
  }
  // Uniforms are fixed before the parallel loop: seeded rows from (seed, position), unseeded
  // random rows from the engine generator in row order. Threads then only read them.
  std::vector<double> uniforms(batch.size(), 0.0);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const SamplingParams& p = *batch[i].params;
    if (p.greedy()) continue;
    uniforms[i] = p.seed ? philox_uniform(static_cast<uint64_t>(*p.seed), RngStream::kSeededRequest,
                                          batch[i].output_ids.size())
                         : philox_uniform(config_.seed, RngStream::kEngine, engine_draws_++);
  }

  std::vector<SampleOutput> out(batch.size());
  const auto valid = static_cast<std::size_t>(config_.valid_vocab_size);
  const int threads = config_.num_threads > 0 ? config_.num_threads : omp_get_max_threads();
  const auto n = static_cast<int64_t>(batch.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] =
        sample_row(batch[static_cast<std::size_t>(i)], valid, config_.eos_token_ids,
                   uniforms[static_cast<std::size_t>(i)]);
  }
  return out;
}

}  // namespace fp4serve::engine
