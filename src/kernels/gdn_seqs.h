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
inline void check_gdn_seqs(std::span<const GdnSeqDesc> seqs, int64_t step_rows, int conv_kernel, const char* op) {
  const std::string o(op);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // (row0, rows) of the descs with rows
  std::vector<const float*> states;
  ranges.reserve(seqs.size());
  states.reserve(seqs.size());
  for (const GdnSeqDesc& s : seqs) {
    if (s.seq.rows < 0 || s.seq.row0 < 0) throw std::invalid_argument(o + ": negative rows");
    if (s.seq.rows == 0) continue;
    if (s.seq.row0 + s.seq.rows > step_rows)
      throw std::invalid_argument(o + ": a sequence's rows " + std::to_string(s.seq.row0) + " + " +
                                  std::to_string(s.seq.rows) + " exceed the step's " + std::to_string(step_rows));
    if (s.state.ssm == nullptr || (conv_kernel > 1 && s.state.conv == nullptr))
      throw std::invalid_argument(o + ": a sequence has no state");
    ranges.emplace_back(s.seq.row0, s.seq.rows);
    states.push_back(s.state.ssm);
  }
  std::sort(states.begin(), states.end());
  if (std::adjacent_find(states.begin(), states.end()) != states.end())
    throw std::invalid_argument(o + ": two sequences share a state");
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first)
      throw std::invalid_argument(o + ": two sequences share rows");
}

}  // namespace fp4serve::kernels
