// The proposer seam of speculative decoding (vLLM's proposers under v1/spec_decode/: ngram, EAGLE,
// MTP): after each step the engine asks the drafter, for every running request in decode, for up to
// num_speculative_tokens tokens that might follow; the next step verifies them (step_sampling.h).
// What the drafter proposes never changes the output, only how many tokens a step yields, so a
// drafter may be wrong, slow to warm up or return nothing.
//
// The real drafter is the checkpoint's MTP layer (mtp_drafter.h), which needs the step the engine has
// just run (the target's hidden states) and so overrides propose_step; tests also use fake ones that
// propose known tokens through propose(). Without a drafter the engine never schedules drafts and
// behaves exactly as before.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace fp4serve::engine {

class Request;
struct SchedulerOutput;

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
  // The engine's call after each step, once the scheduler has taken the step's tokens (accepted
  // drafts, rollbacks) and before the next schedule(): fills draft_token_ids of the running requests.
  // `step` is the step just run (its ScheduledRequest::request pointers may name requests that have
  // finished since: only those in `running` may be dereferenced). The default is propose_drafts.
  virtual void propose_step(const SchedulerOutput& step, int max_tokens, std::int64_t vocab_size,
                            std::span<Request* const> running);
};

// Fills draft_token_ids of each running request in decode (its next step runs only its last token)
// with the drafter's proposal, cut at the first id outside [0, vocab_size) -- a drafter bug must not
// fail the step -- and at max_tokens. Other requests' drafts are cleared.
void propose_drafts(Drafter& drafter, int max_tokens, std::int64_t vocab_size, std::span<Request* const> running);

}  // namespace fp4serve::engine
