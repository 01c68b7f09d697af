#include "model/step_workspace.h"

#include <algorithm>
#include <initializer_list>

#include "checkpoint/model_config.h"

namespace fp4serve::model {
namespace {

// Hands out 64-byte aligned ranges of one buffer; measure first (base null), then place.
class Layout {
 public:
  explicit Layout(const kernels::DeviceBuffer* buffer) : buffer_(buffer) {}
  kernels::TensorView take(DType dtype, std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const std::size_t at = offset_;
    offset_ += (static_cast<std::size_t>(n) * dtype_size(dtype) + 63) / 64 * 64;
    if (!buffer_) return {};
    return buffer_->view(dtype, shape, at);
  }
  std::size_t offset() const { return offset_; }
  void set_offset(std::size_t at) { offset_ = at; }

 private:
  const kernels::DeviceBuffer* buffer_;
  std::size_t offset_ = 0;
};

}  // namespace

StepWorkspace::StepWorkspace(kernels::Backend& backend, const ModelConfig& c, const kernels::StepLimits& l)
    : limits(l) {
  const int64_t T = std::max<int64_t>(1, l.max_tokens), R = std::max<int64_t>(1, l.max_logit_rows);
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const int64_t Hv = c.linear_num_value_heads, C = 2 * c.linear_num_key_heads * c.linear_key_head_dim +
                                                     c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t Vd = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
  // Two passes over the same layout: the first measures, the second places the views.
  auto place = [&](Layout& L) {
    ids = L.take(DType::kI32, {T});
    pos = L.take(DType::kI64, {3 * T});  // room for three axes (M-RoPE)
    x = L.take(DType::kBF16, {T, H});
    h = L.take(DType::kBF16, {T, H});
    mixed = L.take(DType::kBF16, {T, H});
    out_f32 = L.take(DType::kF32, {T, H});
    picked = L.take(DType::kBF16, {R, H});
    logits = L.take(DType::kF32, {R, V});
    sink_picked = L.take(DType::kBF16, {kSinkBlockRows, H});
    sink_logits = L.take(DType::kF32, {kSinkBlockRows, V});
    const std::size_t layer_region = L.offset();
    if (c.num_linear_attention_layers() > 0) {
      gdn_qkv_f32 = L.take(DType::kF32, {T, C});
      gdn_z_f32 = L.take(DType::kF32, {T, Vd});
      gdn_a = L.take(DType::kF32, {T, Hv});
      gdn_b = L.take(DType::kF32, {T, Hv});
      gdn_g = L.take(DType::kF32, {T, Hv});
      gdn_beta = L.take(DType::kF32, {T, Hv});
      gdn_qkv_raw = L.take(DType::kBF16, {T, C});
      gdn_qkv = L.take(DType::kBF16, {T, C});
      gdn_z = L.take(DType::kBF16, {T, Vd});
      gdn_core = L.take(DType::kBF16, {T, Vd});
      gdn_normed = L.take(DType::kBF16, {T, Vd});
    }
    const std::size_t gdn_end = L.offset();
    L.set_offset(layer_region);  // attention scratch reuses the GDN scratch
    if (c.num_full_attention_layers() > 0) {
      attn_qg_f32 = L.take(DType::kF32, {T, Hq * 2 * D});
      attn_k_f32 = L.take(DType::kF32, {T, Hkv * D});
      attn_v_f32 = L.take(DType::kF32, {T, Hkv * D});
      attn_qg = L.take(DType::kBF16, {T, Hq, 2 * D});
      attn_q = L.take(DType::kBF16, {T, Hq, D});
      attn_gate = L.take(DType::kBF16, {T, Hq * D});
      attn_k = L.take(DType::kBF16, {T, Hkv, D});
      attn_v = L.take(DType::kBF16, {T, Hkv, D});
      attn_out = L.take(DType::kBF16, {T, Hq * D});
    }
    L.set_offset(std::max(gdn_end, L.offset()));
  };
  Layout measure(nullptr);
  place(measure);
  buffer_ = backend.allocate(measure.offset(), "the step workspace");
  bytes = static_cast<int64_t>(measure.offset());
  Layout layout(&buffer_);
  place(layout);
  host_ids.reserve(static_cast<std::size_t>(T));
  host_pos.reserve(static_cast<std::size_t>(3 * T));
  offsets.reserve(static_cast<std::size_t>(l.max_seqs + 1));
  logit_rows.reserve(static_cast<std::size_t>(R));
  sink_rows.reserve(static_cast<std::size_t>(kSinkBlockRows));
  attn_seqs.reserve(static_cast<std::size_t>(l.max_seqs));
  const auto seqs = static_cast<std::size_t>(l.max_seqs);
  gdn_rounds.cursors.reserve(seqs);
  gdn_rounds.by_state.reserve(seqs);
  gdn_rounds.shared.reserve(seqs);
  gdn_rounds.descs.reserve(seqs);
  gdn_rounds.copy_dst.reserve(seqs);
  gdn_rounds.copy_src.reserve(seqs);
  if (backend.device() != kernels::Device::kCpu) host_sink.resize(static_cast<std::size_t>(kSinkBlockRows * V));
}

}  // namespace fp4serve::model
