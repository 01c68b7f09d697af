#include "engine/model_runner.h"

#include "engine/engine_error.h"
#include "engine/request.h"

namespace fp4serve::engine {

ModelRunner::ModelRunner(const model::Qwen35MoeModel& model, const ModelRunnerConfig& config)
    : model_(&model), config_(config) {
  const ModelConfig& c = model.config();
  num_attention_layers_ = static_cast<int>(c.num_full_attention_layers());
  const int num_gdn = static_cast<int>(c.num_linear_attention_layers());
  kv_ = model::PagedKvCache(num_attention_layers_, config.num_kv_blocks, config.block_size,
                            static_cast<int>(c.num_key_value_heads), static_cast<int>(c.head_dim), config.kv_dtype);
  slots_ = model::GdnStateArena(config.num_state_slots, num_gdn, model.gdn_dims());
  snapshots_ = model::GdnStateArena(config.num_snapshots, num_gdn, model.gdn_dims());
  rollback_ = GdnRollback(config.max_num_seqs, config.num_speculative_tokens, num_gdn, model.gdn_dims());
}

std::vector<float> ModelRunner::execute(const SchedulerOutput& step, const PromptRowSink& prompt_rows) {
  std::vector<model::BatchSequence> batch;
  batch.reserve(step.scheduled.size());
  rollback_.begin_step(step.scheduled.size());
  for (const ScheduledRequest& s : step.scheduled) {
    if (s.state_slot < 0) throw EngineLogicError("scheduled request without a GDN state slot");
    switch (s.state_init) {
      case StateInit::kZero: slots_.zero(s.state_slot); break;
      case StateInit::kRestore: slots_.copy_from(snapshots_, s.restore_snapshot_id, s.state_slot); break;
      case StateInit::kContinue: break;
    }
    model::BatchSequence b;
    b.tokens = s.tokens;
    b.pos0 = s.start_position;
    b.gdn = slots_.refs(s.state_slot);
    for (int l = 0; l < num_attention_layers_; ++l) b.kv.push_back(kv_.view(l, s.block_table, 1.0f, 1.0f));
    for (const SnapshotPoint& p : step.snapshots_of(s)) {
      b.copies.push_back(model::StateCopyPoint{p.after_tokens, snapshots_.refs(p.snapshot_id)});
    }
    rollback_.add_copy_points(batch.size(), s, b);
    using Logits = model::BatchSequence::Logits;
    b.logits = !s.needs_logits ? Logits::kNone : s.num_draft_tokens > 0 ? Logits::kLastN : Logits::kLast;
    b.last_rows = s.num_logit_rows();
    b.sink_rows = s.prompt_logit_rows;
    if (s.prompt_logit_rows > 0 && !prompt_rows) throw EngineLogicError("prompt logit rows without a sink");
    batch.push_back(std::move(b));
  }
  model::LogitsRowSink sink;
  if (prompt_rows) {
    sink = [&](std::size_t seq, int64_t first, int64_t count, const float* rows) {
      const ScheduledRequest& s = step.scheduled[seq];
      prompt_rows(s, s.start_position + static_cast<int>(first), static_cast<int>(count), rows);
    };
  }
  std::vector<float> logits = model_->forward_batch(batch, nullptr, nullptr, sink);
  if (corrupt_gdn_state_.load(std::memory_order_relaxed)) {
    for (const ScheduledRequest& s : step.scheduled) slots_.zero(s.state_slot);
  }
  return logits;
}

}  // namespace fp4serve::engine
