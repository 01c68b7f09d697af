#include "kernels/reasoning_budget.h"

#include <algorithm>

namespace fp4serve::kernels {

namespace {

// Whether `marker` ends right before index `end` of `ids`.
bool ends_at(std::span<const int32_t> ids, std::size_t end, const std::vector<int32_t>& marker) {
  if (marker.empty() || end < marker.size()) return false;
  return std::equal(marker.begin(), marker.end(), ids.begin() + static_cast<std::ptrdiff_t>(end - marker.size()));
}

enum class Marker { kNone, kStart, kEnd };

struct LastMarker {
  Marker kind = Marker::kNone;
  std::size_t end = 0;  // index just past it
};

// The marker that ends last in `ids`, scanning back from the end: the cost is the distance to it.
LastMarker last_marker(std::span<const int32_t> ids, const ReasoningBudget& b) {
  for (std::size_t end = ids.size(); end > 0; --end) {
    // An end marker wins a tie: a block that both opens and closes here is closed.
    if (ends_at(ids, end, b.end_ids)) return {Marker::kEnd, end};
    if (ends_at(ids, end, b.start_ids)) return {Marker::kStart, end};
  }
  return {};
}

}  // namespace

void summarize_prompt(ReasoningBudget& b, std::span<const int32_t> prompt_ids) {
  const LastMarker m = last_marker(prompt_ids, b);
  b.prompt_in_block = m.kind == Marker::kStart;
  b.prompt_block_tokens = b.prompt_in_block ? static_cast<int64_t>(prompt_ids.size() - m.end) : 0;
}

std::optional<int32_t> forced_reasoning_token(const ReasoningBudget& b, std::span<const int32_t> output_ids) {
  if (!b.active()) return std::nullopt;
  const LastMarker m = last_marker(output_ids, b);
  int64_t before_output = 0;  // block tokens that are not in the output (the prompt's)
  int64_t in_output = 0;      // block tokens in the output
  switch (m.kind) {
    case Marker::kEnd:
      return std::nullopt;
    case Marker::kStart:
      in_output = static_cast<int64_t>(output_ids.size() - m.end);
      break;
    case Marker::kNone:
      if (!b.prompt_in_block) return std::nullopt;
      before_output = b.prompt_block_tokens;
      in_output = static_cast<int64_t>(output_ids.size());
      break;
  }
  // The end marker is forced from the first output token at which the block holds `budget` tokens
  // (at once when the prompt already held that many); `out` of its tokens are out so far.
  const int64_t forcing_from = std::max<int64_t>(0, b.budget - before_output);
  const int64_t out = in_output - forcing_from;
  if (out < 0 || out >= static_cast<int64_t>(b.end_ids.size())) return std::nullopt;
  return b.end_ids[static_cast<std::size_t>(out)];
}

}  // namespace fp4serve::kernels
