#include "engine/drafter.h"

#include <algorithm>

#include "engine/request.h"

namespace fp4serve::engine {

void propose_drafts(Drafter& drafter, int max_tokens, std::int64_t vocab_size, std::span<Request* const> running) {
  for (Request* r : running) {
    r->draft_token_ids.clear();
    if (max_tokens <= 0 || r->num_computed_tokens != r->num_tokens() - 1) continue;  // prefill left: no drafts
    drafter.propose(DraftRequest{r->id(), r->prompt_token_ids(), r->output_token_ids()}, max_tokens,
                    r->draft_token_ids);
    auto& d = r->draft_token_ids;
    const auto bad = std::find_if(d.begin(), d.end(), [&](std::int32_t t) { return t < 0 || t >= vocab_size; });
    d.erase(bad, d.end());
    if (static_cast<int>(d.size()) > max_tokens) d.resize(static_cast<std::size_t>(max_tokens));
  }
}

void Drafter::propose_step(const SchedulerOutput&, int max_tokens, std::int64_t vocab_size,
                           std::span<Request* const> running) {
  propose_drafts(*this, max_tokens, vocab_size, running);
}

}  // namespace fp4serve::engine
