#include "engine/structured/structured_output_state.h"

#include <algorithm>

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

namespace fp4serve::engine {

namespace {

// xgrammar takes the mask as a 1-D int32 DLTensor on the host.
DLTensor bitmask_tensor(std::span<std::int32_t> words, std::int64_t* shape) {
  shape[0] = static_cast<std::int64_t>(words.size());
  DLTensor t{};
  t.data = words.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

}  // namespace

StructuredOutputState::StructuredOutputState(std::shared_ptr<const xgrammar::CompiledGrammar> grammar,
                                             std::int64_t logits_size, std::vector<std::int32_t> reasoning_end_ids,
                                             bool prompt_in_reasoning,
                                             std::shared_ptr<const std::vector<std::int32_t>> token_filter)
    : matcher_(std::make_unique<xgrammar::GrammarMatcher>(*grammar)),
      filter_(std::move(token_filter)),
      logits_size_(logits_size),
      end_ids_(std::move(reasoning_end_ids)),
      started_(end_ids_.empty() || !prompt_in_reasoning),
      mask_(bitmask_words(logits_size)) {
  if (started_) fill(mask_);
}

StructuredOutputState::~StructuredOutputState() = default;

bool StructuredOutputState::constrained() const { return started_ && !matcher_->IsTerminated(); }

bool StructuredOutputState::ends_reasoning(std::span<const std::int32_t> output_ids,
                                           std::span<const std::int32_t> drafts, std::size_t drafts_seen) const {
  const std::size_t end = output_ids.size() + drafts_seen;
  if (end < end_ids_.size()) return false;
  for (std::size_t k = 0; k < end_ids_.size(); ++k) {
    const std::size_t at = end - end_ids_.size() + k;
    const std::int32_t id = at < output_ids.size() ? output_ids[at] : drafts[at - output_ids.size()];
    if (id != end_ids_[k]) return false;
  }
  return true;
}

bool StructuredOutputState::fill(std::span<std::int32_t> out) {
  std::int64_t shape[1];
  DLTensor t = bitmask_tensor(out, shape);
  matcher_->FillNextTokenBitmask(&t);
  if (filter_) {
    for (std::size_t w = 0; w < out.size(); ++w) out[w] &= (*filter_)[w];
  }
  return std::any_of(out.begin(), out.end(), [](std::int32_t w) { return w != 0; });
}

StructuredOutputState::Progress StructuredOutputState::advance(std::span<const std::int32_t> output_ids) {
  for (; seen_ < output_ids.size(); ++seen_) {
    if (!started_) {
      started_ = ends_reasoning(output_ids.first(seen_ + 1), {}, 0);
      continue;
    }
    if (matcher_->IsTerminated()) continue;  // ignore_eos: the grammar is done, the rest is free
    if (!matcher_->AcceptToken(output_ids[seen_])) {
      ++seen_;
      return Progress::kRejected;
    }
  }
  if (constrained() && !fill(mask_)) return Progress::kDeadEnd;
  return Progress::kOk;
}

template <class Visit>
StructuredOutputState::DraftWalk StructuredOutputState::walk_drafts(std::span<const std::int32_t> output_ids,
                                                                    std::span<const std::int32_t> drafts, Visit visit) {
  DraftWalk walk{started_, 0};
  for (std::size_t k = 0; k < drafts.size(); ++k) {
    if (!walk.started) {
      walk.started = ends_reasoning(output_ids, drafts, k + 1);
      if (!visit(false)) break;
      continue;
    }
    if (matcher_->IsTerminated() || !matcher_->AcceptToken(drafts[k])) break;
    ++walk.accepted;
    if (!visit(true)) break;
  }
  return walk;
}

bool StructuredOutputState::mask_after(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts,
                                       std::span<std::int32_t> out) {
  // The row sees output_ids + drafts; drafts are always accepted by valid_draft_prefix beforehand.
  const DraftWalk walk = walk_drafts(output_ids, drafts, [](bool) { return true; });
  const bool masked = walk.started && !matcher_->IsTerminated();
  if (masked) fill(out);
  if (walk.accepted > 0) matcher_->Rollback(walk.accepted);
  return masked;
}

std::size_t StructuredOutputState::valid_draft_prefix(std::span<const std::int32_t> output_ids,
                                                      std::span<const std::int32_t> drafts) {
  if (scratch_.size() != mask_.size()) scratch_.resize(mask_.size());
  std::size_t valid = 0;
  const DraftWalk walk = walk_drafts(output_ids, drafts, [&](bool matched) {
    // A draft after which no token can continue the grammar would dead-end: cut it and the rest.
    if (matched && !matcher_->IsTerminated() && !fill(scratch_)) return false;
    ++valid;
    return true;
  });
  if (walk.accepted > 0) matcher_->Rollback(walk.accepted);
  return valid;
}

}  // namespace fp4serve::engine
