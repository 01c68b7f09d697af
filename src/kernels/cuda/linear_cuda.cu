// The linears on CUDA: weights repacked at load (linear_pack.h), one mma kernel family for every M
// and format (linear_mma.cuh), and the grouped (MoE) launch over an expert-row tile list built on
// the device.
#include "kernels/cuda/linear_cuda.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/linear_mma.cuh"
#include "kernels/cuda/linear_pack.h"

namespace fp4serve::kernels::cuda {
namespace {

// A prepared weight: its device pointers and the geometry the kernel takes (LinearHandle::impl).
struct CudaLinear {
  WeightLayout format = WeightLayout::kBf16;
  PackedKind kind = PackedKind::kBf16;
  LinearWeightDev dev;
  int32_t n = 0, k = 0, n_pad = 0, steps = 0, unit_tiles = 0;
};

// A grouped linear's expert table on the device (GroupedLinear::impl).
struct CudaGrouped {
  CudaLinear shape;  // every expert's geometry (the first expert's pointers, unused)
  const LinearWeightDev* table = nullptr;
  int64_t experts = 0;
};

constexpr int64_t kMaxGridY = 65535;

// A host array as weight memory (through the loader's staging buffers).
template <class T>
T* upload_weight(CudaContext& ctx, const std::vector<T>& host, const char* what) {
  if (host.empty()) return nullptr;
  const std::size_t bytes = host.size() * sizeof(T);
  void* d = ctx.weights.allocate(bytes, what);
  ctx.loader.upload_bytes(d, host.data(), bytes, what);
  return static_cast<T*>(d);
}

// One array of a packed weight: arena memory for `rows` rows of `row_bytes`, packed by `pack` into
// the loader's staging buffers a range of rows at a time (no host copy of the whole array).
template <class Pack>
void* upload_packed(CudaContext& ctx, int64_t rows, std::size_t row_bytes, const char* what, Pack pack) {
  if (rows <= 0 || row_bytes == 0) return nullptr;
  void* d = ctx.weights.allocate(static_cast<std::size_t>(rows) * row_bytes, what);
  ctx.loader.upload(d, rows, row_bytes, pack, what);
  return d;
}

// Calls f.template operator()<KIND, UNITS>() for a weight's kernel instantiation.
template <class F>
void with_kernel(PackedKind kind, bool units, F&& f) {
  switch (kind) {
    case PackedKind::kBf16:
      f.template operator()<PackedKind::kBf16, false>();
      break;
    case PackedKind::kFp8:
      if (units)
        f.template operator()<PackedKind::kFp8, true>();
      else
        f.template operator()<PackedKind::kFp8, false>();
      break;
    case PackedKind::kFp4:
      f.template operator()<PackedKind::kFp4, false>();
      break;
    case PackedKind::kInt4:
      f.template operator()<PackedKind::kInt4, true>();
      break;
  }
}

// Above 48 KB a kernel must opt in to its dynamic shared memory: once per instantiation and
// process (one device per process), at load time (prepare_linear) rather than inside a step.
template <PackedKind KIND, bool UNITS>
void opt_in_smem(const char* op) {
  constexpr std::size_t kSmem = linear_smem_bytes(KIND);
  static const cudaError_t opt_in =
      kSmem > kMaxSmemDefault ? cudaFuncSetAttribute(linear_mma_kernel<KIND, UNITS>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(kSmem))
                              : cudaSuccess;
  check(opt_in, op, "shared memory opt-in");
}

// One launch of the kernel of `w`'s kind over p's outputs (p.outs[*].first_block set) or tiles.
void launch(CudaContext& ctx, const CudaLinear& w, LinearLaunch p, int64_t column_blocks, int64_t row_tiles,
            const char* op, const TensorView& x) {
  p.k = w.k;
  p.steps = w.steps;
  p.unit_tiles = w.unit_tiles;
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(row_tiles));
  with_kernel(w.kind, w.unit_tiles != 0, [&]<PackedKind KIND, bool UNITS>() {
    opt_in_smem<KIND, UNITS>(op);
    launch_kernel(ctx, op, linear_mma_kernel<KIND, UNITS>, grid, kLinearThreads, linear_smem_bytes(KIND), p);
  });
  check_launch(op, x, weight_layout_name(w.format));
}

bool x_allows_vec16(const TensorView& x, int64_t k) {
  return k % 8 == 0 && reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0;
}

// The (expert, row tile) list of a grouped launch: thread e of a block counts expert e's tiles, a
// block-wide inclusive scan places them, then each thread writes its own (experts in blocks of 256,
// in order). Tiles past `bound` are dropped (only bad offsets can make more), so nothing is written
// outside the list; *count = tiles written.
constexpr int kTileThreads = 256;
__global__ void __launch_bounds__(kTileThreads)
    linear_tiles_kernel(const int32_t* offsets, int experts, int64_t rows, int64_t bound, LinearTile* tiles,
                        int32_t* count) {
  __shared__ int64_t scan[kTileThreads];
  const int tid = static_cast<int>(threadIdx.x);
  int64_t base = 0;
  for (int e0 = 0; e0 < experts; e0 += kTileThreads) {
    const int e = e0 + tid;
    int64_t begin = 0, end = 0;
    if (e < experts) expert_rows(offsets, e, rows, &begin, &end);
    const int64_t mine = (end - begin + kBlockM - 1) / kBlockM;
    scan[tid] = mine;
    __syncthreads();
    for (int off = 1; off < kTileThreads; off <<= 1) {
      const int64_t add = tid >= off ? scan[tid - off] : 0;
      __syncthreads();
      scan[tid] += add;
      __syncthreads();
    }
    const int64_t first = base + scan[tid] - mine;
    for (int64_t i = 0; i < mine && first + i < bound; ++i) {
      const int64_t r0 = begin + i * kBlockM, left = end - r0;
      LinearTile t;
      t.expert = e;
      t.row0 = static_cast<int32_t>(r0);
      t.rows = static_cast<int32_t>(left < kBlockM ? left : kBlockM);
      tiles[first + i] = t;
    }
    base += scan[kTileThreads - 1];
    __syncthreads();  // every thread has read scan before the next round overwrites it
  }
  if (tid == 0) *count = static_cast<int32_t>(base < bound ? base : bound);
}

const CudaLinear& linear_of(const LinearHandle& h, const char* op) {
  if (h.impl == nullptr) throw std::invalid_argument(std::string(op) + ": a weight handle not prepared by this backend");
  return *static_cast<const CudaLinear*>(h.impl);
}

}  // namespace

LinearHandle prepare_linear(CudaContext& ctx, const WeightView& w, const ReleaseSource& release) {
  const PackedShape s = packed_shape(w);  // throws for what the kernel cannot take, before any upload
  CudaLinear l;
  l.format = w.format;
  l.kind = s.kind;
  l.n = static_cast<int32_t>(s.n);
  l.k = static_cast<int32_t>(s.k);
  l.n_pad = static_cast<int32_t>(s.n_pad());
  l.steps = static_cast<int32_t>(s.steps);
  l.unit_tiles = s.unit_tiles;
  // Packed in pieces of column tiles (scale units) straight into the staging buffers.
  l.dev.vecs = static_cast<const uint4*>(
      upload_packed(ctx, s.n_tiles, s.word_bytes_per_tile(), "linear weight",
                    [&](int64_t t0, int64_t t1, void* dst) { pack_words_into(s, w, t0, t1, dst); }));
  l.dev.unit_scales = static_cast<const float*>(
      upload_packed(ctx, s.units(), s.unit_scale_bytes_per_unit(), "linear scales",
                    [&](int64_t u0, int64_t u1, void* dst) { pack_unit_scales_into(s, w, u0, u1, dst); }));
  l.dev.fp4_scales = static_cast<const uint8_t*>(
      upload_packed(ctx, s.n_tiles, s.fp4_scale_bytes_per_tile(), "linear block scales",
                    [&](int64_t t0, int64_t t1, void* dst) { pack_fp4_scales_into(s, w, t0, t1, dst); }));
  l.dev.tensor_scale = s.tensor_scale;
  // Every byte the device needs is staged: the checkpoint's pages of this weight may go now.
  if (release)
    for (auto bytes : weight_source_bytes(w)) release(bytes);
  with_kernel(l.kind, l.unit_tiles != 0, [&]<PackedKind KIND, bool UNITS>() { opt_in_smem<KIND, UNITS>("prepare_linear"); });
  return LinearHandle{ctx.keep(l), w.n, w.k, w.format};
}

void linears(CudaContext& ctx, const TensorView& x, std::span<const LinearOut> outs) {
  expect_view(x, DType::kBF16, {-1, -1}, "linears x");
  if (!x.is_contiguous()) throw std::invalid_argument("linears: x must be contiguous");
  const int64_t M = x.dim(0), K = x.dim(1);
  for (const LinearOut& o : outs) {
    const CudaLinear& w = linear_of(o.w, "linears");
    if (w.k != K) throw std::invalid_argument("linears: weight of K " + std::to_string(w.k) + " for x of K " + std::to_string(K));
    expect_view(o.out, DType::kF32, {M, w.n}, "linears out");
  }
  const int64_t row_tiles = (M + kBlockM - 1) / kBlockM;
  if (row_tiles > kMaxGridY) throw std::invalid_argument("linears: " + std::to_string(M) + " rows exceed one launch");
  if (M == 0) return;
  // Outputs of one kernel instantiation share a launch (up to kMaxLaunchOutputs): q/k/v, gate/up.
  // Each output's blocks compute exactly what they would alone.
  std::vector<LaunchKey> keys;
  for (const LinearOut& o : outs) {
    const CudaLinear& w = linear_of(o.w, "linears");
    keys.push_back({w.kind, w.unit_tiles});
  }
  for (const std::vector<int>& group : plan_launches(keys, kMaxLaunchOutputs)) {
    LinearLaunch p;
    p.outputs = 0;
    int64_t blocks = 0;
    for (int j : group) {
      const CudaLinear& w = linear_of(outs[static_cast<size_t>(j)].w, "linears");
      LinearOutDev& o = p.outs[p.outputs++];
      o.w = w.dev;
      o.y = outs[static_cast<size_t>(j)].out.as<float>();
      o.ldy = outs[static_cast<size_t>(j)].out.stride[0];
      o.n = w.n;
      o.n_pad = w.n_pad;
      o.first_block = static_cast<int32_t>(blocks);
      blocks += w.n_pad / kBlockN;
    }
    if (blocks > INT32_MAX) throw std::invalid_argument("linears: outputs too wide for one launch");
    p.x = x.as<const uint16_t>();
    p.ldx = K;
    p.m = M;
    p.x_vec16 = x_allows_vec16(x, K);
    launch(ctx, linear_of(outs[static_cast<size_t>(group[0])].w, "linears"), p, blocks, row_tiles, "linears", x);
  }
}

GroupedLinear prepare_grouped(CudaContext& ctx, std::span<const LinearHandle> experts) {
  if (experts.empty()) throw std::invalid_argument("prepare_grouped: no experts");
  const CudaLinear& first = linear_of(experts[0], "prepare_grouped");
  std::vector<LinearWeightDev> table;
  for (const LinearHandle& h : experts) {
    const CudaLinear& w = linear_of(h, "prepare_grouped");
    if (w.kind != first.kind || w.n != first.n || w.k != first.k || w.unit_tiles != first.unit_tiles)
      throw std::invalid_argument("prepare_grouped: experts of different formats or shapes (" +
                                  std::string(weight_layout_name(w.format)) + " [" + std::to_string(w.n) + ", " +
                                  std::to_string(w.k) + "] vs " + weight_layout_name(first.format) + " [" +
                                  std::to_string(first.n) + ", " + std::to_string(first.k) + "])");
    table.push_back(w.dev);
  }
  CudaGrouped g;
  g.shape = first;
  g.experts = static_cast<int64_t>(experts.size());
  g.table = upload_weight(ctx, table, "grouped linear table");
  return GroupedLinear{ctx.keep(g), g.experts, first.n, first.k};
}

void grouped_linear(CudaContext& ctx, const GroupedLinear& g, const TensorView& x, const int32_t* offsets,
                    const TensorView& out) {
  if (g.impl == nullptr) throw std::invalid_argument("grouped_linear: not prepared by this backend");
  const auto& gl = *static_cast<const CudaGrouped*>(g.impl);
  expect_view(x, DType::kBF16, {-1, gl.shape.k}, "grouped_linear x");
  if (!x.is_contiguous()) throw std::invalid_argument("grouped_linear: x must be contiguous");
  const int64_t R = x.dim(0);
  expect_view(out, DType::kF32, {R, gl.shape.n}, "grouped_linear out");
  if (offsets == nullptr) throw std::invalid_argument("grouped_linear: null offsets");
  const int64_t bound = grouped_tile_bound(R, gl.experts);
  if (bound > kMaxGridY || R > INT32_MAX)
    throw std::invalid_argument("grouped_linear: " + std::to_string(R) + " rows exceed one launch");
  if (R == 0) return;
  auto* tiles = ctx.scratch.take_n<LinearTile>(static_cast<std::size_t>(bound), "grouped_linear tiles");
  auto* count = ctx.scratch.take_n<int32_t>(1, "grouped_linear tile count");
  launch_kernel(ctx, "grouped_linear tiles", linear_tiles_kernel, 1, kTileThreads, 0, offsets,
                static_cast<int>(gl.experts), R, bound, tiles, count);
  check_launch("grouped_linear tiles", x, out);
  LinearLaunch p;
  p.outs[0].y = out.as<float>();
  p.outs[0].ldy = out.stride[0];
  p.outs[0].n = gl.shape.n;
  p.outs[0].n_pad = gl.shape.n_pad;
  p.table = gl.table;
  p.tiles = tiles;
  p.tile_count = count;
  p.x = x.as<const uint16_t>();
  p.ldx = gl.shape.k;
  p.m = R;
  p.x_vec16 = x_allows_vec16(x, gl.shape.k);
  launch(ctx, gl.shape, p, gl.shape.n_pad / kBlockN, bound, "grouped_linear", x);
}

}  // namespace fp4serve::kernels::cuda
