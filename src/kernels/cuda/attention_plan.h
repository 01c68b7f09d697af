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
//
// The plan is computed on the device (attention_cuda.cu's planning kernel) from the per-sequence
// descriptors, by the functions below marked FP4SERVE_ATTN_HD, which g++ compiles too: the host
// planner plan_attention() is those same functions run by one thread, so the CPU tests of the plan
// test the device's. That keeps every launch's grid and arguments independent of the context
// lengths (step graphs replay them with other lengths; graph_launch.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#if defined(__CUDACC__)
#define FP4SERVE_ATTN_HD __host__ __device__ __forceinline__
#else
#define FP4SERVE_ATTN_HD inline
#endif

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
// first_off, second_off, merge_off: where the sequence's items start in the three lists.
struct SeqPlan {
  bool split = false;
  int64_t nchunks = 0;       // chunks of the sequence's last row
  int64_t partial_base = 0;  // split only
  int64_t first_off = 0, second_off = 0, merge_off = 0;
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
FP4SERVE_ATTN_HD constexpr int64_t keys_of_row(const PlanSeq& s, int64_t t) { return s.causal ? s.pos0 + t + 1 : s.rows; }

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
std::size_t partial_stats_bytes(int64_t partials);
std::size_t partial_out_bytes(int64_t partials, int head_dim);
std::size_t partial_scores_bytes(int64_t partials);

// ---- The planner's steps (host and device) ----

// Query blocks of one kv head of a sequence (kQueriesPerBlock query rows each).
FP4SERVE_ATTN_HD constexpr int64_t query_blocks(const PlanSeq& s) {
  return (s.rows * s.group + kQueriesPerBlock - 1) / kQueriesPerBlock;
}

// Chunks of query block b (queries b * kQueriesPerBlock ..): its last query row has the most keys
// (causal), so its chunks cover every query's.
FP4SERVE_ATTN_HD constexpr int64_t block_chunks(const PlanSeq& s, int64_t b) {
  // 32-bit division (check_plan_seqs bounds the query rows): a 64-bit one is a call on the device.
  const int64_t nq = s.rows * s.group, r0 = b * kQueriesPerBlock;
  const int64_t last_t = static_cast<int32_t>((r0 + kQueriesPerBlock < nq ? r0 + kQueriesPerBlock : nq) - 1) / s.group;
  return chunks_for_keys(keys_of_row(s, last_t));
}

// Split items of one kv head of a sequence before query block b (b = query_blocks: all of them).
FP4SERVE_ATTN_HD constexpr int64_t split_items_before(const PlanSeq& s, int64_t b) {
  int64_t n = 0;
  for (int64_t i = 0; i < b; ++i) n += block_chunks(s, i);
  return n;
}

// What planning has taken so far, sequence by sequence.
struct PlanCursor {
  std::size_t budget_left = 0;
  int64_t partials = 0, first = 0, second = 0, merge = 0;
};

// Sequence s's plan given what the sequences before it took (advances `cur`). A sequence goes split
// when causal, at most kSplitMaxRows rows, more than one chunk, and its partials fit what is left of
// the budget. Its items, kv head by kv head, query block by block: fused one item per block (in
// first), split per block its chunks' stats items (first) and out items (second), and one merge item.
FP4SERVE_ATTN_HD SeqPlan plan_seq(const PlanSeq& s, int head_dim, PlanCursor& cur) {
  SeqPlan sp;
  sp.first_off = cur.first;
  sp.second_off = cur.second;
  sp.merge_off = cur.merge;
  if (s.rows <= 0) return sp;
  sp.nchunks = chunks_for_keys(keys_of_row(s, s.rows - 1));
  const int64_t partials = s.n_kv_heads * s.rows * s.group * sp.nchunks;
  const std::size_t need = static_cast<std::size_t>(partials) * partial_bytes(head_dim);
  sp.split = s.causal && s.rows <= kSplitMaxRows && sp.nchunks > 1 && need <= cur.budget_left;
  const int64_t blocks = query_blocks(s);
  if (sp.split) {
    cur.budget_left -= need;
    sp.partial_base = cur.partials;
    cur.partials += partials;
    const int64_t items = s.n_kv_heads * split_items_before(s, blocks);
    cur.first += items;
    cur.second += items;
    cur.merge += s.n_kv_heads * blocks;
  } else {
    cur.first += s.n_kv_heads * blocks;
  }
  return sp;
}

// The items of unit u (kv head u / blocks, query block u % blocks) of sequence `seq`, written at
// their places in the lists. Fused blocks go last row first: causal blocks get longer with r0, and
// the longest ones should start first rather than trail the launch (the order changes no result).
FP4SERVE_ATTN_HD void write_unit_items(const PlanSeq& s, const SeqPlan& sp, int32_t seq, int64_t u,
                                              Item* first, Item* second, Item* merge) {
  const int64_t blocks = query_blocks(s);
  const int32_t kvh = static_cast<int32_t>(u) / static_cast<int32_t>(blocks);  // plan_bounds: units < 2^31
  const int64_t b = u - static_cast<int64_t>(kvh) * blocks;
  Item item;
  item.seq = seq;
  item.kvh = kvh;
  if (!sp.split) {
    item.r0 = static_cast<int32_t>((blocks - 1 - b) * kQueriesPerBlock);
    first[sp.first_off + u] = item;
    return;
  }
  item.r0 = static_cast<int32_t>(b * kQueriesPerBlock);
  const int64_t at = kvh * split_items_before(s, blocks) + split_items_before(s, b);
  const int64_t chunks = block_chunks(s, b);
  for (int64_t c = 0; c < chunks; ++c) {
    item.chunk = static_cast<int32_t>(c);
    item.mode = ItemMode::kStats;
    first[sp.first_off + at + c] = item;
    item.mode = ItemMode::kOut;
    second[sp.second_off + at + c] = item;
  }
  item.chunk = -1;
  item.mode = ItemMode::kOut;
  merge[sp.merge_off + u] = item;
}

// The item counts of a plan (the planning kernel writes them for the attention launches).
struct PlanCounts {
  int32_t first = 0, second = 0, merge = 0, pad = 0;
  int64_t partials = 0;
};

// Step 1 (one thread): every sequence's SeqPlan in order, and the counts. seqs[i] is a PlanSeq.
template <class Seqs>
FP4SERVE_ATTN_HD void plan_sequences(const Seqs& seqs, int64_t n, int head_dim, std::size_t budget,
                                            SeqPlan* plans, PlanCounts* counts) {
  PlanCursor cur;
  cur.budget_left = budget;
  for (int64_t i = 0; i < n; ++i) plans[i] = plan_seq(seqs[i], head_dim, cur);
  counts->first = static_cast<int32_t>(cur.first);
  counts->second = static_cast<int32_t>(cur.second);
  counts->merge = static_cast<int32_t>(cur.merge);
  counts->partials = cur.partials;
}

// Step 2 (thread `tid` of `nthreads`, after step 1): the items of units tid, tid + nthreads, ... of
// every sequence. Which thread writes an item changes nothing: each has its own place.
template <class Seqs>
FP4SERVE_ATTN_HD void plan_items(const Seqs& seqs, const SeqPlan* plans, int64_t n, int tid, int nthreads,
                                        Item* first, Item* second, Item* merge) {
  for (int64_t i = 0; i < n; ++i) {
    const PlanSeq s = seqs[i];
    if (s.rows <= 0) continue;
    const int64_t units = s.n_kv_heads * query_blocks(s);
    for (int64_t u = tid; u < units; u += nthreads)
      write_unit_items(s, plans[i], static_cast<int32_t>(i), u, first, second, merge);
  }
}

// Upper bounds of a plan's counts that do not depend on the context lengths (the positions): what
// the device plan's scratch and the attention launches' grids are sized by. A split sequence's stats
// items are at most its partials (item (block, c) <-> its last query's chunk c), its out items too,
// its merge items its query blocks.
struct PlanBounds {
  int64_t units = 0;         // query blocks, all kv heads
  int64_t max_partials = 0;  // what the budget holds; 0 when no sequence may split (row counts)
  int64_t first() const { return units + max_partials; }
  int64_t second() const { return max_partials; }
  int64_t merge() const { return max_partials > 0 ? units : 0; }
};
PlanBounds plan_bounds(std::span<const PlanSeq> seqs, int head_dim, std::size_t split_budget_bytes);

// The malformed-sequence and size checks of plan_attention (std::invalid_argument).
void check_plan_seqs(std::span<const PlanSeq> seqs, int head_dim);

}  // namespace fp4serve::kernels::cuda::attn
