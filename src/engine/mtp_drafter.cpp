#include "engine/mtp_drafter.h"

#include <algorithm>

#include "engine/engine_error.h"
#include "engine/multimodal_prompt.h"
#include "engine/request.h"
#include "engine/scheduler_output.h"

namespace fp4serve::engine {

int MtpDrafter::scratch_blocks_per_seq(int num_speculative_tokens, int block_size) {
  // Chained rows sit at positions L - 1 .. L + N - 3: N - 1 positions, which may start a block.
  if (num_speculative_tokens < 2) return 0;
  return (num_speculative_tokens - 2) / std::max(1, block_size) + 2;
}

MtpDrafter::MtpDrafter(const model::Qwen35MoeModel& model, ModelRunner& runner, const MtpDrafterConfig& config)
    : model_(&model), runner_(&runner), config_(config) {
  if (!model.has_mtp()) throw EngineLogicError("MtpDrafter: the model's MTP head is not bound");
  mtp_layer_ = runner.mtp_kv_layer();
  if (mtp_layer_ < 0) throw EngineLogicError("MtpDrafter: the model runner has no MTP KV layer");
  const int64_t T = std::max(1, config.max_num_batched_tokens), S = std::max(1, config.max_num_seqs);
  const int64_t H = model.config().hidden_size;
  const std::size_t bytes = static_cast<std::size_t>((T * H + T * 2 * H + S * H) * 2);
  buffer_ = model.backend().allocate(bytes, "MTP drafter activations");
  hidden_in_ = buffer_.view(DType::kBF16, {T, H}, 0);
  cat_ = buffer_.view(DType::kBF16, {T, 2 * H}, static_cast<std::size_t>(T * H * 2));
  hidden_out_ = buffer_.view(DType::kBF16, {S, H}, static_cast<std::size_t>(3 * T * H * 2));
  items_.reserve(static_cast<std::size_t>(S));
  with_logits_.reserve(static_cast<std::size_t>(S));
  target_rows_.reserve(static_cast<std::size_t>(T));
  batch_.reserve(static_cast<std::size_t>(S));
  views_.reserve(static_cast<std::size_t>(S));
  chain_tokens_.reserve(static_cast<std::size_t>(S));
}

kernels::KvView MtpDrafter::kv_view(const Item& it, int item_index, int last_pos) {
  const std::vector<std::int32_t>& own = it.request->res.block_ids;
  const int bs = runner_->kv_cache().block_size();
  const auto needed = static_cast<std::size_t>(last_pos / bs + 1);
  if (needed <= own.size()) return runner_->kv_cache().view(mtp_layer_, own, 1.0f, 1.0f);
  // Past the request's blocks: its scratch blocks (table_store_ was sized for every item).
  const std::size_t extra = needed - own.size();
  if (extra > static_cast<std::size_t>(config_.scratch_blocks_per_seq))
    throw EngineLogicError("MTP chain beyond the drafter's scratch blocks");
  const std::size_t at = static_cast<std::size_t>(item_index) *
                         (table_store_.size() / std::max<std::size_t>(1, items_.size()));
  std::int32_t* table = table_store_.data() + at;
  std::copy(own.begin(), own.end(), table);
  for (std::size_t j = 0; j < extra; ++j)
    table[own.size() + j] = config_.first_scratch_block + item_index * config_.scratch_blocks_per_seq +
                            static_cast<std::int32_t>(j);
  return runner_->kv_cache().view(mtp_layer_, std::span<const std::int32_t>(table, needed), 1.0f, 1.0f);
}

void MtpDrafter::take_drafts(const kernels::TensorView& logits, std::span<const int> items, std::int64_t vocab_size) {
  const std::int64_t V = logits.dim(1);
  for (std::size_t k = 0; k < items.size(); ++k) {
    const float* row;
    if (logits.device == kernels::Device::kCpu) {
      row = logits.as<const float>() + static_cast<std::int64_t>(k) * V;
    } else {
      host_row_.resize(static_cast<std::size_t>(V));
      model_->backend().download(host_row_.data(), logits.rows(static_cast<std::int64_t>(k), 1));
      row = host_row_.data();
    }
    const std::int64_t n = std::min(V, vocab_size);
    const auto best = static_cast<std::int32_t>(std::max_element(row, row + n) - row);  // first maximum on ties
    items_[static_cast<std::size_t>(items[k])].request->draft_token_ids.push_back(best);
  }
}

void MtpDrafter::propose_step(const SchedulerOutput& step, int max_tokens, std::int64_t vocab_size,
                              std::span<Request* const> running) {
  for (Request* r : running) r->draft_token_ids.clear();
  if (max_tokens <= 0) return;
  const model::StepWorkspace& target = runner_->workspace();
  items_.clear();
  target_rows_.clear();
  // The rows the step kept, per running request it ran.
  for (std::size_t i = 0; i < step.scheduled.size() && i + 1 < target.offsets.size(); ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (std::find(running.begin(), running.end(), s.request) == running.end()) continue;  // finished, preempted
    Request& r = *s.request;
    // Kept: up to the computed tokens (a verify step's accepted drafts), and a row needs the token
    // after its position.
    const int end = std::min({s.start_position + s.num_scheduled_tokens, r.num_computed_tokens, r.num_tokens() - 1});
    if (end <= s.start_position) continue;
    Item it;
    it.request = &r;
    it.row0 = static_cast<int>(target.offsets[i]);
    it.pos0 = s.start_position;
    it.rows = end - s.start_position;
    const bool decode = r.num_computed_tokens == r.num_tokens() - 1 && end == r.num_tokens() - 1;
    // The scheduler runs at most room drafts (Scheduler: one token of the step is the verify row's
    // own); drafting more would be wasted passes.
    int room = r.max_tokens() - r.num_output_tokens() - 1;
    if (config_.max_model_len > 0) room = std::min(room, config_.max_model_len - r.num_tokens() - 1);
    it.budget = decode ? std::max(0, std::min(max_tokens, room)) : 0;
    items_.push_back(it);
    for (int j = 0; j < it.rows; ++j) target_rows_.push_back(it.row0 + j);
  }
  if (items_.empty()) return;
  // table_store_: room for every item's chained table (its blocks plus scratch), laid out per item.
  std::size_t per_item = 0;
  for (const Item& it : items_) per_item = std::max(per_item, it.request->res.block_ids.size());
  per_item += static_cast<std::size_t>(config_.scratch_blocks_per_seq);
  table_store_.resize(per_item * items_.size());
  // Pass 1: the kept rows, fed the target's hidden states; drafts 1 for requests in decode.
  const auto T = static_cast<std::int64_t>(target_rows_.size());
  model_->target_hidden_rows(target, target_rows_, hidden_in_.rows(0, T));
  batch_.clear();
  views_.clear();
  with_logits_.clear();
  for (std::size_t k = 0; k < items_.size(); ++k) {
    const Item& it = items_[k];
    views_.push_back(runner_->kv_cache().view(mtp_layer_, it.request->res.block_ids, 1.0f, 1.0f));
  }
  for (std::size_t k = 0; k < items_.size(); ++k) {
    const Item& it = items_[k];
    model::BatchSequence b;
    b.tokens = it.request->all_token_ids().subspan(static_cast<std::size_t>(it.pos0 + 1),
                                                    static_cast<std::size_t>(it.rows));
    b.pos0 = it.pos0;
    // A multimodal request's rows sit at its M-RoPE positions, as the target's (vLLM feeds the MTP
    // the target's positions). Its image rows get the <|image_pad|> embedding here, not the image's
    // features (vLLM passes the features): only the drafts' acceptance can suffer, never the output.
    if (it.request->mm) b.mrope = it.request->mm->mrope;
    b.kv = std::span<const kernels::KvView>(&views_[k], 1);
    b.logits = it.budget > 0 ? model::BatchSequence::Logits::kLast : model::BatchSequence::Logits::kNone;
    if (it.budget > 0) with_logits_.push_back(static_cast<int>(k));
    batch_.push_back(b);
  }
  model::StepWorkspace& ws = runner_->scratch_workspace();
  kernels::TensorView logits = model_->forward_mtp(batch_, hidden_in_.rows(0, T), ws, cat_, hidden_out_);
  take_drafts(logits, with_logits_, vocab_size);
  // Passes 2 .. N: one row per request still drafting, its last draft at the next position, fed
  // the previous pass's MTP hidden state (rows of hidden_out_ in with_logits_ order).
  for (int j = 1; j < max_tokens; ++j) {
    batch_.clear();
    views_.clear();
    chain_tokens_.clear();
    std::int64_t R = 0;
    int kept = 0;
    for (std::size_t k = 0; k < with_logits_.size(); ++k) {
      const Item& it = items_[static_cast<std::size_t>(with_logits_[k])];
      if (it.budget <= j) continue;  // this request has its drafts
      const kernels::TensorView src = hidden_out_.rows(static_cast<std::int64_t>(k), 1);
      model_->backend().copy(hidden_in_.rows(R, 1), src);
      with_logits_[static_cast<std::size_t>(kept++)] = with_logits_[k];
      ++R;
    }
    with_logits_.resize(static_cast<std::size_t>(kept));
    if (R == 0) break;
    for (std::size_t k = 0; k < with_logits_.size(); ++k) {
      const int idx = with_logits_[k];
      const Item& it = items_[static_cast<std::size_t>(idx)];
      const int pos = it.pos0 + it.rows - 1 + j;
      views_.push_back(kv_view(it, idx, pos));
      chain_tokens_.push_back(it.request->draft_token_ids.back());
    }
    for (std::size_t k = 0; k < with_logits_.size(); ++k) {
      const Item& it = items_[static_cast<std::size_t>(with_logits_[k])];
      model::BatchSequence b;
      b.tokens = std::span<const std::int32_t>(&chain_tokens_[k], 1);
      b.pos0 = it.pos0 + it.rows - 1 + j;
      if (it.request->mm) b.mrope = it.request->mm->mrope;
      b.kv = std::span<const kernels::KvView>(&views_[k], 1);
      b.logits = model::BatchSequence::Logits::kLast;
      batch_.push_back(b);
    }
    logits = model_->forward_mtp(batch_, hidden_in_.rows(0, R), ws, cat_, hidden_out_);
    take_drafts(logits, with_logits_, vocab_size);
  }
}

}  // namespace fp4serve::engine
