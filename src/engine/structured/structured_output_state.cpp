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

bool StructuredOutputState::ends_reasoning(std::span<const std::int32_t> ids, std::size_t end) const {
  if (end < end_ids_.size()) return false;
  return std::equal(end_ids_.begin(), end_ids_.end(), ids.begin() + static_cast<std::ptrdiff_t>(end - end_ids_.size()));
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
      started_ = ends_reasoning(output_ids, seen_ + 1);
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

bool StructuredOutputState::mask_after(std::span<const std::int32_t> output_ids, std::span<const std::int32_t> drafts,
                                       std::span<std::int32_t> out) {
  // The row sees output_ids + drafts; drafts are always accepted by valid_draft_prefix beforehand.
  std::vector<std::int32_t> all(output_ids.begin(), output_ids.end());
  bool started = started_;
  int accepted = 0;
  for (std::int32_t d : drafts) {
    all.push_back(d);
    if (!started) {
      started = ends_reasoning(all, all.size());
      continue;
    }
    if (matcher_->IsTerminated() || !matcher_->AcceptToken(d)) break;
    ++accepted;
  }
  const bool masked = started && !matcher_->IsTerminated();
  if (masked) fill(out);
  if (accepted > 0) matcher_->Rollback(accepted);
  return masked;
}

std::size_t StructuredOutputState::valid_draft_prefix(std::span<const std::int32_t> output_ids,
                                                      std::span<const std::int32_t> drafts) {
  std::vector<std::int32_t> all(output_ids.begin(), output_ids.end());
  std::vector<std::int32_t> scratch(mask_.size());
  bool started = started_;
  int accepted = 0;
  std::size_t valid = 0;
  for (std::int32_t d : drafts) {
    all.push_back(d);
    if (!started) {
      started = ends_reasoning(all, all.size());
      ++valid;
      continue;
    }
    if (matcher_->IsTerminated() || !matcher_->AcceptToken(d)) break;
    ++accepted;
    if (!matcher_->IsTerminated() && !fill(scratch)) break;  // would dead-end: cut here
    ++valid;
  }
  if (accepted > 0) matcher_->Rollback(accepted);
  return valid;
}

}  // namespace fp4serve::engine
