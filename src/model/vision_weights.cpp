#include "model/vision_weights.h"

#include <cstring>
#include <sstream>

#include "checkpoint/checkpoint_error.h"
#include "kernels/bf16.h"
#include "tensor/float_formats.h"

namespace fp4serve::model {
namespace {

using kernels::TensorView;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

class VisionBinder {
 public:
  VisionBinder(const ShardedCheckpoint& files, VisionWeights& w, kernels::Backend& backend)
      : files_(files), w_(w), backend_(backend) {}

  // Records a problem instead of throwing, so that one error lists them all.
  bool check(const std::string& name, const std::vector<int64_t>& shape) {
    const auto e = files_.find(name);
    if (!e.info) {
      problems_.push_back("missing: " + name + " (expected BF16 " + shape_str(shape) + ")");
      return false;
    }
    const DType dt = e.info->dtype;
    if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) {
      problems_.push_back("unsupported dtype: " + name + " is " + std::string(dtype_name(dt)) +
                          "; the vision tower loads BF16 (or F16/F32) weights only, as every release stores them");
      return false;
    }
    if (e.info->shape != shape) {
      problems_.push_back("wrong shape: " + name + " is " + shape_str(e.info->shape) + ", expected " + shape_str(shape));
      return false;
    }
    w_.bytes += e.info->byte_size;
    return true;
  }

  void finish() const {
    if (problems_.empty()) return;
    std::ostringstream o;
    o << "vision tower (model.visual.*): " << problems_.size() << " problem(s):";
    for (const auto& p : problems_) o << "\n  " << p;
    throw CheckpointError(files_.directory().string(), o.str());
  }

  // bf16 bits of a tensor: in place when BF16 on disk, else a converted copy kept in w.owned.
  const uint16_t* bf16_bits(const std::string& name) {
    const auto e = files_.at(name);
    const auto bytes = files_.bytes(name);
    if (e.info->dtype == DType::kBF16) return reinterpret_cast<const uint16_t*>(bytes.data());
    const int64_t n = e.info->numel();
    auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) (*buf)[static_cast<size_t>(i)] = kernels::f32_to_bf16_bits(value(e.info->dtype, bytes, i));
    w_.owned.push_back(buf);
    return buf->data();
  }

  TensorView params(const std::string& name) {
    const auto e = files_.at(name);
    const auto bytes = files_.bytes(name);
    auto host = std::make_shared<std::vector<float>>(static_cast<size_t>(e.info->numel()));
    for (size_t i = 0; i < host->size(); ++i)
      (*host)[i] = kernels::round_bf16(value(e.info->dtype, bytes, static_cast<int64_t>(i)));
    w_.owned.push_back(host);
    return backend_.prepare_tensor(
        TensorView::contiguous(host->data(), DType::kF32, {static_cast<int64_t>(host->size())}));
  }

  VisionLinear linear(const std::string& prefix, int64_t n, int64_t k) {
    const std::string wname = prefix + ".weight";
    const uint16_t* data = bf16_bits(wname);
    const bool in_place = files_.at(wname).info->dtype == DType::kBF16;
    const auto view = kernels::bf16_weight(data, n, k, wname);
    VisionLinear l;
    l.w = backend_.prepare_linear(view, in_place ? kernels::ReleaseSource([this](std::span<const std::byte> r) {
                                                     files_.release_pages(r);
                                                   })
                                                 : kernels::ReleaseSource{});
    l.bias = params(prefix + ".bias");
    return l;
  }

  VisionLayerNorm norm(const std::string& prefix) { return {params(prefix + ".weight"), params(prefix + ".bias")}; }

 private:
  static float value(DType dt, std::span<const std::byte> bytes, int64_t i) {
    const auto* p = bytes.data();
    if (dt == DType::kBF16) {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return bf16_to_f32(b);
    }
    if (dt == DType::kF16) {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return f16_to_f32(b);
    }
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }

  const ShardedCheckpoint& files_;
  VisionWeights& w_;
  kernels::Backend& backend_;
  std::vector<std::string> problems_;
};

}  // namespace

bool has_vision_tensors(const ShardedCheckpoint& files) {
  for (const auto& name : files.tensor_names())
    if (name.rfind(kVisionPrefix, 0) == 0) return true;
  return false;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> vision_tensor_shapes(const VisionConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  const std::string p = kVisionPrefix;
  const int64_t H = c.hidden_size, I = c.intermediate_size, M = c.merged_dim();
  auto linear = [&](const std::string& name, int64_t n, int64_t k) {
    out.push_back({name + ".weight", {n, k}});
    out.push_back({name + ".bias", {n}});
  };
  out.push_back({p + "patch_embed.proj.weight", {H, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}});
  out.push_back({p + "patch_embed.proj.bias", {H}});
  out.push_back({p + "pos_embed.weight", {c.num_position_embeddings, H}});
  for (int64_t l = 0; l < c.depth; ++l) {
    const std::string bp = p + "blocks." + std::to_string(l) + ".";
    for (const char* n : {"norm1", "norm2"}) {
      out.push_back({bp + n + ".weight", {H}});
      out.push_back({bp + n + ".bias", {H}});
    }
    linear(bp + "attn.qkv", 3 * H, H);
    linear(bp + "attn.proj", H, H);
    linear(bp + "mlp.linear_fc1", I, H);
    linear(bp + "mlp.linear_fc2", H, I);
  }
  out.push_back({p + "merger.norm.weight", {H}});
  out.push_back({p + "merger.norm.bias", {H}});
  linear(p + "merger.linear_fc1", M, M);
  linear(p + "merger.linear_fc2", c.out_hidden_size, M);
  return out;
}

VisionWeights bind_vision_weights(const ShardedCheckpoint& files, const VisionConfig& c, kernels::Backend& backend) {
  VisionWeights w;
  VisionBinder b(files, w, backend);
  const std::string p = kVisionPrefix;
  const int64_t H = c.hidden_size, I = c.intermediate_size, M = c.merged_dim();
  for (const auto& [name, shape] : vision_tensor_shapes(c)) b.check(name, shape);
  b.finish();

  w.patch_embed = b.linear(p + "patch_embed.proj", H, c.patch_dim());
  w.pos_embed = b.bf16_bits(p + "pos_embed.weight");
  for (int64_t l = 0; l < c.depth; ++l) {
    const std::string bp = p + "blocks." + std::to_string(l) + ".";
    VisionBlockWeights blk;
    blk.norm1 = b.norm(bp + "norm1");
    blk.norm2 = b.norm(bp + "norm2");
    blk.qkv = b.linear(bp + "attn.qkv", 3 * H, H);
    blk.proj = b.linear(bp + "attn.proj", H, H);
    blk.fc1 = b.linear(bp + "mlp.linear_fc1", I, H);
    blk.fc2 = b.linear(bp + "mlp.linear_fc2", H, I);
    w.blocks.push_back(blk);
  }
  w.merger_norm = b.norm(p + "merger.norm");
  w.merger_fc1 = b.linear(p + "merger.linear_fc1", M, M);
  w.merger_fc2 = b.linear(p + "merger.linear_fc2", c.out_hidden_size, M);
  return w;
}

}  // namespace fp4serve::model
