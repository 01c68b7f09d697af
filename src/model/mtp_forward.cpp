// The MTP head's forward (qwen3_5_moe.h, "The MTP head"): vLLM's Qwen3_5MultiTokenPredictor.forward
// followed by Qwen3_5MTP.compute_logits, with the trunk's numerics (bf16 activations, fp32
// reductions) and the trunk's ops: the decoder layer is the same code path as a full-attention
// layer of the trunk, on the MTP layer's own KV view.
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "model/qwen3_5_moe.h"

namespace fp4serve::model {

using kernels::LinearOut;
using kernels::TensorView;

void Qwen35MoeModel::bind_mtp() {
  if (w_.mtp) return;
  w_.mtp = std::make_shared<const MtpWeights>(bind_mtp_weights(*ck_, *backend_, w_));
}

void Qwen35MoeModel::target_hidden_rows(const StepWorkspace& ws, std::span<const int64_t> rows,
                                        const TensorView& out) const {
  if (rows.empty()) return;
  kernels::Backend& be = *backend_;
  be.gather_rows(ws.x.rows(0, ws.offsets.back()), rows, out);
  be.rmsnorm(out, w_.final_norm, static_cast<float>(config().rms_norm_eps), kernels::NormKind::kOnePlus, out);
}

TensorView Qwen35MoeModel::forward_mtp(std::span<const BatchSequence> step, const TensorView& hidden,
                                       StepWorkspace& ws, const TensorView& cat_scratch,
                                       const TensorView& hidden_out) const {
  if (!w_.mtp) throw std::logic_error("forward_mtp: the MTP head is not bound (Qwen35MoeModel::bind_mtp)");
  const MtpWeights& m = *w_.mtp;
  kernels::Backend& be = *backend_;
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  stage_inputs(step, ws, /*mtp=*/true);
  const int64_t T = ws.offsets.back();
  ws.logit_rows.clear();
  for (size_t s = 0; s < step.size(); ++s) {
    if (!step[s].gdn.empty() || !step[s].copies.empty() || step[s].sink_rows > 0)
      throw std::invalid_argument("forward_mtp: an MTP step has no GDN state, snapshot copies or sink rows");
    if (step[s].logits == BatchSequence::Logits::kLast && ws.offsets[s + 1] > ws.offsets[s])
      ws.logit_rows.push_back(ws.offsets[s + 1] - 1);
    if (step[s].logits == BatchSequence::Logits::kAll)  // tests: every row against the goldens
      for (int64_t r = ws.offsets[s]; r < ws.offsets[s + 1]; ++r) ws.logit_rows.push_back(r);
  }
  const auto R = static_cast<int64_t>(ws.logit_rows.size());
  if (R > ws.limits.max_logit_rows || R > hidden_out.dim(0) || T > cat_scratch.dim(0) || T > hidden.dim(0))
    throw std::invalid_argument("forward_mtp: step of " + std::to_string(T) + " rows (" + std::to_string(R) +
                                " with logits) beyond its buffers");
  if (T == 0) return ws.logits.rows(0, 0);
  const TensorView x = ws.x.rows(0, T), h = ws.h.rows(0, T), mixed = ws.mixed.rows(0, T);
  // concat([pre_fc_norm_embedding(embed(token)), pre_fc_norm_hidden(hidden)]) -> fc: two strided
  // copies into the [T, 2H] input, the embedding half first.
  be.embedding(w_.embed_tokens, ws.ids.rows(0, T), x);
  be.rmsnorm(x, m.pre_fc_norm_embedding, eps, kernels::NormKind::kOnePlus, h);
  be.rmsnorm(hidden.rows(0, T), m.pre_fc_norm_hidden, eps, kernels::NormKind::kOnePlus, mixed);
  const TensorView cat = cat_scratch.rows(0, T);
  TensorView cat_e = TensorView::contiguous(cat.data, DType::kBF16, {T, H}, cat.device);
  cat_e.stride[0] = 2 * H;
  TensorView cat_h = cat_e;
  cat_h.data = static_cast<uint16_t*>(cat.data) + H;
  be.copy(cat_e, h);
  be.copy(cat_h, mixed);
  const TensorView fc_f32 = ws.out_f32.rows(0, T);
  const LinearOut fc{m.fc, fc_f32};
  be.linears(cat, std::span<const LinearOut>(&fc, 1));
  be.to_bf16(fc_f32, x);
  // The decoder layer (residual = its input, as vLLM's first layer with residual None).
  be.rmsnorm(x, m.layer.input_norm, eps, kernels::NormKind::kOnePlus, h);
  gated_attention(m.layer, 0, step, ws, T);
  be.residual_add(x, mixed);
  be.rmsnorm(x, m.layer.post_norm, eps, kernels::NormKind::kOnePlus, h);
  be.moe(h, m.layer.moe, mixed);
  be.residual_add(x, mixed);
  const TensorView logits = ws.logits.rows(0, R);
  if (R == 0) return logits;
  const TensorView out_h = hidden_out.rows(0, R);
  be.gather_rows(x, ws.logit_rows, out_h);
  be.rmsnorm(out_h, m.norm, eps, kernels::NormKind::kOnePlus, out_h);
  const LinearOut head{w_.lm_head, logits};
  be.linears(out_h, std::span<const LinearOut>(&head, 1));
  be.round_bf16(logits);  // as the trunk's logits (HF/vLLM return bf16 logits)
  return logits;
}

}  // namespace fp4serve::model
