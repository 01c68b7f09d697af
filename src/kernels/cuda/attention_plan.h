// Host-side planning of attention on CUDA: which thread blocks compute which (query, key chunk), and
// where the split path keeps its partial results. Plain C++ (no CUDA): the kernels read the structs
// below, the CPU tests check the plans.
//
// The arithmetic every query (token t, q head h) goes through, whatever its path (attention_kernels.cuh):
//   keys 0 .. n-1 (n = pos0 + t + 1 causal, the segment's rows dense) in chunks of kChunkKeys keys
//   aligned to absolute key positions; per chunk c: scores s_j, m_c = max s_j,
//   l_c = sum exp(s_j - m_c) (lane-strided, then the warp's halving tree); (M, l) = the fold of the
//   chunks' (m_c, l_c) in ascending c from (-inf, 0); then per chunk o_c = fma chain over j of
//   p_j V_j (p_j from M and l); o = the fold 0 + o_0 + o_1 + ... in ascending c.
// Two paths do exactly that, so a query's bits do not depend on which one ran it (batch invariance):
//   fused  one block folds every chunk of its queries itself (prefill, and any sequence the split
//          budget does not cover);
//   split  one block per (queries, chunk) writes the chunk's scores and (m_c, l_c), then one per
//          (queries, chunk) folds those and writes o_c from the stored scores (the same bits the
//          fused path recomputes), then a merge folds the o_c (decodes at long context: the chunks
//          fill the SMs).
// The chunk count of a query depends on its position only (never on the batch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace fp4serve::kernels::cuda::attn {

inline constexpr int64_t kChunkKeys = 256;     // keys per chunk (the unit of the fixed-order folds)
inline constexpr int kTileKeys = 32;           // keys per shared-memory tile inside a chunk
inline constexpr int kQueriesPerBlock = 8;     // one warp per query
inline constexpr int kMaxHeadDim = 256;        // 8 elements per lane
inline constexpr int64_t kSplitMaxRows = 16;   // sequences with more new rows always take the fused path
inline constexpr std::size_t kSplitBudgetBytes = std::size_t{128} << 20;  // partials of one op, at most
inline constexpr std::size_t kMinSplitBudgetBytes = std::size_t{64} << 20;

// The split budget of one op given the scratch arena's capacity (reserved at start-up): what is
// reserved, within [kMinSplitBudgetBytes, kSplitBudgetBytes], so that a step within the limits does
// not grow the arena. Which sequences go split changes no result, only the parallelism.
constexpr std::size_t split_budget(std::size_t scratch_capacity) {
  return scratch_capacity < kMinSplitBudgetBytes ? kMinSplitBudgetBytes
         : scratch_capacity > kSplitBudgetBytes  ? kSplitBudgetBytes
                                                 : scratch_capacity;
}

enum class ItemMode : int32_t { kFused = 0, kStats = 1, kOut = 2 };

// One thread block's work: queries r0 .. r0 + kQueriesPerBlock - 1 of (sequence seq, kv head kvh),
// query r = t * group + g for q head kvh * group + g; chunk: the one chunk (split) or -1 (fused).
struct Item {
  int32_t seq = 0;
  int32_t kvh = 0;
  int32_t r0 = 0;
  int32_t chunk = -1;
  ItemMode mode = ItemMode::kFused;
};

// What the planner needs of a sequence (or a dense segment).
struct PlanSeq {
  int64_t rows = 0;     // new tokens (query rows)
  int64_t pos0 = 0;     // position of the first (causal); ignored when !causal
  int n_kv_heads = 0;   // dense: the heads
  int group = 1;        // q heads per kv head
  bool causal = true;   // false: every row sees the segment's `rows` keys
};

// Where a split sequence's partials live: query index qi = kvh * rows * group + r; its chunk c at
// partial index partial_base + qi * nchunks + c ((m, l) pairs; o_c rows of head_dim and score rows of
// kChunkKeys at that index times their length).
struct SeqPlan {
  bool split = false;
  int64_t nchunks = 0;       // chunks of the sequence's last row
  int64_t partial_base = 0;  // split only
};

struct Plan {
  std::vector<SeqPlan> seqs;
  std::vector<Item> first;   // launch 1: fused items and split stats items
  std::vector<Item> second;  // launch 2: split out items
  std::vector<Item> merge;   // launch 3: one per split query block (chunk -1)
  int64_t partials = 0;      // (m, l) pairs (and o_c rows) the split items write
};

// constexpr: the kernels call it too (nvcc --expt-relaxed-constexpr).
constexpr int64_t chunks_for_keys(int64_t keys) { return keys <= 0 ? 0 : (keys - 1) / kChunkKeys + 1; }

// Keys of query row r (t = r / group) of a sequence.
inline int64_t keys_of_row(const PlanSeq& s, int64_t t) { return s.causal ? s.pos0 + t + 1 : s.rows; }

// Plans one op over `seqs`. A sequence goes split when it has at most kSplitMaxRows rows, more than
// one chunk, and its partials (partial_bytes(head_dim) each) fit what is left of `split_budget_bytes`
// (taken in sequence order); otherwise fused. Throws std::invalid_argument on a malformed sequence.
Plan plan_attention(std::span<const PlanSeq> seqs, int head_dim, std::size_t split_budget_bytes);

// Scratch bytes of one partial: (m, l), an o_c row and a row of scores.
constexpr std::size_t partial_bytes(int head_dim) {
  return (static_cast<std::size_t>(head_dim) + 2 + static_cast<std::size_t>(kChunkKeys)) * sizeof(float);
}

// Bytes of scratch a plan's partials take, per region (each a multiple of 256 bytes).
std::size_t partial_stats_bytes(const Plan& plan);
std::size_t partial_out_bytes(const Plan& plan, int head_dim);
std::size_t partial_scores_bytes(const Plan& plan);

}  // namespace fp4serve::kernels::cuda::attn
