// The engine's per-step side of structured output: the grammar bitmask of every logits row of a
// constrained sequence, and the drafts cut to what the grammar accepts before they are verified.
//
// Row 0 of a request is the token after its output so far: its mask is the one the sequence's state
// computed when it last advanced (StructuredOutputState::mask). Row j > 0 of a verify step follows
// j drafts: the matcher is advanced over them, the mask filled into scratch kept here, and rolled
// back. The masks are a function of the sequence's own tokens only, so a row's mask, like the rest
// of its sampling, never depends on the batch.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/scheduler_output.h"

namespace fp4serve::engine {

class Request;
class Sampler;
class StepSampling;
class StructuredOutputState;

class StructuredRows {
 public:
  using StateOf = std::function<StructuredOutputState*(const Request&)>;  // null: unconstrained

  // After StepSampling::add_rows and before Sampler::sample_step: sets the bitmask of every row of
  // a constrained request. The masks stay valid until the next call.
  void apply(const SchedulerOutput& step, const StepSampling& rows, Sampler& sampler, const StateOf& state_of,
             std::int64_t logits_size);

  // After the drafter proposed: each constrained request keeps only the drafts its grammar accepts
  // (vLLM validate_tokens), so a verify row never follows a token the grammar refuses.
  static void cut_drafts(std::span<Request* const> running, const StateOf& state_of);

 private:
  std::vector<std::int32_t> scratch_;
};

}  // namespace fp4serve::engine
