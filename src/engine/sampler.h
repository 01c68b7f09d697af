// The engine's side of the backend's sampling op (kernels/sampling.h, Backend::sample): one token
// (and, when asked, its logprobs) per logits row, with vLLM V1's semantics and order; the op's
// header states them, and the numerics every backend is held to.
//
// What stays here: turning a request's SamplingParams into the op's options once, when it is
// admitted (options_for: the model's EOS ids join the min_tokens stop ids); per step, filling the
// op's rows in storage reserved at construction (add_row, then sample_step on the logits view the
// model returned, in the model's device memory); and turning the op's results into SampleOutput.
// The engine generator for unseeded rows (SamplerConfig::seed) and its counter live here.
//
// sample() takes rows in separate host buffers with their params, converting them per call (tests
// and tools); rows adjacent in memory go to the op together.
//
// Threading: a Sampler is used by one thread (the engine thread); the op runs rows in parallel.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampling_params.h"
#include "kernels/backend.h"

namespace fp4serve::engine {

struct SamplerConfig {
  int64_t vocab_size = 0;        // length of a logits row (lm_head rows: 248320 for Qwen3.6)
  int64_t valid_vocab_size = 0;  // ids that are tokens (tokenizer size: 248077); 1..vocab_size
  std::vector<int64_t> eos_token_ids;  // generation_config EOS ids, masked under min_tokens
  uint64_t seed = 0;                   // engine generator, for requests without a seed
  int num_threads = 0;                 // rows sampled in parallel; 0 = the backend's default
  int64_t max_rows = 0;                // logits rows of one step, reserved at construction
};

struct SampleInput {
  // The row, vocab_size floats. Edited during the call (sparse edits for bias and penalties) and
  // restored before the call returns.
  std::span<float> logits;
  const SamplingParams* params = nullptr;  // prepared by prepare_sampling_params
  std::span<const int32_t> prompt_ids;
  std::span<const int32_t> output_ids;  // tokens generated so far; its size is the step index
};

struct SampleOutput {
  int32_t token = -1;
  std::optional<SampleLogprobs> logprobs;  // set when the request asked for logprobs
};

class Sampler {
 public:
  // Throws EngineConfigError for an impossible vocabulary. `backend` runs the op and must outlive
  // the sampler.
  explicit Sampler(SamplerConfig config, kernels::Backend& backend = kernels::default_backend());

  // The op's options for a sequence with these (prepared) params and prompt; made once, at
  // admission (the prompt only matters to a thinking budget: where its reasoning block stands).
  kernels::SamplingOptions options_for(const SamplingParams& params, std::span<const int32_t> prompt_ids = {}) const;

  // One step: add_row() once per logits row, in the rows' order, then sample_step() with the
  // [rows, vocab_size] logits view. `options` and the id spans must stay valid until then.
  void add_row(const kernels::SamplingOptions& options, std::span<const int32_t> prompt_ids,
               std::span<const int32_t> output_ids);
  std::vector<SampleOutput> sample_step(const kernels::TensorView& logits);
  // sample_step in two halves (async scheduling): launch_step enqueues the op on the added rows
  // (Backend::sample_async) and returns; finish_step waits for it and returns the outputs. Between
  // them the logits and the rows' option and id spans must stay unchanged, and new rows may be added
  // and sampled with sample_step (they use their own storage); one launch at a time
  // (EngineLogicError otherwise). The engine draws of unseeded rows are taken at launch.
  void launch_step(const kernels::TensorView& logits);
  std::vector<SampleOutput> finish_step();
  bool launched() const { return launched_; }
  // Structured output: the grammar bitmask of the row-th row added since the last sample_step
  // (kernels::SampleRow::token_bitmask); it must stay valid until then. EngineLogicError for a row
  // not added yet.
  void set_row_bitmask(std::size_t row, std::span<const int32_t> bitmask);
  std::size_t pending_rows() const { return current_.rows.size(); }

  // One output per input, in order. Throws EngineLogicError (before sampling anything) for a row
  // of the wrong length or a missing params pointer.
  std::vector<SampleOutput> sample(std::span<const SampleInput> batch);

  void set_num_threads(int num_threads) { config_.num_threads = num_threads; }
  const SamplerConfig& config() const { return config_; }
  // Draws the engine generator has handed out so far (unseeded random rows).
  uint64_t engine_draws() const { return engine_draws_; }

 private:
  SamplerConfig config_;
  kernels::Backend* backend_;
  uint64_t engine_draws_ = 0;
  // A step's rows, their results and top-N entries (back to back); `current_` is being filled by
  // add_row, `launched_batch_` is the launched one (swapped, so both keep their reserved storage).
  struct Batch {
    std::vector<kernels::SampleRow> rows;
    std::vector<kernels::SampleResult> results;  // one per row
    std::vector<kernels::TokenLogprob> top;
  };
  kernels::SamplingConfig op_config();
  // Sizes the batch's results and top-N room and points each row's `top` into it.
  void lay_out(Batch& b) const;
  static std::vector<SampleOutput> outputs_of(Batch& b);
  Batch current_;
  Batch launched_batch_;
  kernels::Backend::SampleTicket ticket_;
  bool launched_ = false;
};

}  // namespace fp4serve::engine
