// Attention on CUDA: the host half of kv_write, attention and dense_attention (argument checks as the
// CPU twin's, the per-sequence descriptors and block tables uploaded, the plan's launches) and the
// kv_write kernel. attention_kernels.cuh holds the attention kernels, attention_plan.h the plan.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_numerics.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/step_graph.h"

namespace fp4serve::kernels::cuda {
namespace {

using attn::Item;
using attn::OpArgs;
using attn::SeqArgs;

// kv_write: one block per written token row.
struct WriteRow {
  int32_t seq;
  int32_t t;
};

__global__ void __launch_bounds__(256) kv_write_kernel(const SeqArgs* seqs, const WriteRow* rows, int64_t row_elems) {
  const WriteRow w = rows[blockIdx.x];
  const SeqArgs& S = seqs[w.seq];
  const int64_t p = S.pos0 + w.t;
  const int64_t dst_row = S.table == nullptr
                              ? p
                              : static_cast<int64_t>(S.table[p / S.block_size]) * S.block_size + p % S.block_size;
  // S.q / S.gate carry the step's k and v rows (row stride ldq / ldg); S.k / S.v the cache.
  const uint16_t* k = S.q + w.t * S.ldq;
  const uint16_t* v = S.gate + w.t * S.ldg;
  const int64_t off = dst_row * S.ldk;
  for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) {
    if (S.fp8) {
      // The CPU's f32_to_e4m3(bf16 / scale): IEEE division, then round to nearest even, saturating.
      static_cast<uint8_t*>(const_cast<void*>(S.k))[off + i] =
          attn::f32_to_e4m3(__fdiv_rn(attn::bf16_bits_to_f32(k[i]), S.k_scale));
      static_cast<uint8_t*>(const_cast<void*>(S.v))[off + i] =
          attn::f32_to_e4m3(__fdiv_rn(attn::bf16_bits_to_f32(v[i]), S.v_scale));
    } else {
      static_cast<uint16_t*>(const_cast<void*>(S.k))[off + i] = k[i];
      static_cast<uint16_t*>(const_cast<void*>(S.v))[off + i] = v[i];
    }
  }
}

// The CPU's check_view, and the positions [pos0, pos0 + rows) inside the cache.
void check_kv(const KvView& kv, int64_t pos0, int64_t rows, const char* op) {
  const std::string o(op);
  if (kv.k == nullptr || kv.v == nullptr || kv.n_kv_heads <= 0 || kv.head_dim <= 0)
    throw std::invalid_argument(o + ": kv cache view: null storage or empty head shape");
  if (kv.block_table != nullptr && kv.block_size <= 0)
    throw std::invalid_argument(o + ": kv cache view: paged layout needs block_size > 0");
  if (kv.dtype == KvDtype::kFp8E4M3 && !(kv.k_scale > 0.0f && kv.v_scale > 0.0f))
    throw std::invalid_argument(o + ": kv cache view: fp8 k_scale/v_scale must be > 0");
  if (pos0 < 0) throw std::out_of_range(o + ": negative position");
  const int64_t last = pos0 + rows - 1;
  if (kv.block_table == nullptr) {
    if (last >= kv.capacity)
      throw std::out_of_range(o + ": kv cache: position " + std::to_string(last) + " outside capacity " +
                              std::to_string(kv.capacity));
  } else if (last / kv.block_size >= kv.num_table_entries) {
    throw std::out_of_range(o + ": kv cache: position " + std::to_string(last) + " beyond the block table (" +
                            std::to_string(kv.num_table_entries) + " blocks of " + std::to_string(kv.block_size) +
                            ")");
  }
}

// Appends the block-table entries positions 0 .. keys-1 use; returns their offset (or -1 contiguous).
int64_t append_table(const KvView& kv, int64_t keys, std::vector<int32_t>& tables, const char* op) {
  if (kv.block_table == nullptr) return -1;
  const int64_t offset = static_cast<int64_t>(tables.size());
  const int64_t blocks = (keys + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < blocks; ++b) {
    if (kv.block_table[b] < 0) throw std::invalid_argument(std::string(op) + ": negative block in the block table");
    tables.push_back(kv.block_table[b]);
  }
  return offset;
}

// Device pointers into the uploaded tables. Eager: an upload per op. In a step graph the tables'
// size changes with the context lengths, so they do not go through an upload slot: they are copied
// (live entries only, outside the graph, before its launch) into the context's graph table buffer,
// at an address the per-sequence descriptors carry (staged data), once per forward: every attention
// layer's kv_write and attention read the same tables (one block table per sequence across layers),
// so the first op of the forward that has them places them and the next ops whose (table, keys)
// list is the same reuse them.
void resolve_tables(CudaContext& ctx, std::vector<SeqArgs>& args, const std::vector<int64_t>& offsets,
                    const std::vector<int32_t>& tables, const std::vector<GraphTableKey>& key, int64_t block_size,
                    const char* op) {
  const int32_t* dev = nullptr;
  if (ctx.graph.mode() == GraphMode::kEager || tables.empty()) {
    dev = ctx.upload(std::span<const int32_t>(tables), op);
  } else if (ctx.graph_tables.device != nullptr && ctx.graph_tables.key == key) {
    dev = ctx.graph_tables.device;
  } else {
    dev = place_graph_tables(ctx, tables, block_size, op);
    ctx.graph_tables.key = key;
    ctx.graph_tables.device = dev;
  }
  for (std::size_t i = 0; i < args.size(); ++i) args[i].table = offsets[i] < 0 ? nullptr : dev + offsets[i];
}

void expect_token_rows(const TensorView& v, int64_t T, int64_t H, int64_t D, const char* what) {
  expect_view(v, DType::kBF16, {T, H, D}, what);
  if (v.stride[1] != D || v.stride[0] < H * D)
    throw std::invalid_argument(std::string(what) + ": heads must be contiguous within a token row");
}

void expect_rows_2d(const TensorView& v, int64_t T, int64_t N, const char* what) {
  expect_view(v, DType::kBF16, {T, N}, what);
  if (v.stride[0] < N) throw std::invalid_argument(std::string(what) + ": overlapping rows");
}

// Whether K/V rows can be read 4 elements at a time (attention_kernels.cuh's load_tile).
int32_t vec4_ok(const SeqArgs& a, int64_t D) {
  const std::uintptr_t align = a.fp8 ? 4 : 8;
  return D % 4 == 0 && a.ldk % 4 == 0 && a.ldv % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.k) % align == 0 &&
         reinterpret_cast<std::uintptr_t>(a.v) % align == 0;
}

// The attention launches per op: the planning kernel, then the plan's three steps over `args`.
//
// One code path, eager and in step graphs: the plan is always computed on the device
// (attention_plan.h). A graph needs it (the host plan's item lists and grids follow the context
// lengths, which replays change); eager uses it too so that what a replay runs is what eager runs,
// and because it costs about what the host plan cost: one 1-block launch in place of the item
// lists' host work and uploads, and the split path's scratch is the reserved budget taken, not
// allocated. The grids are min(bound, kGridBlocksPerSm x SMs), the bounds (plan_bounds) following
// the row counts only; each block loops over the items the plan wrote.
inline constexpr int64_t kGridBlocksPerSm = 4;
const void* g_last_plan_counts = nullptr;  // last_attention_plan_counts()
inline constexpr std::size_t kMaxPlanSeqs = (48 * 1024) / sizeof(attn::PlanSeq);  // the planning kernel's smem

template <bool kDense>
void launch_attention(CudaContext& ctx, std::span<const attn::PlanSeq> plan_seqs, const std::vector<SeqArgs>& args,
                      int D, std::size_t budget, bool eager, const char* op) {
  attn::check_plan_seqs(plan_seqs, D);
  if (plan_seqs.size() > kMaxPlanSeqs)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(plan_seqs.size()) +
                                " sequences in one op, above the planning kernel's " + std::to_string(kMaxPlanSeqs));
  const attn::PlanBounds bounds = attn::plan_bounds(plan_seqs, D, budget);
  const int64_t n = static_cast<int64_t>(plan_seqs.size());
  const SeqArgs* dev_seqs = ctx.upload(std::span<const SeqArgs>(args), op);

  attn::PlanArgs P;
  P.seqs = dev_seqs;
  P.n = n;
  P.head_dim = D;
  P.budget = static_cast<std::size_t>(bounds.max_partials) * attn::partial_bytes(D);
  P.plans = ctx.scratch.take_n<attn::SeqPlan>(static_cast<std::size_t>(n), op);
  P.counts = ctx.scratch.take_n<attn::PlanCounts>(1, op);
  if (!kDense) g_last_plan_counts = P.counts;
  P.first = ctx.scratch.take_n<Item>(static_cast<std::size_t>(bounds.first()), op);
  P.second = bounds.second() > 0 ? ctx.scratch.take_n<Item>(static_cast<std::size_t>(bounds.second()), op) : nullptr;
  P.merge = bounds.merge() > 0 ? ctx.scratch.take_n<Item>(static_cast<std::size_t>(bounds.merge()), op) : nullptr;
  launch_kernel(ctx, "attention plan", attn::attention_plan_kernel, dim3(1), attn::kPlanThreads,
                static_cast<std::size_t>(n) * sizeof(attn::PlanSeq), P);
  check_launch(op, "plan of " + std::to_string(n) + " sequences");

  OpArgs A;
  A.seqs = dev_seqs;
  A.plans = P.plans;
  A.head_dim = D;
  A.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  A.eager = eager ? 1 : 0;
  if (bounds.max_partials > 0) {
    A.stats = static_cast<float2*>(ctx.scratch.take(attn::partial_stats_bytes(bounds.max_partials), op));
    A.opart = static_cast<float*>(ctx.scratch.take(attn::partial_out_bytes(bounds.max_partials, D), op));
    A.spart = static_cast<float*>(ctx.scratch.take(attn::partial_scores_bytes(bounds.max_partials), op));
  }
  const int64_t grid_cap = kGridBlocksPerSm * std::max(ctx.info.sm_count, 1);
  auto launch_items = [&](const Item* items, const int32_t* count, int64_t bound, bool merge) {
    if (bound <= 0) return;
    OpArgs a = A;
    a.items = items;
    a.count = count;
    const dim3 grid(static_cast<unsigned>(std::min(bound, grid_cap)));
    if (merge) {
      launch_kernel(ctx, "attention merge", attn::attention_merge_kernel, grid, attn::kThreads, 0, a);
    } else {
      launch_kernel(ctx, kDense ? "dense_attention items" : "attention items", attn::attention_items_kernel<kDense>,
                    grid, attn::kThreads, 0, a);
    }
    check_launch(op, std::string(merge ? "merge" : "items") + " of at most " + std::to_string(bound));
  };
  launch_items(P.first, &P.counts->first, bounds.first(), false);
  launch_items(P.second, &P.counts->second, bounds.second(), false);
  launch_items(P.merge, &P.counts->merge, bounds.merge(), true);
}

}  // namespace

void kv_write(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) {
  expect_view(k, DType::kBF16, {-1, -1, -1}, "kv_write k");
  const int64_t T = k.dim(0), Hkv = k.dim(1), D = k.dim(2);
  expect_token_rows(k, T, Hkv, D, "kv_write k");
  expect_token_rows(v, T, Hkv, D, "kv_write v");
  std::vector<SeqArgs> args;
  std::vector<int64_t> offsets;
  std::vector<GraphTableKey> table_key;
  int64_t block_size = 1;  // the paged sequences' (sizes the graph table buffer)
  std::vector<int32_t> tables;
  std::vector<WriteRow> rows;
  for (const AttentionSeqDesc& s : seqs) {
    if (s.seq.rows == 0) continue;
    const KvView& kv = s.kv;
    if (s.seq.rows < 0 || s.seq.row0 < 0 || s.seq.row0 + s.seq.rows > T)
      throw std::invalid_argument("kv_write: sequence rows outside the step");
    check_kv(kv, s.seq.pos0, s.seq.rows, "kv_write");
    if (kv.n_kv_heads != Hkv || kv.head_dim != D)
      throw std::invalid_argument("kv_write: the cache's heads differ from k's");
    SeqArgs a{};
    a.q = k.as<const uint16_t>() + s.seq.row0 * k.stride[0];
    a.ldq = k.stride[0];
    a.gate = v.as<const uint16_t>() + s.seq.row0 * v.stride[0];
    a.ldg = v.stride[0];
    a.k = kv.k;
    a.v = kv.v;
    a.ldk = a.ldv = Hkv * D;
    a.block_size = kv.block_size;
    a.pos0 = s.seq.pos0;
    a.rows = s.seq.rows;
    a.fp8 = kv.dtype == KvDtype::kFp8E4M3 ? 1 : 0;
    a.k_scale = kv.k_scale;
    a.v_scale = kv.v_scale;
    offsets.push_back(append_table(kv, s.seq.pos0 + s.seq.rows, tables, "kv_write"));
    table_key.push_back({kv.block_table, s.seq.pos0 + s.seq.rows});
    if (kv.block_table != nullptr) block_size = std::max<int64_t>(block_size, kv.block_size);
    for (int64_t t = 0; t < s.seq.rows; ++t)
      rows.push_back({static_cast<int32_t>(args.size()), static_cast<int32_t>(t)});
    args.push_back(a);
  }
  if (rows.empty()) return;
  resolve_tables(ctx, args, offsets, tables, table_key, block_size, "kv_write");
  const SeqArgs* dev_args = ctx.upload(std::span<const SeqArgs>(args), "kv_write");
  const WriteRow* dev_rows = ctx.upload(std::span<const WriteRow>(rows), "kv_write");
  launch_kernel(ctx, "kv_write", kv_write_kernel, static_cast<unsigned>(rows.size()), 256, 0, dev_args, dev_rows,
                Hkv * D);
  check_launch("kv_write", k, v);
}

void attention(CudaContext& ctx, std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
               const TensorView& out, AttentionMath math) {
  expect_view(q, DType::kBF16, {-1, -1, -1}, "attention q");
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2);
  expect_token_rows(q, T, Hq, D, "attention q");
  expect_rows_2d(gate, T, Hq * D, "attention gate");
  expect_rows_2d(out, T, Hq * D, "attention out");
  if (D > attn::kMaxHeadDim)
    throw std::invalid_argument("attention: head_dim " + std::to_string(D) + " above the CUDA kernels' " +
                                std::to_string(attn::kMaxHeadDim));
  std::vector<SeqArgs> args;
  std::vector<attn::PlanSeq> plan_seqs;
  std::vector<int64_t> offsets;
  std::vector<GraphTableKey> table_key;
  int64_t block_size = 1;  // the paged sequences' (sizes the graph table buffer)
  std::vector<int32_t> tables;
  for (const AttentionSeqDesc& s : seqs) {
    if (s.seq.rows == 0) continue;
    const KvView& kv = s.kv;
    if (s.seq.rows < 0 || s.seq.row0 < 0 || s.seq.row0 + s.seq.rows > T)
      throw std::invalid_argument("attention: sequence rows outside the step");
    check_kv(kv, s.seq.pos0, s.seq.rows, "attention");
    if (Hq % kv.n_kv_heads != 0) throw std::invalid_argument("attention: Hq must be a multiple of Hkv");
    if (kv.head_dim != D) throw std::invalid_argument("attention: the cache's head_dim differs from q's");
    SeqArgs a{};
    a.q = q.as<const uint16_t>() + s.seq.row0 * q.stride[0];
    a.ldq = q.stride[0];
    a.gate = gate.as<const uint16_t>() + s.seq.row0 * gate.stride[0];
    a.ldg = gate.stride[0];
    a.out = out.as<uint16_t>() + s.seq.row0 * out.stride[0];
    a.ldo = out.stride[0];
    a.k = kv.k;
    a.v = kv.v;
    a.ldk = a.ldv = static_cast<int64_t>(kv.n_kv_heads) * D;
    a.block_size = kv.block_size;
    a.rows = s.seq.rows;
    a.pos0 = s.seq.pos0;
    a.k_scale = kv.k_scale;
    a.v_scale = kv.v_scale;
    a.n_kv_heads = kv.n_kv_heads;
    a.group = static_cast<int32_t>(Hq / kv.n_kv_heads);
    a.fp8 = kv.dtype == KvDtype::kFp8E4M3 ? 1 : 0;
    a.causal = 1;
    a.vec4 = vec4_ok(a, D);
    offsets.push_back(append_table(kv, s.seq.pos0 + s.seq.rows, tables, "attention"));
    table_key.push_back({kv.block_table, s.seq.pos0 + s.seq.rows});
    if (kv.block_table != nullptr) block_size = std::max<int64_t>(block_size, kv.block_size);
    args.push_back(a);
    plan_seqs.push_back({s.seq.rows, s.seq.pos0, kv.n_kv_heads, a.group, true});
  }
  if (args.empty()) return;
  // The split budget follows the reserved scratch only: the same in a capture and its replays.
  const std::size_t budget = attn::split_budget(ctx.scratch.capacity());
  resolve_tables(ctx, args, offsets, tables, table_key, block_size, "attention");
  launch_attention<false>(ctx, plan_seqs, args, static_cast<int>(D), budget, math == AttentionMath::kHfEager,
                          "attention");
}

const void* last_attention_plan_counts() { return g_last_plan_counts; }

void dense_attention(CudaContext& ctx, std::span<const DenseSegment> segments, const TensorView& q,
                     const TensorView& k, const TensorView& v, const TensorView& out, AttentionMath math) {
  expect_view(q, DType::kBF16, {-1, -1, -1}, "dense_attention q");
  const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2);
  expect_token_rows(q, T, H, D, "dense_attention q");
  expect_token_rows(k, T, H, D, "dense_attention k");
  expect_token_rows(v, T, H, D, "dense_attention v");
  expect_rows_2d(out, T, H * D, "dense_attention out");
  if (D > attn::kMaxHeadDim)
    throw std::invalid_argument("dense_attention: head_dim " + std::to_string(D) + " above the CUDA kernels' " +
                                std::to_string(attn::kMaxHeadDim));
  for (const DenseSegment& s : segments)
    if (s.row0 < 0 || s.rows < 0 || s.row0 + s.rows > T)
      throw std::out_of_range("dense_attention: segment outside the rows");
  std::vector<SeqArgs> args;
  std::vector<attn::PlanSeq> plan_seqs;
  for (const DenseSegment& s : segments) {
    if (s.rows == 0) continue;
    SeqArgs a{};
    a.q = q.as<const uint16_t>() + s.row0 * q.stride[0];
    a.ldq = q.stride[0];
    a.out = out.as<uint16_t>() + s.row0 * out.stride[0];
    a.ldo = out.stride[0];
    a.k = k.as<const uint16_t>() + s.row0 * k.stride[0];
    a.ldk = k.stride[0];
    a.v = v.as<const uint16_t>() + s.row0 * v.stride[0];
    a.ldv = v.stride[0];
    a.rows = s.rows;
    a.n_kv_heads = static_cast<int32_t>(H);
    a.group = 1;
    a.causal = 0;
    a.vec4 = vec4_ok(a, D);
    args.push_back(a);
    plan_seqs.push_back({s.rows, 0, static_cast<int>(H), 1, false});
  }
  if (args.empty()) return;
  launch_attention<true>(ctx, plan_seqs, args, static_cast<int>(D), 0, math == AttentionMath::kHfEager,
                         "dense_attention");
}

}  // namespace fp4serve::kernels::cuda
