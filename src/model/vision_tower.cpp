#include "model/vision_tower.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/bf16.h"
#include "model/vision_positions.h"

namespace fp4serve::model {
namespace {

using kernels::Activation;
using kernels::LinearOut;
using kernels::TensorView;

// The per-call buffers of one encode, sized for N patches.
struct Sizes {
  int64_t N, P, H, I, M, O, D, U;  // U: patches per merged row (merge^2)
  int64_t f32_cols() const { return std::max({3 * H, I, M / U, (O + U - 1) / U, H}); }
};

}  // namespace

VisionTower::VisionTower(VisionConfig config, VisionWeights weights, kernels::Backend& backend,
                         std::shared_ptr<const void> keep_alive)
    : config_(std::move(config)), weights_(std::move(weights)), backend_(&backend), keep_alive_(std::move(keep_alive)) {}

void VisionTower::check(const vision::PixelPatches& im) const {
  const auto& g = im.grid;
  const int64_t m = config_.spatial_merge_size;
  auto fail = [&](const std::string& why) { throw std::invalid_argument("vision tower: " + why); };
  if (im.patch_dim != config_.patch_dim())
    fail("patches of " + std::to_string(im.patch_dim) + " values, the tower takes " + std::to_string(config_.patch_dim()));
  if (g.t < 1 || g.h < m || g.w < m || g.h % m != 0 || g.w % m != 0)
    fail("grid " + std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) +
         " is not a whole number of " + std::to_string(m) + "x" + std::to_string(m) + " merge blocks");
  if (g.num_patches() > (int64_t{1} << 24)) fail("too many patches");
  if (static_cast<int64_t>(im.values.size()) != g.num_patches() * im.patch_dim)
    fail(std::to_string(im.values.size()) + " pixel values for " + std::to_string(g.num_patches()) + " patches of " +
         std::to_string(im.patch_dim));
}

int64_t VisionTower::activation_bytes(int64_t N) const {
  const VisionConfig& c = config_;
  const int64_t U = c.spatial_merge_size * c.spatial_merge_size;
  const Sizes s{N, c.patch_dim(), c.hidden_size, c.intermediate_size, c.merged_dim(), c.out_hidden_size, c.head_dim(), U};
  const int64_t bf16 = 2, f32 = 4;
  return N * s.P * (f32 + bf16) + 3 * N * s.H * bf16 + N * s.f32_cols() * f32 + N * 3 * s.H * bf16 + N * s.H * bf16 +
         N * s.I * bf16 + (N / s.U) * s.M * bf16 + (N / s.U) * s.O * bf16 + 2 * N * s.D * f32 + 2 * N * s.H * f32;
}

std::vector<float> VisionTower::encode(const vision::PixelPatches& image) const {
  return encode_batch(std::span<const vision::PixelPatches>(&image, 1));
}

std::vector<float> VisionTower::encode_batch(std::span<const vision::PixelPatches> images) const {
  const VisionConfig& c = config_;
  kernels::Backend& be = *backend_;
  const int merge = static_cast<int>(c.spatial_merge_size);
  int64_t N = 0;
  for (const auto& im : images) {
    check(im);
    N += im.grid.num_patches();
  }
  if (N == 0) return {};
  const int64_t U = c.spatial_merge_size * c.spatial_merge_size;
  const Sizes s{N, c.patch_dim(), c.hidden_size, c.intermediate_size, c.merged_dim(), c.out_hidden_size, c.head_dim(), U};
  const int64_t heads = c.num_heads;

  // Host inputs: pixels, the interpolated position embedding, the rotary tables, the segments.
  std::vector<float> cos, sin;
  std::vector<uint16_t> pos;
  std::vector<kernels::DenseSegment> segments;
  cos.reserve(static_cast<size_t>(N * s.D));
  sin.reserve(static_cast<size_t>(N * s.D));
  pos.reserve(static_cast<size_t>(N * s.H));
  int64_t row = 0;
  for (const auto& im : images) {
    append_vision_rotary(im.grid, merge, static_cast<int>(s.D), c.rope_theta, cos, sin);
    append_vision_pos_embed(im.grid, merge, weights_.pos_embed, c.grid_side(), s.H, pos);
    // One attention segment per temporal slice of an image (cu_seqlens repeats h*w per frame).
    for (int t = 0; t < im.grid.t; ++t) {
      segments.push_back({row, static_cast<int64_t>(im.grid.h) * im.grid.w});
      row += static_cast<int64_t>(im.grid.h) * im.grid.w;
    }
  }

  auto buf = [&](DType dt, int64_t rows, int64_t cols, const char* what) {
    const auto b = be.allocate(static_cast<size_t>(rows * cols) * dtype_size(dt), what);
    return std::pair{b, b.view(dt, {rows, cols})};
  };
  auto [px32_b, px32] = buf(DType::kF32, N, s.P, "vision pixels");
  auto [px_b, px] = buf(DType::kBF16, N, s.P, "vision pixels bf16");
  auto [x_b, x] = buf(DType::kBF16, N, s.H, "vision hidden");
  auto [xn_b, xn] = buf(DType::kBF16, N, s.H, "vision normed");
  auto [tmp_b, tmp] = buf(DType::kBF16, N, s.H, "vision branch");
  auto [f_b, f_all] = buf(DType::kF32, N, s.f32_cols(), "vision linear out");
  auto [qkv_b, qkv] = buf(DType::kBF16, N, 3 * s.H, "vision qkv");
  auto [att_b, att] = buf(DType::kBF16, N, s.H, "vision attention out");
  auto [mlp_b, mlp] = buf(DType::kBF16, N, s.I, "vision mlp");
  auto [m1_b, m1] = buf(DType::kBF16, N / U, s.M, "vision merger");
  auto [out_b, out] = buf(DType::kBF16, N / U, s.O, "vision features");
  auto [cos_b, cosv] = buf(DType::kF32, N, s.D, "vision rotary cos");
  auto [sin_b, sinv] = buf(DType::kF32, N, s.D, "vision rotary sin");
  be.upload(cosv, cos.data());
  be.upload(sinv, sin.data());
  row = 0;
  for (const auto& im : images) {
    be.upload(px32.rows(row, im.grid.num_patches()), im.values.data());
    row += im.grid.num_patches();
  }

  // out = bias_act(x @ W^T): a linear with its bias (and activation) as HF's bf16 nn.Linear.
  auto linear = [&](const TensorView& in, const VisionLinear& l, Activation act, const TensorView& dst) {
    const TensorView f = f_b.view(DType::kF32, {in.dim(0), l.w.n});
    const LinearOut o{l.w, f};
    be.linears(in, std::span<const LinearOut>(&o, 1));
    be.bias_activation(f, l.bias, act, dst);
  };

  // Patch embedding (Conv3d with kernel = stride on bf16 pixels) + position embedding.
  be.to_bf16(px32, px);
  linear(px, weights_.patch_embed, Activation::kNone, x);
  be.upload(tmp, pos.data());
  be.residual_add(x, tmp);

  // q, k, v: [N, heads, D] views into the fused qkv rows (q | k | v).
  auto head_view = [&](int part) {
    TensorView v = qkv;
    v.data = static_cast<char*>(qkv.data) + static_cast<size_t>(part * s.H) * 2;
    v.rank = 3;
    v.shape = {N, heads, s.D, 0};
    v.stride = {3 * s.H, s.D, 1, 0};
    return v;
  };
  const TensorView q = head_view(0), k = head_view(1), v = head_view(2);
  const float eps = c.layer_norm_eps;
  for (const VisionBlockWeights& b : weights_.blocks) {
    be.layernorm(x, b.norm1.w, b.norm1.b, eps, xn);
    linear(xn, b.qkv, Activation::kNone, qkv);
    be.rope_table(q, cosv, sinv);
    be.rope_table(k, cosv, sinv);
    be.dense_attention(segments, q, k, v, att, math_);
    linear(att, b.proj, Activation::kNone, tmp);
    be.residual_add(x, tmp);
    be.layernorm(x, b.norm2.w, b.norm2.b, eps, xn);
    linear(xn, b.fc1, c.mlp_activation(), mlp);
    linear(mlp, b.fc2, Activation::kNone, tmp);
    be.residual_add(x, tmp);
  }

  // Merger: LayerNorm per patch, 2x2 neighbours (consecutive rows) as one row, fc1 + exact GELU, fc2.
  be.layernorm(x, weights_.merger_norm.w, weights_.merger_norm.b, eps, xn);
  linear(xn.reshaped({N / U, s.M}), weights_.merger_fc1, Activation::kGeluErf, m1);
  linear(m1, weights_.merger_fc2, Activation::kNone, out);

  std::vector<uint16_t> host(static_cast<size_t>(out.numel()));
  be.download(host.data(), out);
  std::vector<float> features(host.size());
  kernels::bf16_to_f32(host.data(), features.data(), static_cast<int64_t>(host.size()));
  return features;
}

}  // namespace fp4serve::model
