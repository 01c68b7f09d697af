// The attention kernels (attention_plan.h gives the arithmetic every query goes through and the two
// paths that share it). One warp per query (token, q head); a block's 8 queries share the K and V
// tiles of their kv head, loaded once into shared memory (fp8 dequantized to bf16 on the way, as the
// CPU's load_rows does).
//
// Scores: the paged (language model) attention uses the CPU's canonical dot (lane l accumulates
// d = l, l + 32, ... with fmaf, then the halving tree 16, 8, 4, 2, 1: kernel_table.h's dot bit for
// bit; a tile's 32 keys at once, dot_tile_canonical); the dense (vision) attention the CPU's
// scores_block (one lane per key: sum over d in order, separate multiply and add). Then, as
// attention_softmax_row: kHfEager s = bf16(bf16(dot) * scale), kFp32 s = dot * scale.
// Outputs: o_d, lane l owning d = l, l + 32, ...: an fmaf chain over the chunk's keys in order
// (kernel_table.h's weighted_sum), chunks folded in order (attention_plan.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_numerics.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/glibc_expf.h"

namespace fp4serve::kernels::cuda::attn {

// One sequence (or dense segment) on the device. Element offsets:
//   q of token t, head h      q + t * ldq + h * D           (pointers already at the first row)
//   gate, out likewise        (gate == nullptr: no output gate, the dense attention)
//   K of key row `row`, kv head kvh: k + row * ldk + kvh * D; row = key index when table == nullptr,
//   else table[j / block_size] * block_size + j % block_size.
struct SeqArgs {  // no member initializers: it lives in __shared__ memory (host code value-initializes)
  const uint16_t* q;
  const uint16_t* gate;
  uint16_t* out;
  const void* k;
  const void* v;
  const int32_t* table;
  int64_t ldq, ldg, ldo, ldk, ldv;
  int64_t block_size;
  int64_t rows, pos0;
  int64_t nchunks, partial_base;  // split path: from the device plan's SeqPlan (setup_query)
  float k_scale, v_scale;
  int32_t n_kv_heads;  // the plan's units: n_kv_heads x query blocks
  int32_t group;   // q heads per kv head
  int32_t fp8;     // K/V are e4m3 codes
  int32_t causal;  // 0: every row sees the segment's rows
  int32_t vec4;    // K/V rows load 4 elements at a time (D, ldk, ldv multiples of 4; bases aligned)
};

// The launches' grids do not depend on the context lengths (attention_plan.h): each block takes
// items blockIdx.x, + gridDim.x, ... below *count, which the planning kernel wrote.
struct OpArgs {
  const SeqArgs* seqs = nullptr;
  const SeqPlan* plans = nullptr;  // the device plan's per-sequence plans
  const Item* items = nullptr;
  const int32_t* count = nullptr;  // items in `items`
  float2* stats = nullptr;  // split partials: (m_c, l_c)
  float* opart = nullptr;   // split partials: o_c rows of head_dim
  float* spart = nullptr;   // split partials: the chunk's scores, rows of kChunkKeys
  int head_dim = 0;
  float scale = 1.0f;       // float(1 / sqrt(head_dim))
  int eager = 1;
};

inline constexpr int kThreads = kQueriesPerBlock * 32;
inline constexpr int kLaneElems = kMaxHeadDim / 32;  // head elements per lane (d = lane + 32 i)

struct Smem {
  uint16_t tile[kTileKeys][kMaxHeadDim + 2];  // +2: rows one bank apart for the lane-per-key reads
  float q[kQueriesPerBlock][kMaxHeadDim];
  float s[kQueriesPerBlock][kChunkKeys];      // the chunk's scores, then its weights p_j
  SeqArgs seq;
};
static_assert(sizeof(Smem) <= 48 * 1024, "attention: static shared memory above the default 48 KB");

// A warp's query.
struct Query {
  bool valid = false;
  int64_t t = 0;     // row within the sequence
  int h = 0;         // q head
  int64_t keys = 0;  // keys 0 .. keys-1
  int64_t qi = 0;    // index among the sequence's queries (split partials)
};

__device__ __forceinline__ int64_t key_row(const SeqArgs& S, int64_t j) {
  if (S.table == nullptr) return j;
  return static_cast<int64_t>(S.table[j / S.block_size]) * S.block_size + j % S.block_size;
}

__device__ __forceinline__ int64_t keys_of(const SeqArgs& S, int64_t t) { return S.causal ? S.pos0 + t + 1 : S.rows; }

// Rows key0 .. min(key0 + kTileKeys, key_end) - 1 of K (kV false) or V of kv head kvh into the tile,
// as bf16 bits: bf16 copied, fp8 as bf16(e4m3 * scale). Rows past key_end are left as they are
// (no query reads them). Called by the whole block between two __syncthreads.
template <bool kV>
__device__ __forceinline__ void load_tile(Smem& sm, int kvh, int D, int64_t key0, int64_t key_end) {
  const SeqArgs& S = sm.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t left = key_end - key0;
  const int n = left < kTileKeys ? static_cast<int>(left) : kTileKeys;
  const int64_t ld = kV ? S.ldv : S.ldk;
  if (S.vec4) {  // lane loads elements 4 l .. 4 l + 3, + 128 i: 4 (fp8) or 8 (bf16) bytes a load
    for (int jj = warp; jj < n; jj += kQueriesPerBlock) {
      const int64_t off = key_row(S, key0 + jj) * ld + static_cast<int64_t>(kvh) * D;
      uint32_t* dst = reinterpret_cast<uint32_t*>(sm.tile[jj]);  // rows are 4-byte aligned
      for (int d = 4 * lane; d < D; d += 128) {
        if (S.fp8) {
          const uint32_t w = *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(kV ? S.v : S.k) + off + d);
          const float scale = kV ? S.v_scale : S.k_scale;
          uint32_t b[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) b[e] = f32_to_bf16_bits(e4m3_to_f32(static_cast<uint8_t>(w >> (8 * e))) * scale);
          dst[d / 2] = b[0] | (b[1] << 16);
          dst[d / 2 + 1] = b[2] | (b[3] << 16);
        } else {
          const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(kV ? S.v : S.k) + off + d);
          dst[d / 2] = w.x;
          dst[d / 2 + 1] = w.y;
        }
      }
    }
    return;
  }
  for (int jj = warp; jj < n; jj += kQueriesPerBlock) {
    const int64_t off = key_row(S, key0 + jj) * ld + static_cast<int64_t>(kvh) * D;
    if (S.fp8) {
      const uint8_t* src = static_cast<const uint8_t*>(kV ? S.v : S.k) + off;
      const float scale = kV ? S.v_scale : S.k_scale;
      for (int d = lane; d < D; d += 32) sm.tile[jj][d] = f32_to_bf16_bits(e4m3_to_f32(src[d]) * scale);
    } else {
      const uint16_t* src = static_cast<const uint16_t*>(kV ? S.v : S.k) + off;
      for (int d = lane; d < D; d += 32) sm.tile[jj][d] = src[d];
    }
  }
}

// kernel_table.h's dot(q, K_k) for the tile's 32 keys k at once: lane l holds the CPU's accumulator l
// of every key (d = l, l + 32, ... with fmaf), then the halving tree 16, 8, 4, 2, 1 runs for all keys
// together by a transposing exchange: at the level of offset o, lanes l and l ^ o hold the same 2o
// keys' partial sums of tree positions p and p + o (p = l mod o); each keeps one half (the upper one
// when bit o of l is set), adds its partner's value for it, and gives away the other half. The sums
// are the tree's, pair for pair (an fp32 add is commutative), and lane l ends with key l's dot: 31
// shuffles for 32 keys instead of 5 per key. Rows of the tile past the keys loaded give garbage
// lanes that no caller stores.
template <int kOffset>  // one level of the transposing tree (constant indices: v stays in registers)
__device__ __forceinline__ void tree_level(float (&v)[kTileKeys], int lane) {
  const bool upper = (lane & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kOffset; ++i) {
    const float give = upper ? v[i] : v[i + kOffset];
    const float keep = upper ? v[i + kOffset] : v[i];
    v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, give, kOffset);
  }
}

__device__ __forceinline__ float dot_tile_canonical(const float (&qreg)[kLaneElems], const Smem& sm, int D, int lane) {
  float v[kTileKeys];
#pragma unroll
  for (int k = 0; k < kTileKeys; ++k) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kLaneElems; ++i) {
      const int d = lane + 32 * i;
      if (d < D) acc = fmaf(qreg[i], bf16_bits_to_f32(sm.tile[k][d]), acc);
    }
    v[k] = acc;
  }
  tree_level<16>(v, lane);
  tree_level<8>(v, lane);
  tree_level<4>(v, lane);
  tree_level<2>(v, lane);
  tree_level<1>(v, lane);
  return v[0];
}
static_assert(kTileKeys == 32, "dot_tile_canonical maps the tile's keys onto the warp's lanes");

__device__ __forceinline__ float finish_score(float dot, const OpArgs& A) {
  return A.eager ? round_bf16(__fmul_rn(round_bf16(dot), A.scale)) : __fmul_rn(dot, A.scale);
}

// The scores of chunk c (keys c0 .. ) of every valid query into sm.s[warp][j - c0]. block_keys: the
// most keys any query of the block has (tiles past it are not loaded).
template <bool kDense>
__device__ __forceinline__ void chunk_scores(Smem& sm, const OpArgs& A, int kvh, int64_t c, int64_t block_keys, const Query& qr,
                             const float (&qreg)[kLaneElems]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = A.head_dim;
  const int64_t c0 = c * kChunkKeys;
  const int64_t c_end = c0 + kChunkKeys < block_keys ? c0 + kChunkKeys : block_keys;
  for (int64_t key0 = c0; key0 < c_end; key0 += kTileKeys) {
    __syncthreads();  // the tile's previous readers are done
    load_tile<false>(sm, kvh, D, key0, c_end);
    __syncthreads();
    if (!qr.valid) continue;
    const int64_t left = qr.keys - key0;
    const int n = left <= 0 ? 0 : (left < kTileKeys ? static_cast<int>(left) : kTileKeys);  // warp-uniform
    float* s = sm.s[warp] + (key0 - c0);
    if (kDense) {
      if (lane < n) {
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc = __fadd_rn(acc, __fmul_rn(sm.q[warp][d], bf16_bits_to_f32(sm.tile[lane][d])));
        s[lane] = finish_score(acc, A);
      }
    } else if (n > 0) {
      const float dot = dot_tile_canonical(qreg, sm, D, lane);
      if (lane < n) s[lane] = finish_score(dot, A);
    }
  }
  __syncwarp();
}

// Keys of chunk c the query has (0 when the chunk lies past its last key).
__device__ __forceinline__ int chunk_count(const Query& qr, int64_t c) {
  if (!qr.valid) return 0;
  const int64_t left = qr.keys - c * kChunkKeys;
  return left <= 0 ? 0 : (left < kChunkKeys ? static_cast<int>(left) : static_cast<int>(kChunkKeys));
}

// (m_c, l_c) of a chunk's n scores: the max, and sum exp(s_j - m_c) with lane l summing j = l, l + 32,
// ... in order, then the halving tree. Every lane returns the result.
__device__ __forceinline__ float2 chunk_stats(const float* s, int n, int lane) {
  float m = -INFINITY;
  for (int j = lane; j < n; j += 32) m = fmaxf(m, s[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  float l = 0.0f;
  for (int j = lane; j < n; j += 32) l = __fadd_rn(l, expf(__fsub_rn(s[j], m)));
  l = l + __shfl_down_sync(0xFFFFFFFFu, l, 16);
  l = l + __shfl_down_sync(0xFFFFFFFFu, l, 8);
  l = l + __shfl_down_sync(0xFFFFFFFFu, l, 4);
  l = l + __shfl_down_sync(0xFFFFFFFFu, l, 2);
  l = l + __shfl_down_sync(0xFFFFFFFFu, l, 1);
  return make_float2(m, __shfl_sync(0xFFFFFFFFu, l, 0));
}

// One step of the fold of chunk statistics in ascending chunk order, from (M, l) = (-inf, 0).
__device__ __forceinline__ void fold_stats(float& M, float& l, float2 chunk) {
  const float mn = fmaxf(M, chunk.x);
  l = __fadd_rn(__fmul_rn(l, expf(__fsub_rn(M, mn))), __fmul_rn(chunk.y, expf(__fsub_rn(chunk.x, mn))));
  M = mn;
}

__device__ __forceinline__ int64_t partial_index(const SeqArgs& S, const Query& qr, int64_t c) {
  return S.partial_base + qr.qi * S.nchunks + c;
}

// The query's output row from its folded o (acc) and l: kHfEager o = bf16(acc), kFp32 o = bf16(acc / l);
// with a gate out = bf16(o * bf16(sigmoid(gate))) (sigmoid through glibc_expf.h: glibc's expf result).
__device__ __forceinline__ void write_output(const SeqArgs& S, const OpArgs& A, const Query& qr,
                                             const float (&acc)[kLaneElems], float l, int lane) {
  const int D = A.head_dim;
  uint16_t* out = S.out + qr.t * S.ldo + static_cast<int64_t>(qr.h) * D;
  const uint16_t* gate = S.gate != nullptr ? S.gate + qr.t * S.ldg + static_cast<int64_t>(qr.h) * D : nullptr;
#pragma unroll
  for (int i = 0; i < kLaneElems; ++i) {
    const int d = lane + 32 * i;
    if (d >= D) continue;
    const float o = round_bf16(A.eager ? acc[i] : __fdiv_rn(acc[i], l));
    if (gate == nullptr) {
      out[d] = f32_to_bf16_bits(o);
    } else {
      const float g = bf16_bits_to_f32(gate[d]);
      const float sig = __fdiv_rn(1.0f, __fadd_rn(1.0f, glibc::exp_f32(-g)));
      out[d] = f32_to_bf16_bits(__fmul_rn(o, round_bf16(sig)));
    }
  }
}

// The warp's query and the most keys any of the block's queries has; `seq` (shared) loaded. Ends with __syncthreads.
__device__ __forceinline__ Query setup_query(SeqArgs& seq, const OpArgs& A, const Item& it, int64_t& block_keys) {
  if (threadIdx.x == 0) {
    seq = A.seqs[it.seq];
    seq.nchunks = A.plans[it.seq].nchunks;
    seq.partial_base = A.plans[it.seq].partial_base;
  }
  __syncthreads();
  const SeqArgs& S = seq;
  const int warp = threadIdx.x >> 5;
  const int64_t nq = S.rows * S.group;
  const int64_t r = static_cast<int64_t>(it.r0) + warp;
  Query qr;
  qr.valid = r < nq;
  qr.t = r / S.group;
  qr.h = it.kvh * S.group + static_cast<int>(r % S.group);
  qr.keys = qr.valid ? keys_of(S, qr.t) : 0;
  qr.qi = static_cast<int64_t>(it.kvh) * nq + r;
  const int64_t r_last = (it.r0 + kQueriesPerBlock < nq ? it.r0 + kQueriesPerBlock : nq) - 1;
  block_keys = keys_of(S, r_last / S.group);
  return qr;
}

// Launch 1 and 2 of attention_plan.h: fused items (every chunk, both passes, the output written),
// split stats items (one chunk's (m_c, l_c)) and split out items (fold the stats, one chunk's o_c).
// One item; the caller has synchronized the block since the previous item used shared memory.
template <bool kDense>
__device__ __forceinline__ void run_item(Smem& sm, const OpArgs& A, const Item it) {
  int64_t block_keys = 0;
  const Query qr = setup_query(sm.seq, A, it, block_keys);
  const SeqArgs& S = sm.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = A.head_dim;

  // The query in registers (canonical dot) or shared memory (dense, lane-per-key dot).
  float qreg[kLaneElems];
  const uint16_t* qrow = S.q + qr.t * S.ldq + static_cast<int64_t>(qr.h) * D;
#pragma unroll
  for (int i = 0; i < kLaneElems; ++i) {
    const int d = lane + 32 * i;
    qreg[i] = (qr.valid && d < D) ? bf16_bits_to_f32(qrow[d]) : 0.0f;
    if (kDense && d < D) sm.q[warp][d] = qreg[i];
  }
  __syncwarp();

  const bool fused = it.mode == ItemMode::kFused;
  const int64_t c_begin = fused ? 0 : it.chunk;
  const int64_t c_end = fused ? chunks_for_keys(block_keys) : it.chunk + 1;

  // Pass 1: the softmax statistics (M, l).
  float M = -INFINITY, l = 0.0f;
  if (it.mode == ItemMode::kOut) {
    if (qr.valid) {
      const int64_t nc = chunks_for_keys(qr.keys);
      for (int64_t c = 0; c < nc; ++c) fold_stats(M, l, A.stats[partial_index(S, qr, c)]);
    }
  } else {
    for (int64_t c = c_begin; c < c_end; ++c) {
      chunk_scores<kDense>(sm, A, it.kvh, c, block_keys, qr, qreg);
      const int n = chunk_count(qr, c);
      if (n == 0) continue;
      const float2 st = chunk_stats(sm.s[warp], n, lane);
      if (fused) {
        fold_stats(M, l, st);
      } else {
        const int64_t p = partial_index(S, qr, c);
        for (int j = lane; j < n; j += 32) A.spart[p * kChunkKeys + j] = sm.s[warp][j];
        if (lane == 0) A.stats[p] = st;
      }
    }
    if (it.mode == ItemMode::kStats) return;  // block-uniform
  }

  // Pass 2: o = the fold over chunks of o_c = sum_j p_j V_j.
  const float inv_l = __fdiv_rn(1.0f, l);
  float acc[kLaneElems];
#pragma unroll
  for (int i = 0; i < kLaneElems; ++i) acc[i] = 0.0f;
  for (int64_t c = c_begin; c < c_end; ++c) {
    const int n = chunk_count(qr, c);
    float* s = sm.s[warp];
    if (it.mode == ItemMode::kOut) {  // the scores the stats item stored (one chunk: s is unused so far)
      const float* src = A.spart + partial_index(S, qr, c) * kChunkKeys;
      for (int j = lane; j < n; j += 32) s[j] = src[j];
      __syncwarp();
    } else {
      chunk_scores<kDense>(sm, A, it.kvh, c, block_keys, qr, qreg);
    }
    for (int j = lane; j < n; j += 32) {
      const float e = expf(__fsub_rn(s[j], M));
      s[j] = A.eager ? round_bf16(__fmul_rn(e, inv_l)) : e;
    }
    __syncwarp();
    float o[kLaneElems];
#pragma unroll
    for (int i = 0; i < kLaneElems; ++i) o[i] = 0.0f;
    const int64_t c0 = c * kChunkKeys;
    const int64_t ce = c0 + kChunkKeys < block_keys ? c0 + kChunkKeys : block_keys;
    for (int64_t key0 = c0; key0 < ce; key0 += kTileKeys) {
      __syncthreads();
      load_tile<true>(sm, it.kvh, D, key0, ce);
      __syncthreads();
      const int64_t left = c0 + n - key0;  // this query's keys in the tile
      const int m = left <= 0 ? 0 : (left < kTileKeys ? static_cast<int>(left) : kTileKeys);
      for (int jj = 0; jj < m; ++jj) {
        const float p = s[key0 - c0 + jj];
#pragma unroll
        for (int i = 0; i < kLaneElems; ++i) {
          const int d = lane + 32 * i;
          if (d < D) o[i] = fmaf(p, bf16_bits_to_f32(sm.tile[jj][d]), o[i]);
        }
      }
    }
    if (n == 0) continue;
    if (fused) {
#pragma unroll
      for (int i = 0; i < kLaneElems; ++i) acc[i] = __fadd_rn(acc[i], o[i]);
    } else {
      float* dst = A.opart + partial_index(S, qr, c) * D;
#pragma unroll
      for (int i = 0; i < kLaneElems; ++i)
        if (lane + 32 * i < D) dst[lane + 32 * i] = o[i];
    }
  }
  if (fused && qr.valid) write_output(S, A, qr, acc, l, lane);
}

template <bool kDense>
__global__ void __launch_bounds__(kThreads, 2) attention_items_kernel(OpArgs A) {
  __shared__ Smem sm;
  const int32_t count = *A.count;
  for (int32_t i = blockIdx.x; i < count; i += gridDim.x) {  // block-uniform
    __syncthreads();  // the previous item's readers of shared memory are done
    run_item<kDense>(sm, A, A.items[i]);
  }
}

// Launch 3: a split query block's outputs: the (m_c, l_c) and o_c folded in chunk order, exactly as
// the fused path folds them.
__device__ __forceinline__ void merge_item(SeqArgs& seq, const OpArgs& A, const Item it) {
  int64_t block_keys = 0;
  const Query qr = setup_query(seq, A, it, block_keys);
  if (!qr.valid) return;
  const SeqArgs& S = seq;
  const int lane = threadIdx.x & 31, D = A.head_dim;
  const int64_t nc = chunks_for_keys(qr.keys);
  float M = -INFINITY, l = 0.0f;
  for (int64_t c = 0; c < nc; ++c) fold_stats(M, l, A.stats[partial_index(S, qr, c)]);
  float acc[kLaneElems];
#pragma unroll
  for (int i = 0; i < kLaneElems; ++i) acc[i] = 0.0f;
  for (int64_t c = 0; c < nc; ++c) {
    const float* src = A.opart + partial_index(S, qr, c) * D;
#pragma unroll
    for (int i = 0; i < kLaneElems; ++i)
      if (lane + 32 * i < D) acc[i] = __fadd_rn(acc[i], src[lane + 32 * i]);
  }
  write_output(S, A, qr, acc, l, lane);
}

__global__ void __launch_bounds__(kThreads, 2) attention_merge_kernel(OpArgs A) {
  __shared__ SeqArgs seq;
  const int32_t count = *A.count;
  for (int32_t i = blockIdx.x; i < count; i += gridDim.x) {  // block-uniform
    __syncthreads();  // every thread has read `seq` of the previous item
    merge_item(seq, A, A.items[i]);
  }
}

// The planning kernel (one block): the per-sequence descriptors as PlanSeq in shared memory, then
// attention_plan.h's plan_sequences (thread 0: the budget is taken in sequence order) and
// plan_items (every thread). Dynamic shared memory: n PlanSeq.
inline constexpr int kPlanThreads = 256;

struct PlanArgs {
  const SeqArgs* seqs = nullptr;
  int64_t n = 0;
  int head_dim = 0;
  std::size_t budget = 0;  // split partials' bytes, at most
  SeqPlan* plans = nullptr;
  PlanCounts* counts = nullptr;
  Item* first = nullptr;
  Item* second = nullptr;
  Item* merge = nullptr;
};

__global__ void __launch_bounds__(kPlanThreads) attention_plan_kernel(PlanArgs P) {
  extern __shared__ __align__(16) unsigned char plan_smem[];
  PlanSeq* seqs = reinterpret_cast<PlanSeq*>(plan_smem);
  for (int64_t i = threadIdx.x; i < P.n; i += blockDim.x) {
    const SeqArgs& a = P.seqs[i];
    PlanSeq s;
    s.rows = a.rows;
    s.pos0 = a.pos0;
    s.n_kv_heads = a.n_kv_heads;
    s.group = a.group;
    s.causal = a.causal != 0;
    seqs[i] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) plan_sequences(seqs, P.n, P.head_dim, P.budget, P.plans, P.counts);
  __syncthreads();  // the plans (global memory) visible to the block
  plan_items(seqs, P.plans, P.n, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), P.first, P.second,
             P.merge);
}

}  // namespace fp4serve::kernels::cuda::attn
