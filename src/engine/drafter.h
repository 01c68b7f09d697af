// The proposer seam of speculative decoding (vLLM's proposers under v1/spec_decode/: ngram, EAGLE,
// MTP): after each step the engine asks the drafter, for every running request in decode, for up to
// num_speculative_tokens tokens that might follow; the next step verifies them (step_sampling.h).
// What the drafter proposes never changes the output, only how many tokens a step yields, so a
// drafter may be wrong, slow to warm up or return nothing.
//
// No real drafter exists yet (MTP, which needs the model's hidden states, is a later issue); tests use
// fake ones that propose known tokens. Without a drafter the engine never schedules drafts and behaves
// exactly as before.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace fp4serve::engine {

class Request;

// What a drafter sees of a request.
struct DraftRequest {
  std::string_view request_id;                      // the scheduler's id ("<index>_<id>" for n > 1 children)
  std::span<const std::int32_t> prompt_token_ids;
  std::span<const std::int32_t> output_token_ids;   // generated so far; the drafts would follow these
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends up to max_tokens proposed token ids to `out` (empty on entry). Called on the engine thread.
  virtual void propose(const DraftRequest& request, int max_tokens, std::vector<std::int32_t>& out) = 0;
};

// Fills draft_token_ids of each running request in decode (its next step runs only its last token)
// with the drafter's proposal, cut at the first id outside [0, vocab_size) -- a drafter bug must not
// fail the step -- and at max_tokens. Other requests' drafts are cleared.
void propose_drafts(Drafter& drafter, int max_tokens, std::int64_t vocab_size, std::span<Request* const> running);

}  // namespace fp4serve::engine
