// The checks every backend's gdn_sequences makes on its descriptors (backend.h's contract), so the
// backends reject the same calls with the same messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace fp4serve::kernels {

// Throws std::invalid_argument naming `op` unless every desc with rows lies inside the step's
// `step_rows` rows and has a state, and no two such descs share a state or a row (they run
// concurrently: a shared state or row would be a race). Descs without rows are ignored.
// A thread's reusable scratch vector: cleared, with room for `n` (at least 256) entries, so that once a
// thread has seen its largest call a step allocates nothing (tests/unit/engine/step_allocation_test).
template <class T>
std::vector<T>& gdn_thread_scratch(std::size_t n) {
  static thread_local std::vector<T> v;
  v.clear();
  if (v.capacity() < n) v.reserve(std::max<std::size_t>(n, 256));
  return v;
}

// Throws std::invalid_argument naming `op` unless every desc with rows lies inside the step's
// `step_rows` rows and has a state, and no two such descs share a state or a row (they run
// concurrently: a shared state or row would be a race). Descs without rows are ignored.
inline void check_gdn_seqs(std::span<const GdnSeqDesc> seqs, int64_t step_rows, int conv_kernel, const char* op) {
  auto fail = [op](const std::string& why) { throw std::invalid_argument(std::string(op) + ": " + why); };
  // (row0, rows) and the states of the descs with rows.
  auto& ranges = gdn_thread_scratch<std::pair<int64_t, int64_t>>(seqs.size());
  auto& states = gdn_thread_scratch<const float*>(seqs.size());
  for (const GdnSeqDesc& s : seqs) {
    if (s.seq.rows < 0 || s.seq.row0 < 0) fail("negative rows");
    if (s.seq.rows == 0) continue;
    if (s.seq.row0 + s.seq.rows > step_rows)
      fail("a sequence's rows " + std::to_string(s.seq.row0) + " + " + std::to_string(s.seq.rows) +
           " exceed the step's " + std::to_string(step_rows));
    if (s.state.ssm == nullptr || (conv_kernel > 1 && s.state.conv == nullptr)) fail("a sequence has no state");
    ranges.emplace_back(s.seq.row0, s.seq.rows);
    states.push_back(s.state.ssm);
  }
  std::sort(states.begin(), states.end());
  if (std::adjacent_find(states.begin(), states.end()) != states.end()) fail("two sequences share a state");
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first) fail("two sequences share rows");
}

}  // namespace fp4serve::kernels
