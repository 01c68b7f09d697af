// One sequence's structured-output progress: xgrammar's matcher over the tokens generated under the
// constraint, and the mask of the tokens allowed next (xgrammar's bitmask: bit t of word t / 32 set
// when token t may follow).
//
// The constraint starts where the reasoning ends (vLLM's structured_output_request.reasoning_ended):
// at once when there are no reasoning markers or the prompt does not end inside a reasoning block,
// else right after the first end marker in the output. The reasoning itself is never masked.
//
// The engine calls advance() after every step with the sequence's whole output; it feeds the matcher
// the tokens it has not seen and computes the next mask at once, so a dead end (a state from which no
// token of the vocabulary continues the grammar) is found before the next step is scheduled and the
// sequence is finished instead of sampled from an empty distribution. Verify rows of speculative
// decoding get their masks from the same matcher, advanced over the drafts and rolled back.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace xgrammar {
class CompiledGrammar;
class GrammarMatcher;
}  // namespace xgrammar

namespace fp4serve::engine {

// Words of a bitmask over `vocab` tokens.
inline std::size_t bitmask_words(std::int64_t vocab) { return static_cast<std::size_t>((vocab + 31) / 32); }

class StructuredOutputState {
 public:
  enum class Progress {
    kOk,        // accepted; mask() holds the next token's mask when constrained()
    kRejected,  // a token outside the grammar reached the matcher (a bug upstream, or ignore_eos)
    kDeadEnd,   // the grammar is not complete and no token can continue it
  };

  // `reasoning_end_ids` empty or `prompt_in_reasoning` false: constrained from the first token.
  // `token_filter` (may be null): tokens never allowed whatever the grammar says have their bit
  // clear (CompiledConstraint::token_filter).
  StructuredOutputState(std::shared_ptr<const xgrammar::CompiledGrammar> grammar, std::int64_t logits_size,
                        std::vector<std::int32_t> reasoning_end_ids, bool prompt_in_reasoning,
                        std::shared_ptr<const std::vector<std::int32_t>> token_filter = nullptr);
  ~StructuredOutputState();
  StructuredOutputState(const StructuredOutputState&) = delete;
  StructuredOutputState& operator=(const StructuredOutputState&) = delete;

  // Feeds the tokens of `output_ids` past those already seen (the whole output so far).
  Progress advance(std::span<const std::int32_t> output_ids);

  // The next token is masked: the reasoning has ended and the grammar has not accepted its stop token.
  bool constrained() const;
  // The mask for the next token (valid while constrained()).
  std::span<const std::int32_t> mask() const { return mask_; }

  // Verify rows: the mask of the token after output_ids + drafts into `out`, with the matcher
  // advanced over the drafts and rolled back. Returns false when that row is unconstrained (still
  // reasoning, or the grammar terminated) -- `out` is then untouched.
  bool mask_after(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts,
                  std::span<std::int32_t> out);
  // How many leading drafts the grammar accepts, each leaving a state that can continue (vLLM's
  // validate_tokens): the engine cuts the rest before they are scheduled.
  std::size_t valid_draft_prefix(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts);

  std::size_t tokens_seen() const { return seen_; }

 private:
  // Whether output_ids followed by the first `drafts_seen` drafts ends with the reasoning end marker
  // (read across the two spans: the step path never concatenates them).
  bool ends_reasoning(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts,
                      std::size_t drafts_seen) const;
  bool fill(std::span<std::int32_t> out);  // false when no token is allowed
  // Feeds the drafts after output_ids to the matcher, as advance() would, calling visit(started)
  // after each one it takes (false from visit stops the walk); returns whether the walk ended past
  // the reasoning, and leaves the matcher advanced by `accepted` tokens for the caller to roll back.
  struct DraftWalk {
    bool started = false;
    int accepted = 0;
  };
  template <class Visit>
  DraftWalk walk_drafts(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts, Visit visit);

  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
  std::shared_ptr<const std::vector<std::int32_t>> filter_;
  std::int64_t logits_size_;
  std::vector<std::int32_t> end_ids_;
  bool started_;
  std::size_t seen_ = 0;
  std::vector<std::int32_t> mask_;
  std::vector<std::int32_t> scratch_;  // valid_draft_prefix's dead-end probe, sized once
};

}  // namespace fp4serve::engine
