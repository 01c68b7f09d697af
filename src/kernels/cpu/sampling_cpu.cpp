#include "kernels/cpu/sampling_cpu.h"

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
  PenaltyScratch penalties;
  SelectionScratch selection;
  std::size_t reserved_vocab = 0;

  void reserve(std::size_t vocab) {
    if (vocab <= reserved_vocab) return;
    edits.reserve(vocab);
    penalties.reserve(vocab);
    selection.reserve(vocab);
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

SampleResult sample_row(float* logits, const SampleRow& in, std::size_t valid_vocab, double uniform, Workspace& ws) {
  const SamplingOptions& o = *in.options;
  const std::span<float> row(logits, valid_vocab);

  // Processors that can change the argmax, on the raw logits (vLLM apply_logits_processors).
  apply_bad_words(row, o, in.output_ids, ws.edits);
  apply_min_tokens(row, o, in.output_ids.size(), ws.edits);
  apply_logit_bias(row, o, ws.edits);
  apply_penalties(row, o, in.prompt_ids, in.output_ids, ws.penalties, ws.edits);

  int32_t token;
  if (o.greedy()) {
    token = argmax_first(row);
  } else {
    const RandomFilter filter{static_cast<float>(o.temperature), o.top_k, o.top_p, o.min_p};
    token = draw_candidate(select_candidates(row, filter, ws.selection), uniform);
  }
  ws.edits.undo(row);

  if (!o.logprobs) {
    SampleResult out;
    out.token = token;
    return out;
  }
  return host_token_logprobs(row, token, o.top_entries(static_cast<int64_t>(valid_vocab)), in.top);
}

void check_call(std::span<const SampleRow> rows, const SamplingConfig& config, std::span<SampleResult> out) {
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
    if (!r.options->greedy() && !r.options->seed && config.engine_draws == nullptr)
      throw std::invalid_argument("sample: an unseeded random row needs the engine generator's counter");
  }
}

}  // namespace

void sample_rows(float* logits, int64_t row_stride, std::span<const SampleRow> rows, const SamplingConfig& config,
                 std::span<SampleResult> out) {
  check_call(rows, config, out);
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
      out[r] = sample_row(logits + i * row_stride, rows[r], valid, uniforms[r], ws);
    }
  }
}

}  // namespace fp4serve::kernels::cpu
