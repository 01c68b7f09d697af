#include "kernels/cpu/sampling_cpu.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/sampling_processors.h"
#include "kernels/cpu/sampling_rng.h"
#include "kernels/cpu/sampling_selection.h"
#include "kernels/cpu/thread_pool.h"

namespace fp4serve::kernels::cpu {

namespace {

// Per-thread scratch, kept across calls so a step allocates nothing once warm.
struct Workspace {
  LogitsEditLog edits;
  std::vector<float> unmasked;  // the row before its grammar bitmask, put back at the end
  PenaltyScratch penalties;
  SelectionScratch selection;
  std::size_t reserved_vocab = 0;

  void reserve(std::size_t vocab) {
    if (vocab <= reserved_vocab) return;
    edits.reserve(vocab);
    penalties.reserve(vocab);
    selection.reserve(vocab);
    unmasked.reserve(vocab);
    reserved_vocab = vocab;
  }
};

Workspace& thread_workspace(std::size_t vocab) {
  thread_local Workspace ws;
  ws.reserve(vocab);
  return ws;
}

// The calling thread's uniforms, one per row of the call.
std::span<double> call_uniforms(std::size_t rows) {
  thread_local std::vector<double> uniforms;
  if (uniforms.size() < rows) uniforms.resize(rows);
  return std::span<double>(uniforms).first(rows);
}

SampleResult sample_row(float* logits, const SampleRow& in, std::size_t vocab, std::size_t valid_vocab, double uniform,
                        Workspace& ws) {
  const SamplingOptions& o = *in.options;
  const std::span<float> row(logits, valid_vocab);
  // The grammar bitmask first: the processors and the logprobs see the masked row. One copy of the
  // row puts it back afterwards (cheaper than logging up to every token as an edit).
  const bool masked = !in.token_bitmask.empty();
  if (masked) {
    ws.unmasked.assign(row.begin(), row.end());
    apply_token_bitmask(row, in.token_bitmask);
  }

  // Processors that can change the argmax, on the raw logits (vLLM apply_logits_processors).
  apply_allowed_token_ids(row, o, ws.edits);
  apply_bad_words(row, o, in.output_ids, ws.edits);
  apply_min_tokens(row, o, in.output_ids.size(), ws.edits);
  apply_logit_bias(row, o, ws.edits);
  apply_penalties(row, o, in.prompt_ids, in.output_ids, ws.penalties, ws.edits);
  apply_reasoning_budget(row, o, in.output_ids, ws.edits);

  int32_t token;
  if (o.greedy()) {
    token = argmax_first(row);
  } else {
    const RandomFilter filter{static_cast<float>(o.temperature), o.top_k, o.top_p, o.min_p};
    token = draw_candidate(select_candidates(row, filter, ws.selection), uniform);
  }
  ws.edits.undo(row);

  SampleResult out;
  out.token = token;
  if (!o.logprob_token_ids.empty())
    out = host_token_logprobs_of_ids(std::span<const float>(logits, vocab), valid_vocab, token, o.logprob_token_ids,
                                     in.top);
  else if (o.logprobs)
    out = host_token_logprobs(row, token, o.top_entries(static_cast<int64_t>(valid_vocab)), in.top);
  if (masked) std::copy(ws.unmasked.begin(), ws.unmasked.end(), row.begin());
  return out;
}

}  // namespace

void check_sample_call(std::span<const SampleRow> rows, const SamplingConfig& config, std::span<SampleResult> out) {
  if (config.vocab_size <= 0 || config.valid_vocab_size <= 0 || config.valid_vocab_size > config.vocab_size)
    throw std::invalid_argument("sample: valid vocabulary size " + std::to_string(config.valid_vocab_size) +
                                " must be in [1, logits row length " + std::to_string(config.vocab_size) + "]");
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SampleRow& r = rows[i];
    if (r.options == nullptr) throw std::invalid_argument("sample: row " + std::to_string(i) + " has no options");
    const int64_t need = r.options->top_entries(config.valid_vocab_size);
    if (static_cast<int64_t>(r.top.size()) < need)
      throw std::invalid_argument("sample: row " + std::to_string(i) + " asks for " + std::to_string(need) +
                                  " top logprobs but has room for " + std::to_string(r.top.size()));
    for (int32_t id : r.options->logprob_token_ids) {
      if (id < 0 || id >= config.vocab_size)
        throw std::invalid_argument("sample: row " + std::to_string(i) + " asks for the logprob of id " +
                                    std::to_string(id) + ", outside the logits row");
    }
    if (!r.token_bitmask.empty() && static_cast<int64_t>(r.token_bitmask.size()) * 32 < config.vocab_size)
      throw std::invalid_argument("sample: row " + std::to_string(i) + " has a token bitmask of " +
                                  std::to_string(r.token_bitmask.size()) + " words, short of the logits row");
    if (!r.options->greedy() && !r.options->seed && config.engine_draws == nullptr)
      throw std::invalid_argument("sample: an unseeded random row needs the engine generator's counter");
  }
}

void sample_rows(float* logits, int64_t row_stride, std::span<const SampleRow> rows, const SamplingConfig& config,
                 std::span<SampleResult> out) {
  check_sample_call(rows, config, out);
  if (row_stride < config.vocab_size) throw std::invalid_argument("sample: rows overlap (stride below the row length)");
  // Uniforms are fixed before the parallel loop: seeded rows from (seed, position), unseeded
  // random rows from the engine generator in row order. Threads then only read them.
  const std::span<double> uniforms = call_uniforms(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SamplingOptions& o = *rows[i].options;
    uniforms[i] = o.greedy() ? 0.0
                  : o.seed   ? philox_uniform(*o.seed, RngStream::kSeededRequest, rows[i].output_ids.size())
                             : philox_uniform(config.seed, RngStream::kEngine, (*config.engine_draws)++);
  }

  const auto vocab = static_cast<std::size_t>(config.vocab_size);
  const auto valid = static_cast<std::size_t>(config.valid_vocab_size);
  const int threads = config.num_threads > 0 ? config.num_threads : num_threads();
  const auto n = static_cast<int64_t>(rows.size());
#pragma omp parallel num_threads(threads) if (n > 1)
  {
    // Every thread of the team reserves its scratch, whether or not it gets a row this time, so
    // the first call warms them all.
    Workspace& ws = thread_workspace(valid);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      const auto r = static_cast<std::size_t>(i);
      out[r] = sample_row(logits + i * row_stride, rows[r], vocab, valid, uniforms[r], ws);
    }
  }
}

}  // namespace fp4serve::kernels::cpu
