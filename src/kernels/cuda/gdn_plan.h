// The host half of the CUDA Gated DeltaNet ops (gdn_cuda.h): argument checks, launch geometry and
// the staged descriptors, compiled by g++ and unit-tested on the CPU (tests/unit/kernels/cuda_gdn_test.cpp).
//
// gdn_sequences runs three kernels on the stream for all its sequences at once, in order:
//   conv     one thread per (step row, channel): the causal conv1d over the row's sequence's conv
//            state and earlier rows, then SiLU, into qkv_out (reads the state, does not write it);
//   prep     blocks [0, state_blocks): one thread per (sequence, channel) shifts the conv state to
//            the last Kc-1 raw inputs (after conv has read it); the next norm_blocks: one thread per
//            (step row, q|k, k head) computes HF's bf16 l2norm factor of that head vector into
//            scratch (`inv`); the last decay_blocks: one thread per (step row, v head) computes exp(g);
//   rule     one block of kRuleCols threads per (sequence, v head, tile of kRuleCols state columns),
//            one thread per column of S, walking the sequence's rows in order (gdn_rule_kernel); an
//            instance with dk fixed at the model's (kGdnUnrolledDk) unrolls its loops; or, opted in,
//            for each sequence with enough rows, the chunked rule (gdn_chunked.cuh): a launch per
//            such sequence of blocks of 128 threads per (v head, column tile), kGdnChunk rows at a time.
// Which rows belong to which sequence, and each sequence's state, the kernels read from staged
// memory (gdn_stage: one upload per call), never from their arguments or their grid, which depend
// only on the number of sequences and the step's rows: a step graph replays the launches for
// whichever rows and state slots the step has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/gdn.h"
#include "kernels/tensor_view.h"

namespace fp4serve::kernels {
struct GdnSeqDesc;  // backend.h
}  // namespace fp4serve::kernels

namespace fp4serve::kernels::cuda {

inline constexpr int kGdnThreads = 256;   // conv and prep blocks
inline constexpr int kRuleCols = 32;      // state columns per delta-rule block (one warp)
inline constexpr int kGdnMaxDk = 256;     // the rule keeps q, k of a token in kGdnMaxDk / 32 registers per lane
inline constexpr int kGdnMaxConvKernel = 16;  // as the CPU op
inline constexpr int kGdnUnrolledDk = 128;    // the model's dk: the rule's loops over dk unroll fully
inline constexpr int kGdnChunk = 64;          // tokens per chunk of the chunked rule
inline constexpr int kGdnChunkMaxDk = 128;    // the chunked rule's shared memory fits 99 KB up to this dk

// Throws std::invalid_argument naming `op` unless the dimensions are ones the kernels take:
// Hk > 0, Hv a positive multiple of Hk, 1 <= dk <= kGdnMaxDk, dv > 0, 1 <= conv_kernel <= 16.
void gdn_check_dims(const GdnDims& d, const char* op);

// The row stride (elements) of a [rows, cols] view; throws when rows overlap (stride < cols).
int64_t gdn_row_stride(const TensorView& v, const char* what);

struct GdnLaunch {
  int64_t seqs = 0;            // descs of the call
  int64_t step_rows = 0;       // rows of the step's tensors (x.dim(0))
  unsigned conv_blocks = 0;    // step_rows * conv_dim threads, kGdnThreads a block
  unsigned state_blocks = 0;   // seqs * conv_dim threads
  unsigned norm_blocks = 0;    // step_rows * 2 * Hk threads
  unsigned decay_blocks = 0;   // step_rows * Hv threads
  unsigned rule_heads = 0;     // grid.x of the rule: seqs * Hv (block x: sequence x / Hv, v head x % Hv)
  unsigned rule_tiles = 0;     // grid.y of the rule: ceil(dv / kRuleCols)
  bool rule_unrolled = false;  // dk == kGdnUnrolledDk: the rule's instance with dk fixed
  std::size_t rule_smem = 0;   // bytes, fp32: the S tile [dk][kRuleCols], q and k [dk] of two tokens
  std::size_t chunk_smem = 0;  // bytes of a chunked block (gdn_chunked.cuh's layout)
  int64_t inv_floats = 0;      // scratch: step_rows * 2 * Hk l2norm factors
  int64_t decay_floats = 0;    // scratch: step_rows * Hv decays exp(g)
  float qscale = 0.0f;         // float(1 / sqrt(dk)), as the CPU computes it
};

// The geometry of one gdn_sequences call over `seqs` descs and a step of `step_rows` rows (dims
// already checked). It depends on nothing else: not on the descs' rows.
GdnLaunch gdn_plan(const GdnDims& d, int64_t seqs, int64_t step_rows);

// Whether a sequence of `rows` rows takes the chunked rule: opted in, at least kGdnChunk rows, dk
// <= kGdnChunkMaxDk, and the chunked block's shared memory within the device's opt-in limit.
bool gdn_takes_chunked(const GdnDims& d, int64_t rows, bool chunked_opt_in, std::size_t smem_optin);

// A desc as the kernels read it (staged).
struct GdnSeqDev {
  int64_t row0;
  int32_t rows;
  int32_t chunked;  // 1: the chunked rule runs this sequence (the recurrent rule's blocks skip it)
  GdnStateRef state;
};
static_assert(sizeof(GdnSeqDev) == 32);

// The staged bytes of one call: GdnSeqDev [seqs.size()], then the row map int32 [step_rows] (the
// index of the desc whose rows hold that row, or -1). Descs already checked (check_gdn_seqs).
void gdn_stage(const GdnDims& d, std::span<const GdnSeqDesc> seqs, int64_t step_rows, bool chunked_opt_in,
               std::size_t smem_optin, std::vector<std::byte>& out);

// FP4SERVE_GDN_CHUNKED=1 (read once): long prefills take the chunked (WY/UT) rule, faster but
// reassociated: the result then depends on where a prefill is split (a snapshot point, the
// scheduler's token budget) and differs from the CPU op beyond bits (held to an NMSE), so the
// split and batch invariance the recurrent rule gives is lost. Off by default.
bool gdn_chunked_opt_in();

}  // namespace fp4serve::kernels::cuda
