#include "engine/model_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "engine/cuda_graph_sizes.h"
#include "engine/engine_error.h"
#include "engine/multimodal_prompt.h"
#include "engine/request.h"

namespace fp4serve::engine {
namespace {

// The largest graph a runner with this config replays (0: none).
int largest_graph(const ModelRunnerConfig& c) {
  const std::vector<int> sizes = usable_capture_sizes(c.graph_sizes, std::max(1, c.max_num_seqs));
  return sizes.empty() ? 0 : sizes.back();
}

kernels::StepLimits step_limits(const ModelRunnerConfig& c) {
  kernels::StepLimits l;
  // A padded pure-decode step may hold more sequences (and tokens) than the scheduler ever gives.
  l.max_tokens = std::max({1, c.max_num_batched_tokens, largest_graph(c)});
  l.max_seqs = std::max({1, c.max_num_seqs, largest_graph(c)});
  l.max_logit_rows = l.max_seqs;  // one sampled row per sequence
  // Or 1 + d rows for a request verifying d drafts: each row is a scheduled token, so never more
  // than a step's tokens either.
  if (c.num_speculative_tokens > 0)
    l.max_logit_rows = std::min(l.max_seqs * (1 + c.num_speculative_tokens), std::max(l.max_seqs, l.max_tokens));
  l.max_context = c.max_model_len;
  return l;
}

// State copy points one step can schedule: one per block boundary its tokens cross, plus a tail per
// sequence (the scheduler's prefix-cache snapshots), plus one per draft (the GDN rollback entries).
std::size_t max_copy_points(const ModelRunnerConfig& c) {
  return static_cast<std::size_t>(c.max_num_batched_tokens / std::max(1, c.block_size) + 2 * c.max_num_seqs + 8 +
                                  c.max_num_seqs * std::max(0, c.num_speculative_tokens));
}

}  // namespace

ModelRunner::ModelRunner(const model::Qwen35MoeModel& model, const ModelRunnerConfig& config)
    : model_(&model),
      config_(config),
      num_attention_layers_(static_cast<int>(model.config().num_full_attention_layers())),
      num_gdn_layers_(static_cast<int>(model.config().num_linear_attention_layers())),
      kv_(model.backend(), num_attention_layers_ + (config.mtp_kv_layer ? 1 : 0),
          config.num_kv_blocks + config.extra_kv_blocks + (largest_graph(config) > 0 ? 1 : 0), config.block_size,
          static_cast<int>(model.config().num_key_value_heads), static_cast<int>(model.config().head_dim),
          config.kv_dtype),
      slots_(model.backend(), config.num_state_slots + (largest_graph(config) > 0 ? 1 : 0), num_gdn_layers_,
             model.gdn_dims()),
      snapshots_(model.backend(), config.num_snapshots, num_gdn_layers_, model.gdn_dims()),
      rollback_(model.backend(), config.max_num_seqs, config.num_speculative_tokens, num_gdn_layers_,
                model.gdn_dims()),
      ws_(model.backend(), model.config(), step_limits(config)) {
  const kernels::StepLimits limits = step_limits(config);
  model.backend().reserve(limits, model.shape());
  const auto seqs = static_cast<std::size_t>(limits.max_seqs);
  batch_.reserve(seqs);
  kv_views_.resize(seqs * static_cast<std::size_t>(num_attention_layers_));
  gdn_refs_.resize(seqs * static_cast<std::size_t>(num_gdn_layers_));
  copies_.reserve(max_copy_points(config));
  copy_refs_.resize(max_copy_points(config) * static_cast<std::size_t>(num_gdn_layers_));
  usable_sizes_ = usable_capture_sizes(config.graph_sizes, std::max(1, config.max_num_seqs));
  if (!usable_sizes_.empty()) {
    // The padding's own KV block and GDN slot, past every id the engine (and the MTP drafter) hands out.
    pad_block_ = config.num_kv_blocks + config.extra_kv_blocks;
    pad_slot_ = config.num_state_slots;
    pad_block_table_.assign(1, pad_block_);
    pad_kv_.resize(static_cast<std::size_t>(num_attention_layers_));
    for (std::size_t l = 0; l < pad_kv_.size(); ++l) pad_kv_[l] = kv_.view(static_cast<int>(l), pad_block_table_, 1.0f, 1.0f);
    pad_gdn_.resize(static_cast<std::size_t>(num_gdn_layers_));
    slots_.refs(pad_slot_, pad_gdn_);
    deferred_copies_.reserve(seqs);
  }
}

kernels::TensorView ModelRunner::execute(const SchedulerOutput& step, const PromptRowSink& prompt_rows,
                                         const ImageRowsSource& image_rows) {
  build_batch(step, prompt_rows, image_rows);
  if (const int size = graph_size_for(step); size > 0) return replay(step, size);
  const model::LogitsRowSink sink = [&](std::size_t seq, int64_t first, int64_t count, const float* rows) {
    const ScheduledRequest& s = step.scheduled[seq];
    prompt_rows(s, s.start_position + static_cast<int>(first), static_cast<int>(count), rows);
  };
  const kernels::TensorView logits =
      model_->forward_step(batch_, ws_, nullptr, prompt_rows ? sink : model::LogitsRowSink{});
  if (corrupt_gdn_state_.load(std::memory_order_relaxed)) {
    for (const ScheduledRequest& s : step.scheduled) slots_.zero(s.state_slot);
  }
  return logits;
}

void ModelRunner::build_batch(const SchedulerOutput& step, const PromptRowSink& prompt_rows,
                              const ImageRowsSource& image_rows) {
  batch_.clear();
  copies_.clear();
  if (step.scheduled.size() > static_cast<std::size_t>(ws_.limits.max_seqs))
    throw EngineLogicError("step with more sequences than the runner's limit");
  std::size_t copy_count = 0;
  for (const ScheduledRequest& s : step.scheduled) {
    for (const SnapshotPoint& p : step.snapshots_of(s)) (void)p, ++copy_count;
    copy_count += static_cast<std::size_t>(s.num_draft_tokens);
  }
  rollback_.begin_step(step.scheduled.size());
  if (copy_count * static_cast<std::size_t>(num_gdn_layers_) > copy_refs_.size())
    copy_refs_.resize(copy_count * static_cast<std::size_t>(num_gdn_layers_));  // beyond the reserve: grows once
  const auto A = static_cast<std::size_t>(num_attention_layers_), G = static_cast<std::size_t>(num_gdn_layers_);
  std::size_t copy_at = 0;
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (s.state_slot < 0) throw EngineLogicError("scheduled request without a GDN state slot");
    switch (s.state_init) {
      case StateInit::kZero: slots_.zero(s.state_slot); break;
      case StateInit::kRestore: slots_.copy_from(snapshots_, s.restore_snapshot_id, s.state_slot); break;
      case StateInit::kContinue: break;
    }
    model::BatchSequence b;
    b.tokens = s.tokens;
    b.pos0 = s.start_position;
    const std::span<kernels::GdnStateRef> gdn(gdn_refs_.data() + i * G, G);
    slots_.refs(s.state_slot, gdn);
    b.gdn = gdn;
    const std::span<kernels::KvView> kv(kv_views_.data() + i * A, A);
    for (std::size_t l = 0; l < A; ++l) kv[l] = kv_.view(static_cast<int>(l), s.block_table, 1.0f, 1.0f);
    b.kv = kv;
    const std::size_t first_copy = copies_.size();
    for (const SnapshotPoint& p : step.snapshots_of(s)) {
      const std::span<kernels::GdnStateRef> dst(copy_refs_.data() + copy_at * G, G);
      snapshots_.refs(p.snapshot_id, dst);
      ++copy_at;
      copies_.push_back(model::StateCopyPoint{p.after_tokens, dst});
    }
    if (s.num_draft_tokens > 0) {
      // A verify step (no snapshot points of its own): the state after each of its first d tokens
      // goes to a rollback entry.
      const int entry = rollback_.assign(i, s.num_draft_tokens);
      for (int j = 0; j < s.num_draft_tokens; ++j) {
        const std::span<kernels::GdnStateRef> dst(copy_refs_.data() + copy_at * G, G);
        rollback_.entries().refs(entry + j, dst);
        ++copy_at;
        copies_.push_back(model::StateCopyPoint{j + 1, dst});
      }
    }
    b.copies = std::span<const model::StateCopyPoint>(copies_).subspan(first_copy, copies_.size() - first_copy);
    using Logits = model::BatchSequence::Logits;
    b.logits = !s.needs_logits ? Logits::kNone : s.num_draft_tokens > 0 ? Logits::kLastN : Logits::kLast;
    b.last_rows = s.num_logit_rows();
    b.sink_rows = s.prompt_logit_rows;
    if (s.prompt_logit_rows > 0 && !prompt_rows) throw EngineLogicError("prompt logit rows without a sink");
    if (const MultimodalPrompt* mm = s.request->mm.get()) {
      if (!image_rows) throw EngineLogicError("a request with images but no image rows source");
      b.mrope = mm->mrope;
      b.embeds = image_rows(s);
    }
    batch_.push_back(b);
  }
  // copies_ may have grown past its reserve above (only then could its data move): fix the spans.
  for (std::size_t i = 0, at = 0; i < batch_.size(); ++i) {
    const std::size_t n = batch_[i].copies.size();
    batch_[i].copies = std::span<const model::StateCopyPoint>(copies_).subspan(at, n);
    at += n;
  }
}

void ModelRunner::apply_forks(const SchedulerOutput& step) {
  // In order: an earlier fork's source block or slot may be a later fork's fresh destination.
  for (const ForkCopy& f : step.forks) {
    slots_.copy_from(slots_, f.src_state_slot, f.dst_state_slot);
    if (f.src_block >= 0) kv_.copy_block(f.src_block, f.dst_block);
  }
}


// ---- step graphs ---------------------------------------------------------------------------------

int ModelRunner::graph_size_for(const SchedulerOutput& step) const {
  if (graphs_.empty() || step.scheduled.empty()) return 0;
  for (const ScheduledRequest& s : step.scheduled) {
    // The captured step: one token and one logits row per sequence, nothing streamed, no images.
    if (s.tokens.size() != 1 || s.num_draft_tokens > 0 || s.prompt_logit_rows > 0 || !s.needs_logits) return 0;
    if (s.request != nullptr && s.request->mm) return 0;
    // A copy point inside the forward would be an op the graph does not hold; one after the token
    // (the step's final state) runs after the replay instead.
    for (const SnapshotPoint& p : step.snapshots_of(s))
      if (p.after_tokens != 1) return 0;
  }
  return padded_graph_size(captured_sizes_, static_cast<int>(step.scheduled.size()));
}

void ModelRunner::append_padding(std::size_t count) {
  static const int32_t kPadToken = 0;  // any id inside the vocabulary
  for (std::size_t i = 0; i < count; ++i) {
    model::BatchSequence b;
    b.tokens = std::span<const int32_t>(&kPadToken, 1);
    b.pos0 = 0;
    b.gdn = pad_gdn_;
    b.kv = pad_kv_;
    b.logits = model::BatchSequence::Logits::kLast;
    b.last_rows = 1;
    batch_.push_back(b);
  }
}

kernels::TensorView ModelRunner::replay(const SchedulerOutput& step, int size) {
  const std::size_t real = batch_.size();
  // The copy points leave the forward (same op sequence as the capture) and run after it.
  deferred_copies_.clear();
  for (model::BatchSequence& b : batch_) {
    deferred_copies_.push_back(b.copies);
    b.copies = {};
  }
  append_padding(static_cast<std::size_t>(size) - real);
  // The padding starts each step from a zero state, so its rows (thrown away) are deterministic.
  slots_.zero(pad_slot_);
  std::size_t index = 0;
  while (captured_sizes_[index] != size) ++index;
  kernels::TensorView logits;
  model_->backend().replay_step(*graphs_[index], [&] { logits = model_->forward_step(batch_, ws_); });
  const kernels::GdnDims& dims = model_->gdn_dims();
  for (std::size_t i = 0; i < real; ++i)
    for (const model::StateCopyPoint& p : deferred_copies_[i]) model_->backend().state_copy(p.dst, batch_[i].gdn, dims);
  if (corrupt_gdn_state_.load(std::memory_order_relaxed)) {
    for (const ScheduledRequest& s : step.scheduled) slots_.zero(s.state_slot);
  }
  ++graph_steps_;
  return logits.rows(0, static_cast<int64_t>(real));
}

void ModelRunner::capture_graphs() {
  if (usable_sizes_.empty()) return;
  kernels::Backend& be = model_->backend();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<kernels::StepGraph>> graphs(usable_sizes_.size());
  std::size_t nodes = 0;
  // Largest first, as vLLM captures.
  for (std::size_t k = usable_sizes_.size(); k-- > 0;) {
    batch_.clear();
    append_padding(static_cast<std::size_t>(usable_sizes_[k]));
    slots_.zero(pad_slot_);
    graphs[k] = be.capture_step([&] { model_->forward_step(batch_, ws_); });
    if (!graphs[k]) {
      spdlog::info("Step graphs: the {} backend has no graphs; every step runs eagerly", be.describe());
      batch_.clear();
      return;
    }
    if (k + 1 == usable_sizes_.size())
      spdlog::info("Capturing CUDA graphs (decode, FULL): {} sizes, {} .. {} sequences", usable_sizes_.size(),
                   usable_sizes_.front(), usable_sizes_.back());
    nodes += graphs[k]->num_nodes();
  }
  batch_.clear();
  graphs_ = std::move(graphs);
  captured_sizes_ = usable_sizes_;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("Graph capturing finished in {:.0f} secs, {} graphs, {} nodes", secs, graphs_.size(), nodes);
}

}  // namespace fp4serve::engine
