// The cost of structured output beside the forward pass, for `fp4serve bench model
// --structured-schema FILE`: per decode step at batch B, (a) the engine thread's grammar work -- each
// of B sequences' matcher takes one token and fills its next mask over the model's whole logits row
// (StructuredOutputState::advance) -- and (b) what the mask adds to the sampling op (the same B logits
// rows sampled with and without the masks). The tokens are a real document: FILE holds {"schema": ...,
// "instance": ...}; the instance is tokenized with the real tokenizer and each sequence replays it from
// its own offset (so the B matchers sit in different states), starting over when it ends, as a model
// that writes valid JSON would drive the grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace fp4serve::tokenizer {
class Tokenizer;
}

namespace fp4serve::tools::bench {

struct StructuredCost {
  double mask_ms_per_step = 0;        // (a)
  double sample_ms_per_step = 0;      // the op on B rows without masks
  double sample_masked_ms_per_step = 0;  // the op on the same rows with masks
  double extra_ms_per_step() const { return mask_ms_per_step + (sample_masked_ms_per_step - sample_ms_per_step); }
};

class StructuredBench {
 public:
  // Loads FILE, compiles the schema against the tokenizer's vocabulary (logits rows of logits_size).
  StructuredBench(const std::string& file, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                  std::int64_t logits_size, std::vector<std::int32_t> stop_token_ids);
  ~StructuredBench();

  double compile_seconds() const { return compile_seconds_; }
  std::size_t instance_tokens() const { return instance_.size(); }

  // `steps` steps of B sequences; `logits` is B rows of logits_size (sampled, never changed).
  StructuredCost measure(int batch, int steps, std::span<float> logits, kernels::Backend& backend);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::int32_t> instance_;
  double compile_seconds_ = 0;
  std::int64_t logits_size_;
  std::int64_t valid_vocab_;
};

}  // namespace fp4serve::tools::bench
