#include "engine/sampler.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "engine/engine_error.h"

namespace fp4serve::engine {

Sampler::Sampler(SamplerConfig config, kernels::Backend& backend) : config_(std::move(config)), backend_(&backend) {
  if (config_.vocab_size <= 0 || config_.valid_vocab_size <= 0 ||
      config_.valid_vocab_size > config_.vocab_size) {
    throw EngineConfigError(
        "sampler: valid vocabulary size " + std::to_string(config_.valid_vocab_size) +
        " must be in [1, logits row length " + std::to_string(config_.vocab_size) + "]");
  }
  // A step's rows, and their top-N up to vLLM's default --max-logprobs; a request asking for more
  // grows the top-N storage once.
  const auto rows = static_cast<std::size_t>(std::max<int64_t>(config_.max_rows, 0));
  for (Batch* b : {&current_, &launched_batch_}) {
    b->rows.reserve(rows);
    b->results.reserve(rows);
    b->top.reserve(rows * static_cast<std::size_t>(kDefaultMaxLogprobs));
  }
}

kernels::SamplingOptions Sampler::options_for(const SamplingParams& p, std::span<const int32_t> prompt_ids) const {
  kernels::SamplingOptions o;
  o.temperature = p.temperature;
  o.top_p = p.top_p;
  o.top_k = p.top_k;
  o.min_p = p.min_p;
  o.presence_penalty = p.presence_penalty;
  o.frequency_penalty = p.frequency_penalty;
  o.repetition_penalty = p.repetition_penalty;
  if (p.seed) o.seed = static_cast<uint64_t>(*p.seed);
  o.logprobs = p.logprobs;
  o.min_tokens = p.min_tokens;
  // vLLM's all_stop_token_ids = stop_token_ids + EOS ids, whether or not ignore_eos is set.
  if (p.min_tokens > 0) {
    o.min_tokens_stop_ids = p.stop_token_ids;
    o.min_tokens_stop_ids.insert(o.min_tokens_stop_ids.end(), config_.eos_token_ids.begin(),
                                 config_.eos_token_ids.end());
  }
  // vLLM adds the bias as float32; ids that are no token are ignored (validation rejects them).
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= 0 && id <= std::numeric_limits<int32_t>::max())
      o.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  o.bad_words = p.bad_words_token_ids;
  // Validation keeps every id inside the logits row (int32); sorted and unique for the mask's walk.
  if (p.allowed_token_ids) {
    for (int64_t id : *p.allowed_token_ids) o.allowed_token_ids.push_back(static_cast<int32_t>(id));
    std::sort(o.allowed_token_ids.begin(), o.allowed_token_ids.end());
    o.allowed_token_ids.erase(std::unique(o.allowed_token_ids.begin(), o.allowed_token_ids.end()),
                              o.allowed_token_ids.end());
  }
  if (p.logprob_token_ids) {
    for (int64_t id : *p.logprob_token_ids) o.logprob_token_ids.push_back(static_cast<int32_t>(id));
  }
  if (p.thinking_token_budget) {
    o.reasoning_budget.budget = *p.thinking_token_budget;
    o.reasoning_budget.start_ids = p.reasoning_start_ids;
    o.reasoning_budget.end_ids = p.reasoning_end_ids;
    kernels::summarize_prompt(o.reasoning_budget, prompt_ids);
  }
  return o;
}

void Sampler::add_row(const kernels::SamplingOptions& options, std::span<const int32_t> prompt_ids,
                      std::span<const int32_t> output_ids) {
  kernels::SampleRow row;
  row.options = &options;
  row.prompt_ids = prompt_ids;
  row.output_ids = output_ids;
  current_.rows.push_back(row);
}

void Sampler::set_row_bitmask(std::size_t row, std::span<const int32_t> bitmask) {
  if (row >= current_.rows.size())
    throw EngineLogicError("sampler: bitmask for row " + std::to_string(row) + " of " +
                           std::to_string(current_.rows.size()));
  current_.rows[row].token_bitmask = bitmask;
}

void Sampler::lay_out(Batch& b) const {
  // Every row's top-N room, back to back; the spans are set once the storage has its size.
  std::size_t top_total = 0;
  for (const kernels::SampleRow& r : b.rows)
    top_total += static_cast<std::size_t>(r.options->top_entries(config_.valid_vocab_size));
  if (b.top.size() < top_total) b.top.resize(top_total);
  for (std::size_t i = 0, at = 0; i < b.rows.size(); ++i) {
    const auto n = static_cast<std::size_t>(b.rows[i].options->top_entries(config_.valid_vocab_size));
    b.rows[i].top = std::span<kernels::TokenLogprob>(b.top).subspan(at, n);
    at += n;
  }
  b.results.resize(b.rows.size());
}

kernels::SamplingConfig Sampler::op_config() {
  kernels::SamplingConfig op;
  op.vocab_size = config_.vocab_size;
  op.valid_vocab_size = config_.valid_vocab_size;
  op.seed = config_.seed;
  op.engine_draws = &engine_draws_;
  op.num_threads = config_.num_threads;
  return op;
}

std::vector<SampleOutput> Sampler::outputs_of(Batch& b) {
  std::vector<SampleOutput> out(b.rows.size());
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    out[i].token = b.results[i].token;
    if (b.results[i].has_logprobs) out[i].logprobs = to_sample_logprobs(b.results[i], b.rows[i].top);
  }
  b.rows.clear();
  return out;
}

std::vector<SampleOutput> Sampler::sample_step(const kernels::TensorView& logits) {
  lay_out(current_);
  try {
    backend_->sample(logits, current_.rows, op_config(), current_.results);
  } catch (...) {
    current_.rows.clear();
    throw;
  }
  return outputs_of(current_);
}

void Sampler::launch_step(const kernels::TensorView& logits) {
  if (launched_) throw EngineLogicError("sampler: launch_step while a launched step was not finished");
  lay_out(current_);
  std::swap(current_, launched_batch_);
  current_.rows.clear();
  try {
    ticket_ = backend_->sample_async(logits, launched_batch_.rows, op_config(), launched_batch_.results);
  } catch (...) {
    launched_batch_.rows.clear();
    throw;
  }
  launched_ = true;
}

std::vector<SampleOutput> Sampler::finish_step() {
  if (!launched_) throw EngineLogicError("sampler: finish_step without a launched step");
  launched_ = false;
  try {
    backend_->wait_sample(ticket_);
  } catch (...) {
    launched_batch_.rows.clear();
    throw;
  }
  return outputs_of(launched_batch_);
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
  std::vector<kernels::SamplingOptions> options;
  options.reserve(batch.size());
  for (const SampleInput& in : batch) options.push_back(options_for(*in.params, in.prompt_ids));

  // Runs of rows that follow each other in memory are one [rows, vocab] view; the runs go to the
  // op in order, so unseeded rows still take the engine generator's draws in row order.
  std::vector<SampleOutput> out;
  out.reserve(batch.size());
  for (std::size_t begin = 0; begin < batch.size();) {
    std::size_t end = begin + 1;
    while (end < batch.size() && batch[end].logits.data() == batch[end - 1].logits.data() + vocab) ++end;
    for (std::size_t i = begin; i < end; ++i) add_row(options[i], batch[i].prompt_ids, batch[i].output_ids);
    const auto view = kernels::TensorView::contiguous(batch[begin].logits.data(), DType::kF32,
                                                      {static_cast<int64_t>(end - begin), config_.vocab_size});
    for (SampleOutput& o : sample_step(view)) out.push_back(std::move(o));
    begin = end;
  }
  return out;
}

}  // namespace fp4serve::engine
