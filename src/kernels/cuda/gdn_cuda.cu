// Gated DeltaNet on CUDA: the gating, and for a call's sequences at once the causal conv1d, the conv-state shift, the
// l2norm factors and the recurrent delta rule (gdn_plan.h lays out the launches). Every kernel
// here repeats the CPU op's operation sequence (cpu/gdn_cpu.cpp, kernels_scalar.cpp's gdn_step), so
// the results are the CPU's bits, and a sequence's rows give the same bits however they are split
// (the opt-in chunked rule, gdn_chunked.cu, excepted).
#include "kernels/cuda/gdn_cuda.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gdn_seqs.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/gdn_chunked.h"
#include "kernels/cuda/gdn_device.cuh"
#include "kernels/cuda/gdn_plan.h"
#include "kernels/cuda/graph_launch.cuh"

namespace fp4serve::kernels::cuda {
namespace {

using namespace gdn_device;

__global__ void gdn_gating_kernel(const GatingArgs p) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n < p.T * p.Hv) gating_element(p, n);
}

// The call's sequences (descs, and which sequence each step row belongs to) come from staged
// memory (one upload per call), not from the by-value arguments or the grid: a step graph replays
// these launches for whichever rows and state slots the step has.
__global__ void gdn_conv_kernel(const ConvArgs args, const GdnSeqDev* __restrict__ seqs,
                                const int32_t* __restrict__ row_seq) {
  conv_thread(args, seqs, row_seq, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
}

// Blocks [0, state_blocks): the conv-state shift, a thread per (sequence, channel); the next
// norm_blocks: the l2norm factors, a thread per (row, q|k, k head); the rest: the decays, a thread
// per (row, v head). After gdn_conv_kernel on the stream: the shift must follow every read of the
// old state, and the factors read the conv output.
__global__ void gdn_prep_kernel(const ConvArgs args, const GdnSeqDev* __restrict__ seqs,
                                const int32_t* __restrict__ row_seq, int64_t nseqs, unsigned state_blocks,
                                unsigned norm_blocks) {
  if (blockIdx.x < state_blocks) {
    shift_thread(args, seqs, nseqs, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
    return;
  }
  if (blockIdx.x < state_blocks + norm_blocks) {
    norm_thread(args, seqs, row_seq, (blockIdx.x - state_blocks) * static_cast<int64_t>(blockDim.x) + threadIdx.x);
    return;
  }
  decay_thread(args, seqs, row_seq,
               (blockIdx.x - state_blocks - norm_blocks) * static_cast<int64_t>(blockDim.x) + threadIdx.x);
}

// Block (sequence x v head, column tile), one warp: lane owns one column of S[h] in the block's
// shared S tile (only its own column, so S needs no synchronization). kDk = kGdnUnrolledDk fixes
// dk at compile time, so the sweeps unroll fully and the column's loads can all be in flight at
// once (decode is a load, two sweeps and a store of S); kDk = 0 takes any dk. q, k of a token are
// staged in one of two shared buffers for all lanes: token t+1's while token t's is read
// (rule_update fuses t's second sweep with t+1's first). Per token: stage t+1, synchronize,
// update t, synchronize (t's buffer is restaged with t+2 next). Token data is loaded two tokens
// ahead. Every lane, in range or not, reaches every __syncthreads (the early return, the loop
// bounds and `next` are the same for the whole block).
template <int kDk>
__global__ void __launch_bounds__(kRuleCols) gdn_rule_kernel(const RuleArgs args, const GdnSeqDev* __restrict__ seqs) {
  extern __shared__ float smem[];  // the S tile [dk][kRuleCols], then q0, q1, k0, k1 [dk] each
  const GdnSeqDev s = seqs[blockIdx.x / args.Hv];
  if (s.rows == 0 || s.chunked) return;  // no rows, or the chunked rule's: the whole block returns
  const RuleArgs a = rule_for(args, s);
  const int dk = rule_dk<kDk>(a);
  float* qk = smem + dk * kRuleCols;
  auto qs = [&](int b) { return qk + dk * b; };
  auto ks = [&](int b) { return qk + dk * (2 + b); };
  const RuleLane l = rule_lane(a, static_cast<int>(blockIdx.x % args.Hv), static_cast<int>(blockIdx.y),
                               static_cast<int>(threadIdx.x));
  float* col = smem + l.lane;
  rule_load_column<kDk>(a, l, col);
  TokenIn cur = rule_load_token<kDk>(a, l, 0);
  TokenIn nxt = a.rows > 1 ? rule_load_token<kDk>(a, l, 1) : cur;
  rule_stage<kDk>(a, l, cur, qs(0), ks(0));
  __syncthreads();
  float kvm = rule_decay_project<kDk>(a, cur.decay, col, ks(0));
  for (int64_t t = 0; t < a.rows; ++t) {
    const bool next = t + 1 < a.rows;
    const int b = static_cast<int>(t & 1), nb = b ^ 1;
    if (next) rule_stage<kDk>(a, l, nxt, qs(nb), ks(nb));
    const TokenIn fut = t + 2 < a.rows ? rule_load_token<kDk>(a, l, t + 2) : nxt;
    __syncthreads();
    kvm = rule_update<kDk>(a, l, cur, kvm, t, col, qs(b), ks(b), next, nxt.decay, ks(nb));
    __syncthreads();
    cur = nxt;
    nxt = fut;
  }
  rule_store_column<kDk>(a, l, col);
}

}  // namespace

void gdn_gating(CudaContext& ctx, const TensorView& a, const TensorView& b, const TensorView& A_log,
                const TensorView& dt_bias, const TensorView& g, const TensorView& beta) {
  expect_view(a, DType::kF32, {-1, -1}, "gdn_gating a");
  const int64_t T = a.dim(0), Hv = a.dim(1);
  expect_view(b, DType::kF32, {T, Hv}, "gdn_gating b");
  expect_view(A_log, DType::kF32, {Hv}, "gdn_gating A_log");
  expect_view(dt_bias, DType::kF32, {Hv}, "gdn_gating dt_bias");
  expect_view(g, DType::kF32, {T, Hv}, "gdn_gating g");
  expect_view(beta, DType::kF32, {T, Hv}, "gdn_gating beta");
  const int64_t lda = gdn_row_stride(a, "gdn_gating a"), ldb = gdn_row_stride(b, "gdn_gating b");
  const int64_t ldg = gdn_row_stride(g, "gdn_gating g"), ldbeta = gdn_row_stride(beta, "gdn_gating beta");
  const int64_t n = T * Hv;
  if (n == 0) return;
  const int64_t blocks = (n + kGdnThreads - 1) / kGdnThreads;
  if (blocks > 0x7FFFFFFF) throw std::invalid_argument("gdn_gating: too many rows for one launch");
  const GatingArgs args{a.as<const float>(), lda, b.as<const float>(), ldb, A_log.as<const float>(),
                        dt_bias.as<const float>(), T, static_cast<int>(Hv), g.as<float>(), ldg, beta.as<float>(),
                        ldbeta};
  launch_kernel(ctx, "gdn_gating", gdn_gating_kernel, static_cast<unsigned>(blocks), kGdnThreads, 0, args);
  check_launch("gdn_gating", a, b, g, beta);
}

void gdn_sequences(CudaContext& ctx, const GdnDims& d, const TensorView& conv_weight, std::span<const GdnSeqDesc> seqs,
                   const TensorView& x, const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                   const TensorView& core_out) {
  gdn_check_dims(d, "gdn_sequences");
  const int64_t C = d.conv_dim(), Vd = d.value_dim();
  expect_view(conv_weight, DType::kBF16, {C, d.conv_kernel}, "gdn conv weight");
  expect_view(x, DType::kBF16, {-1, C}, "gdn x");
  expect_view(qkv_out, DType::kBF16, {x.dim(0), C}, "gdn qkv out");
  expect_view(core_out, DType::kBF16, {x.dim(0), Vd}, "gdn core out");
  expect_view(g, DType::kF32, {x.dim(0), d.Hv}, "gdn g");
  expect_view(beta, DType::kF32, {x.dim(0), d.Hv}, "gdn beta");
  if (!conv_weight.is_contiguous()) throw std::invalid_argument("gdn_sequences: the conv weight must be contiguous");
  const int64_t ldx = gdn_row_stride(x, "gdn x"), ldq = gdn_row_stride(qkv_out, "gdn qkv out");
  const int64_t ldo = gdn_row_stride(core_out, "gdn core out");
  const int64_t ldg = gdn_row_stride(g, "gdn g"), ldb = gdn_row_stride(beta, "gdn beta");
  check_gdn_seqs(seqs, x.dim(0), d.conv_kernel, "gdn_sequences");
  // The conv reads raw inputs of earlier rows while writing the output rows: they must not share memory.
  if (x.data == qkv_out.data) throw std::invalid_argument("gdn_sequences: x and qkv_out must be different buffers");
  const int64_t T = x.dim(0), N = static_cast<int64_t>(seqs.size());
  // Launched whatever the descs' rows (a desc without rows does nothing): the launches depend only
  // on N and T, as a captured step needs.
  if (N == 0 || T == 0) return;

  const GdnLaunch p = gdn_plan(d, N, T);
  thread_local std::vector<std::byte> staged;
  gdn_stage(d, seqs, T, gdn_chunked_opt_in(), ctx.info.smem_per_block_optin, staged);
  const std::byte* dev = ctx.upload(std::span<const std::byte>(staged), "gdn_sequences descs");
  const auto* seq_dev = reinterpret_cast<const GdnSeqDev*>(dev);
  const auto* row_seq = reinterpret_cast<const int32_t*>(dev + N * sizeof(GdnSeqDev));
  float* inv = ctx.scratch.take_n<float>(static_cast<std::size_t>(p.inv_floats), "gdn l2norm factors");
  float* decay = ctx.scratch.take_n<float>(static_cast<std::size_t>(p.decay_floats), "gdn decays");
  // Step-wide arguments (row 0 of every tensor); the kernels narrow them to a sequence (conv_for).
  const ConvArgs cp{x.as<const uint16_t>(), ldx, T, C, conv_weight.as<const uint16_t>(), d.conv_kernel, nullptr,
                    qkv_out.as<uint16_t>(), ldq, d.Hk, d.dk, inv, g.as<const float>(), ldg, d.Hv, decay};

  launch_kernel(ctx, "gdn_sequences conv", gdn_conv_kernel, p.conv_blocks, kGdnThreads, 0, cp, seq_dev, row_seq);
  check_launch("gdn_sequences conv", x, qkv_out);
  launch_kernel(ctx, "gdn_sequences conv state, l2norm and decay", gdn_prep_kernel,
                p.state_blocks + p.norm_blocks + p.decay_blocks, kGdnThreads, 0, cp, seq_dev, row_seq, N,
                p.state_blocks, p.norm_blocks);
  check_launch("gdn_sequences conv state, l2norm and decay", x, qkv_out, g);

  RuleArgs ra{};
  ra.qkv = qkv_out.as<const uint16_t>(), ra.ldq = ldq;
  ra.g = g.as<const float>(), ra.ldg = ldg;
  ra.decay = decay;
  ra.beta = beta.as<const float>(), ra.ldb = ldb;
  ra.inv = inv;
  ra.S = nullptr;  // each block's sequence's state, from the staged descs
  ra.out = core_out.as<uint16_t>(), ra.ldo = ldo;
  ra.rows = T;
  ra.Hk = d.Hk, ra.Hv = d.Hv, ra.dk = d.dk, ra.dv = d.dv;
  ra.qscale = p.qscale;
  const dim3 grid(p.rule_heads, p.rule_tiles);
  if (p.rule_unrolled)
    launch_kernel(ctx, "gdn_sequences delta rule", gdn_rule_kernel<kGdnUnrolledDk>, grid, kRuleCols, p.rule_smem,
                  ra, seq_dev);
  else
    launch_kernel(ctx, "gdn_sequences delta rule", gdn_rule_kernel<0>, grid, kRuleCols, p.rule_smem, ra, seq_dev);
  check_launch("gdn_sequences delta rule", qkv_out, core_out, std::string("dk ") + std::to_string(d.dk));
  // The opt-in chunked rule: a launch per sequence it takes (prefills of at least kGdnChunk rows,
  // never part of a pure-decode graph), whose blocks the recurrent launch above skipped.
  for (int64_t i = 0; i < N; ++i) {
    GdnSeqDev s;
    std::memcpy(&s, staged.data() + i * sizeof(GdnSeqDev), sizeof s);
    if (s.chunked) launch_gdn_chunked(ctx, rule_for(ra, s), static_cast<unsigned>(d.Hv), p.rule_tiles, p.chunk_smem);
  }
}

}  // namespace fp4serve::kernels::cuda
