// Gated DeltaNet on CUDA: the gating, and per sequence the causal conv1d, the conv-state shift, the
// l2norm factors and the recurrent delta rule (gdn_plan.h lays out the launches). Every kernel
// here repeats the CPU op's operation sequence (cpu/gdn_cpu.cpp, kernels_scalar.cpp's gdn_step), so
// the results are the CPU's bits, and a sequence's rows give the same bits however they are split
// (the opt-in chunked rule, gdn_chunked.cu, excepted).
#include "kernels/cuda/gdn_cuda.h"

#include <stdexcept>
#include <string>

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

// The sequence's state pointers come from staged memory (`st`, one upload per call), not from the
// by-value arguments: a step graph replays these launches for whichever state slot the step has.
__global__ void gdn_conv_kernel(const ConvArgs args, const GdnStateRef* __restrict__ st) {
  ConvArgs p = args;
  p.state = st->conv;
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n < p.rows * p.C) conv_element(p, n);
}

// Blocks [0, state_blocks): the conv-state shift, a thread per channel; the next norm_blocks: the
// l2norm factors, a thread per (row, q|k, k head); the rest: the decays, a thread per (row, v head).
// After gdn_conv_kernel on the stream: the shift must follow every read of the old state, and the
// factors read the conv output.
__global__ void gdn_prep_kernel(const ConvArgs args, const GdnStateRef* __restrict__ st, unsigned state_blocks,
                                unsigned norm_blocks) {
  ConvArgs p = args;
  p.state = st->conv;
  if (blockIdx.x < state_blocks) {
    const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (c < p.C) state_shift(p, c);
    return;
  }
  if (blockIdx.x < state_blocks + norm_blocks) {
    const int64_t n = (blockIdx.x - state_blocks) * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (n < p.rows * 2 * p.Hk) l2norm_factor(p, n);
    return;
  }
  const int64_t n = (blockIdx.x - state_blocks - norm_blocks) * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n < p.rows * p.Hv) decay_factor(p, n);
}

// Block (v head, column tile), one warp: lane owns one column of S[h] in the block's shared S
// tile (only its own column, so S needs no synchronization). kDk = kGdnUnrolledDk fixes dk at
// compile time, so the sweeps unroll fully and the column's loads can all be in flight at once
// (decode is a load, two sweeps and a store of S); kDk = 0 takes any dk. q, k of a token are
// staged in one of two shared buffers for all lanes: token t+1's while token t's is read
// (rule_update fuses t's second sweep with t+1's first). Per token: stage t+1, synchronize,
// update t, synchronize (t's buffer is restaged with t+2 next). Token data is loaded two tokens
// ahead. Every lane, in range or not, reaches every __syncthreads (the loop bounds and `next` are
// the same for the whole block).
template <int kDk>
__global__ void __launch_bounds__(kRuleCols) gdn_rule_kernel(const RuleArgs args, const GdnStateRef* __restrict__ st) {
  extern __shared__ float smem[];
  RuleArgs a = args;
  a.S = st->ssm;  // the S tile [dk][kRuleCols], then q0, q1, k0, k1 [dk] each
  const int dk = rule_dk<kDk>(a);
  float* qk = smem + dk * kRuleCols;
  auto qs = [&](int b) { return qk + dk * b; };
  auto ks = [&](int b) { return qk + dk * (2 + b); };
  const RuleLane l = rule_lane(a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
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

void gdn_sequence(CudaContext& ctx, const GdnDims& d, const TensorView& conv_weight, const GdnSeqDesc& seq,
                  const TensorView& x, const TensorView& g, const TensorView& beta, const TensorView& qkv_out,
                  const TensorView& core_out) {
  gdn_check_dims(d, "gdn_sequence");
  const int64_t C = d.conv_dim(), Vd = d.value_dim();
  expect_view(conv_weight, DType::kBF16, {C, d.conv_kernel}, "gdn conv weight");
  expect_view(x, DType::kBF16, {-1, C}, "gdn x");
  expect_view(qkv_out, DType::kBF16, {x.dim(0), C}, "gdn qkv out");
  expect_view(core_out, DType::kBF16, {x.dim(0), Vd}, "gdn core out");
  expect_view(g, DType::kF32, {x.dim(0), d.Hv}, "gdn g");
  expect_view(beta, DType::kF32, {x.dim(0), d.Hv}, "gdn beta");
  if (!conv_weight.is_contiguous()) throw std::invalid_argument("gdn_sequence: the conv weight must be contiguous");
  const int64_t ldx = gdn_row_stride(x, "gdn x"), ldq = gdn_row_stride(qkv_out, "gdn qkv out");
  const int64_t ldo = gdn_row_stride(core_out, "gdn core out");
  const int64_t ldg = gdn_row_stride(g, "gdn g"), ldb = gdn_row_stride(beta, "gdn beta");
  const int64_t r0 = seq.seq.row0, rows = seq.seq.rows;
  if (rows == 0) return;
  if (r0 < 0 || rows < 0 || r0 + rows > x.dim(0)) throw std::invalid_argument("gdn_sequence: fewer rows than the step");
  if (seq.state.ssm == nullptr || (d.conv_kernel > 1 && seq.state.conv == nullptr))
    throw std::invalid_argument("gdn_sequence: the sequence has no state");
  // The conv reads raw inputs of earlier rows while writing the output rows: they must not share memory.
  if (x.data == qkv_out.data) throw std::invalid_argument("gdn_sequence: x and qkv_out must be different buffers");

  const GdnLaunch p = gdn_plan(d, rows, gdn_chunked_opt_in());
  float* inv = ctx.scratch.take_n<float>(static_cast<std::size_t>(p.inv_floats), "gdn l2norm factors");
  float* decay = ctx.scratch.take_n<float>(static_cast<std::size_t>(p.decay_floats), "gdn decays");
  const uint16_t* xs = x.as<const uint16_t>() + r0 * ldx;
  uint16_t* qkv = qkv_out.as<uint16_t>() + r0 * ldq;
  const float* gs = g.as<const float>() + r0 * ldg;
  // The state pointers travel in staged memory (the kernels' `st`), not in the arguments.
  const ConvArgs cp{
      xs, ldx, rows, C,    conv_weight.as<const uint16_t>(), d.conv_kernel, nullptr, qkv, ldq, d.Hk, d.dk, inv,
      gs, ldg, d.Hv, decay};
  const GdnStateRef* st = ctx.upload(std::span<const GdnStateRef>(&seq.state, 1), "gdn_sequence state");

  launch_kernel(ctx, "gdn_sequence conv", gdn_conv_kernel, p.conv_blocks, kGdnThreads, 0, cp, st);
  check_launch("gdn_sequence conv", x, qkv_out);
  launch_kernel(ctx, "gdn_sequence conv state, l2norm and decay", gdn_prep_kernel,
                p.state_blocks + p.norm_blocks + p.decay_blocks, kGdnThreads, 0, cp, st, p.state_blocks, p.norm_blocks);
  check_launch("gdn_sequence conv state, l2norm and decay", x, qkv_out, g);

  RuleArgs ra{};
  ra.qkv = qkv, ra.ldq = ldq;
  ra.g = gs, ra.ldg = ldg;
  ra.decay = decay;
  ra.beta = beta.as<const float>() + r0 * ldb, ra.ldb = ldb;
  ra.inv = inv;
  ra.S = nullptr;  // the recurrent rule reads st->ssm
  ra.out = core_out.as<uint16_t>() + r0 * ldo, ra.ldo = ldo;
  ra.rows = rows;
  ra.Hk = d.Hk, ra.Hv = d.Hv, ra.dk = d.dk, ra.dv = d.dv;
  ra.qscale = p.qscale;
  if (p.chunked && p.chunk_smem <= ctx.info.smem_per_block_optin) {
    ra.S = seq.state.ssm;  // prefill only (>= kGdnChunk rows): never part of a pure-decode graph
    launch_gdn_chunked(ctx, ra, p.rule_heads, p.rule_tiles, p.chunk_smem);
    return;
  }
  const dim3 grid(p.rule_heads, p.rule_tiles);
  if (p.rule_unrolled)
    launch_kernel(ctx, "gdn_sequence delta rule", gdn_rule_kernel<kGdnUnrolledDk>, grid, kRuleCols, p.rule_smem, ra,
                  st);
  else
    launch_kernel(ctx, "gdn_sequence delta rule", gdn_rule_kernel<0>, grid, kRuleCols, p.rule_smem, ra, st);
  check_launch("gdn_sequence delta rule", qkv_out, core_out, std::string("dk ") + std::to_string(d.dk));
}

}  // namespace fp4serve::kernels::cuda
