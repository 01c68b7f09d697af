#include "engine/scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

namespace {
int cdiv(int a, int b) { return (a + b - 1) / b; }
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, StateSlotPool& slots,
                     StateSnapshotStore* snapshots, StopChecker stop_checker)
    : config_(config),
      kv_(kv),
      slots_(slots),
      snapshots_(kv.config().enable_prefix_caching ? snapshots : nullptr),
      stop_checker_(std::move(stop_checker)) {
  const int bs = kv.block_size();
  if (config_.max_num_batched_tokens <= 0 || config_.max_num_seqs <= 0 || config_.max_model_len <= 0)
    throw EngineConfigError(fmt::format(
        "scheduler: --max-num-batched-tokens {}, --max-num-seqs {}, --max-model-len {} must be positive",
        config_.max_num_batched_tokens, config_.max_num_seqs, config_.max_model_len));
  if (config_.max_model_len > kv.config().max_model_len)
    throw EngineConfigError("scheduler: max_model_len larger than the KV cache manager's");
  if (config_.max_num_seqs > slots.num_slots())
    throw EngineConfigError(fmt::format("--max-num-seqs {} exceeds the {} GDN state slots",
                                        config_.max_num_seqs, slots.num_slots()));
  // As vLLM refuses at start-up: one request of max_model_len tokens must fit, or a lone request
  // could preempt itself forever.
  const int blocks_per_request = cdiv(config_.max_model_len, bs);
  if (blocks_per_request > kv.pool().num_blocks())
    throw EngineConfigError(fmt::format(
        "--max-model-len {} needs {} KV blocks of {} tokens for one request, but the KV cache has only "
        "{} blocks ({} tokens); lower --max-model-len or raise the KV cache memory",
        config_.max_model_len, blocks_per_request, bs, kv.pool().num_blocks(),
        kv.pool().num_blocks() * bs));
  if (config_.snapshot_interval < 0 || config_.snapshot_interval % bs != 0)
    throw EngineConfigError(fmt::format("GDN snapshot interval {} is not a multiple of the block size {}",
                                        config_.snapshot_interval, bs));
  if (config_.num_speculative_tokens < 0 || config_.num_speculative_tokens > kMaxSpeculativeTokens)
    throw EngineConfigError(fmt::format("num_speculative_tokens {} is outside 0 .. {}", config_.num_speculative_tokens,
                                        kMaxSpeculativeTokens));
  counters_.spec_decode.num_speculative_tokens = config_.num_speculative_tokens;
  const auto max_seqs = static_cast<std::size_t>(config_.max_num_seqs);
  running_.reserve(max_seqs);
  output_.scheduled.reserve(max_seqs);
  results_.reserve(max_seqs * static_cast<std::size_t>(1 + config_.num_speculative_tokens));
  if (config_.num_speculative_tokens > 0) output_.verify_outcomes.reserve(max_seqs);
}

Request& Scheduler::add_request(std::string id, std::vector<std::int32_t> prompt_token_ids, int max_tokens,
                                std::uint64_t cache_salt_hash, std::shared_ptr<const MultimodalPrompt> mm) {
  if (requests_.find(std::string_view(id)) != requests_.end())
    throw EngineLogicError(fmt::format("request id '{}' is already in the engine", id));
  if (static_cast<int>(prompt_token_ids.size()) > config_.max_model_len)
    throw EngineLogicError(fmt::format("request '{}': prompt of {} tokens exceeds max_model_len {}", id,
                                       prompt_token_ids.size(), config_.max_model_len));
  auto req = std::make_unique<Request>(id, std::move(prompt_token_ids), max_tokens, next_arrival_++);
  Request& r = *req;
  r.reserve_tokens(static_cast<int>(std::min<std::int64_t>(
      static_cast<std::int64_t>(r.num_prompt_tokens()) + max_tokens, config_.max_model_len)));
  r.cache_salt_hash = cache_salt_hash;
  r.mm = std::move(mm);
  kv_.update_block_hashes(r);
  requests_.emplace(std::move(id), std::move(req));
  waiting_.push_back(&r);
  return r;
}

Request& Scheduler::add_fork_child(std::string id, std::string_view source_id, int max_tokens) {
  auto src_it = requests_.find(source_id);
  if (src_it == requests_.end())
    throw EngineLogicError(fmt::format("fork child '{}': no request '{}'", id, source_id));
  Request& src = *src_it->second;
  if (src.num_output_tokens() != 0 || src.fork_source != nullptr || src.finished())
    throw EngineLogicError(fmt::format("fork child '{}': '{}' is past its prompt or itself held", id, source_id));
  if (requests_.find(std::string_view(id)) != requests_.end())
    throw EngineLogicError(fmt::format("request id '{}' is already in the engine", id));
  const std::span<const std::int32_t> prompt = src.prompt_token_ids();
  auto req = std::make_unique<Request>(id, std::vector<std::int32_t>(prompt.begin(), prompt.end()), max_tokens,
                                       next_arrival_++);
  Request& r = *req;
  r.reserve_tokens(static_cast<int>(std::min<std::int64_t>(
      static_cast<std::int64_t>(r.num_prompt_tokens()) + max_tokens, config_.max_model_len)));
  r.cache_salt_hash = src.cache_salt_hash;
  r.mm = src.mm;
  kv_.update_block_hashes(r);
  r.fork_source = &src;
  src.fork_children.push_back(&r);
  ++num_held_;
  requests_.emplace(std::move(id), std::move(req));
  return r;
}

const Request* Scheduler::find(std::string_view id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

const SchedulerOutput& Scheduler::schedule() {
  if (step_in_flight_) throw EngineLogicError("schedule() called twice without update_from_output()");
  retired_.clear();
  output_.clear();
  int budget = config_.max_num_batched_tokens;
  bool preempted_any = false;

  // 1. Running requests: decodes and unfinished prefill chunks.
  std::size_t idx = 0;
  while (idx < running_.size() && budget > 0) {
    Request& r = *running_[idx];
    int n = r.num_tokens() - r.num_computed_tokens;
    // A decode (one token left) also runs the drafts the engine proposed, as many as fit.
    const int drafts_wanted = n == 1 ? draft_limit(r) : 0;
    n += drafts_wanted;
    if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
    n = std::min(n, budget);
    int drafts = std::max(0, std::min(drafts_wanted, n - 1));
    if (n <= 0) {
      ++idx;
      continue;
    }
    const std::size_t old_blocks = r.res.block_ids.size();
    bool allocated = false;
    while (true) {
      if (kv_.allocate_slots(r, n)) {
        allocated = true;
        break;
      }
      if (drafts > 0) {  // no room for the drafts: run the plain decode rather than preempt anyone
        n -= drafts;
        drafts = 0;
        continue;
      }
      // Out of KV blocks: preempt the newest running request (vLLM: running.pop()). Requests before
      // idx were scheduled already this step and are never the last one unless r itself is.
      Request* victim = running_.back();
      running_.pop_back();
      preempt(*victim);
      preempted_any = true;
      if (victim == &r) break;
    }
    if (!allocated) break;  // r itself was preempted, and everything after it before that
    emit(r, n, old_blocks, StateInit::kContinue, -1, false, drafts);
    budget -= n;
    ++idx;
  }

  // 2. Waiting requests, FCFS, into the leftover budget (not in a step that had to preempt).
  if (!preempted_any) {
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int>(running_.size()) < config_.max_num_seqs) {
      Request& r = *waiting_.front();
      // A request that needs every prompt row computed does not read the cache (and is not
      // counted as a query, as in vLLM).
      const bool lookup = !r.prompt_logprobs_pending;
      const PrefixHit hit = lookup ? kv_.get_computed_blocks(r) : PrefixHit{};
      int n = r.num_tokens() - hit.num_tokens;
      if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
      n = std::min(n, budget);
      const int slot = slots_.allocate();
      if (slot < 0) break;  // cannot happen with max_num_seqs <= slots; stay safe
      if (!kv_.allocate_slots(r, n, &hit)) {
        slots_.free(slot);
        break;  // head of line: no admission past a request that does not fit
      }
      waiting_.pop_front();
      running_.push_back(&r);
      const bool resumed = r.status() == RequestStatus::kPreempted;
      r.transition_to(RequestStatus::kRunning);
      r.num_computed_tokens = hit.num_tokens;
      if (r.num_cached_tokens < 0) r.num_cached_tokens = hit.num_tokens;
      r.res.state_slot = slot;
      if (lookup) kv_.record_prefix_query(r.num_tokens(), hit.num_tokens);
      StateInit init = StateInit::kZero;
      if (hit.num_tokens > 0 && snapshots_ != nullptr) {
        init = StateInit::kRestore;
        snapshots_->pin(hit.snapshot_id);  // unpinned once the step copied it
      }
      emit(r, n, hit.blocks.size(), init, init == StateInit::kRestore ? hit.snapshot_id : -1, resumed);
      budget -= n;
    }
  }

  if (output_.total_num_scheduled_tokens > config_.max_num_batched_tokens ||
      static_cast<int>(running_.size()) > config_.max_num_seqs)
    throw EngineLogicError("scheduler exceeded its token budget or max_num_seqs");
  if (!output_.scheduled.empty()) ++counters_.num_steps;
  step_in_flight_ = true;
  return output_;
}

int Scheduler::draft_limit(const Request& r) const {
  if (config_.num_speculative_tokens == 0 || r.draft_token_ids.empty()) return 0;
  // A chunked prefill that left one prompt token looks like a decode; with held fork children it runs
  // without drafts, so its slot holds exactly the state after the prompt when the children copy it.
  if (!r.fork_children.empty()) return 0;
  // Room for every draft and the bonus token after them: never past max_model_len or max_tokens.
  const int room = std::min(config_.max_model_len - r.num_tokens(), r.max_tokens() - r.num_output_tokens()) - 1;
  return std::max(0, std::min({static_cast<int>(r.draft_token_ids.size()), config_.num_speculative_tokens, room}));
}

void Scheduler::emit(Request& r, int num_tokens, std::size_t old_num_blocks, StateInit init,
                     int restore_snapshot_id, bool resumed, int num_drafts) {
  ScheduledRequest s;
  s.request = &r;
  s.start_position = r.num_computed_tokens;
  s.num_scheduled_tokens = num_tokens;
  s.num_draft_tokens = num_drafts;
  if (num_drafts > 0) {
    auto& v = r.res.verify_tokens;
    v.clear();
    v.push_back(r.all_token_ids().back());
    v.insert(v.end(), r.draft_token_ids.begin(), r.draft_token_ids.begin() + num_drafts);
    s.tokens = v;
  } else {
    s.tokens = r.all_token_ids().subspan(static_cast<std::size_t>(s.start_position),
                                         static_cast<std::size_t>(num_tokens));
  }
  r.draft_token_ids.clear();  // consumed; the engine proposes afresh after the step
  const std::span<const std::int32_t> table(r.res.block_ids);
  s.block_table = table;
  s.new_block_ids = table.subspan(old_num_blocks);
  s.state_slot = r.res.state_slot;
  s.state_init = init;
  s.restore_snapshot_id = restore_snapshot_id;
  s.needs_logits = num_drafts > 0 || s.start_position + num_tokens == r.num_tokens();
  if (r.prompt_logprobs_pending) {
    s.prompt_logit_rows =
        std::max(0, std::min(s.start_position + num_tokens, r.num_prompt_tokens() - 1) - s.start_position);
  }
  s.resumed = resumed;
  // The step that computes the last prompt token (never a verify step: draft_limit): its row is the
  // one the held children sample from.
  if (s.needs_logits && r.num_output_tokens() == 0 && num_drafts == 0) s.fork_children = r.fork_children;
  s.snapshot_begin = static_cast<int>(output_.snapshot_points.size());
  // A verify step's snapshots are planned once the kept length is known (update_verified).
  if (num_drafts == 0) plan_snapshots(r, s.start_position, s.start_position + num_tokens);
  s.snapshot_count = static_cast<int>(output_.snapshot_points.size()) - s.snapshot_begin;
  output_.scheduled.push_back(s);
  output_.total_num_scheduled_tokens += num_tokens;
}

void Scheduler::plan_snapshots(Request& r, int start, int end) {
  if (snapshots_ == nullptr) return;
  const int bs = kv_.block_size();
  // Last block boundary before the prompt's last token: the longest hit the same prompt can have
  // (hits are capped at num_tokens - 1), and what a longer prompt extending it needs.
  const int prompt_end = (r.num_prompt_tokens() - 1) / bs * bs;
  int tail = 0;
  const std::ptrdiff_t first_point = static_cast<std::ptrdiff_t>(output_.snapshot_points.size());
  for (int b = (start / bs + 1) * bs; b <= end; b += bs) {
    const bool fixed = (config_.snapshot_interval > 0 && b % config_.snapshot_interval == 0) || b == prompt_end;
    if (fixed) {
      const BlockHash key = kv_.prefix_hash(r, b);
      if (const int have = snapshots_->find(key); have >= 0) {
        snapshots_->touch(have);
        continue;
      }
      const int id = snapshots_->reserve();
      if (id < 0) continue;  // every snapshot pending or pinned: best effort, skip
      output_.snapshot_points.push_back(SnapshotPoint{b - start, id, b, key, false});
    } else if (b > prompt_end) {
      tail = b;  // only the last boundary in the chunk matters for the rolling tail
    }
  }
  if (tail == 0) return;
  const BlockHash key = kv_.prefix_hash(r, tail);
  if (snapshots_->find(key) >= 0) return;
  if (r.res.tail_snapshot_id < 0) r.res.tail_snapshot_id = snapshots_->reserve();
  if (r.res.tail_snapshot_id < 0) return;
  r.res.tail_snapshot_tokens = 0;  // being overwritten this step; valid again after it
  // Keep the request's points in token order (the model copies state as it walks the chunk): the
  // tail may precede interval points planned above.
  auto& pts = output_.snapshot_points;
  const SnapshotPoint tail_point{tail - start, r.res.tail_snapshot_id, tail, key, true};
  auto pos = pts.end();
  while (pos != pts.begin() + first_point && (pos - 1)->after_tokens > tail_point.after_tokens) --pos;
  pts.insert(pos, tail_point);
}

const std::vector<StepResult>& Scheduler::update_from_output(std::span<const std::int32_t> sampled_tokens) {
  single_tokens_.clear();
  for (const std::int32_t& t : sampled_tokens) single_tokens_.emplace_back(&t, 1);
  return update_from_emitted(single_tokens_);
}

const std::vector<StepResult>& Scheduler::update_from_emitted(std::span<const std::span<const std::int32_t>> emitted,
                                                              std::span<const std::int32_t> fork_tokens) {
  if (!step_in_flight_) throw EngineLogicError("update_from_output() without a schedule()");
  if (emitted.size() != output_.scheduled.size())
    throw EngineLogicError(fmt::format("update_from_output: {} sampled tokens for {} scheduled requests",
                                       emitted.size(), output_.scheduled.size()));
  std::size_t num_forks = 0;
  for (const ScheduledRequest& s : output_.scheduled) num_forks += s.fork_children.size();
  if (fork_tokens.size() != num_forks)
    throw EngineLogicError(fmt::format("update_from_output: {} fork tokens for {} fork children", fork_tokens.size(),
                                       num_forks));
  results_.clear();
  output_.verify_outcomes.clear();
  output_.kept_snapshot_points.clear();
  output_.forks.clear();
  std::size_t next_fork = 0;
  int fallback_at = 0;
  for (std::size_t i = 0; i < output_.scheduled.size(); ++i) {
    const ScheduledRequest& s = output_.scheduled[i];
    Request& r = *s.request;
    // Forks first: they take r's blocks and state before r's own token can finish (and free) it.
    fork_results_.clear();
    if (!s.fork_children.empty()) {
      // s.fork_children views r.fork_children, which fork() leaves alone.
      for (std::size_t k = 0; k < s.fork_children.size(); ++k)
        fork(r, *s.fork_children[k], fork_tokens[next_fork++], static_cast<int>(i), static_cast<int>(k), fallback_at);
      r.fork_children.clear();
      output_.scheduled[i].fork_children = {};  // forked: the view would dangle
    }
    if (!deferred_aborts_.empty() &&
        std::find(deferred_aborts_.begin(), deferred_aborts_.end(), r.id()) != deferred_aborts_.end()) {
      discard_step(s);
      continue;
    }
    if (s.num_draft_tokens > 0) {
      update_verified(static_cast<int>(i), s, emitted[i]);
      continue;
    }
    const int prompt_positions =
        std::max(0, std::min(r.num_prompt_tokens(), s.start_position + s.num_scheduled_tokens) - s.start_position);
    counters_.prompt_tokens_computed += prompt_positions;
    r.num_computed_tokens += s.num_scheduled_tokens;
    kv_.cache_computed_blocks(r);
    for (const SnapshotPoint& p : output_.snapshots_of(s)) {
      if (p.is_tail) r.res.tail_snapshot_tokens = p.boundary_tokens;
      else if (snapshots_->commit(p.snapshot_id, p.key, p.boundary_tokens)) kv_.record_snapshot_stored(r, p.boundary_tokens);
    }
    if (s.restore_snapshot_id >= 0) snapshots_->unpin(s.restore_snapshot_id);
    if (!s.needs_logits) continue;  // a prefill chunk short of the end: nothing sampled
    r.prompt_logprobs_pending = false;  // every prompt row has been computed by now
    if (emitted[i].size() != 1)
      throw EngineLogicError(fmt::format("request '{}': {} tokens for a step without drafts", r.id(), emitted[i].size()));

    const std::int32_t token = emitted[i][0];
    r.append_output_token(token);
    ++counters_.generation_tokens;
    const RequestStatus status = finish_status(r);
    if (status != RequestStatus::kRunning) {
      running_.erase(std::find(running_.begin(), running_.end(), &r));
      retire(r, status);
    }
    results_.push_back(StepResult{&r, token, status != RequestStatus::kRunning, status, static_cast<int>(i), 0});
    results_.insert(results_.end(), fork_results_.begin(), fork_results_.end());
  }
  step_in_flight_ = false;
  for (const std::string& id : deferred_aborts_) abort_request(id);
  deferred_aborts_.clear();
  return results_;
}

void Scheduler::discard_step(const ScheduledRequest& s) {
  // The request ends right after this update (deferred abort): what the step computed for it is
  // dropped with its blocks, as if the step had not run it -- no token appended, nothing registered
  // in the prefix cache. Snapshots it reserved are released; a tail it planned was overwritten by the
  // step (tail_snapshot_tokens is 0), so release_resources releases it rather than committing it.
  for (const SnapshotPoint& p : output_.snapshots_of(s))
    if (!p.is_tail) snapshots_->release(p.snapshot_id);
  if (s.restore_snapshot_id >= 0) snapshots_->unpin(s.restore_snapshot_id);
}

RequestStatus Scheduler::finish_status(const Request& r) const {
  if (r.num_tokens() >= config_.max_model_len || r.num_output_tokens() >= r.max_tokens())
    return RequestStatus::kFinishedLength;
  if (stop_checker_ && stop_checker_(r)) return RequestStatus::kFinishedStopped;
  return RequestStatus::kRunning;
}

void Scheduler::update_verified(int index, const ScheduledRequest& s, std::span<const std::int32_t> tokens) {
  Request& r = *s.request;
  const int d = s.num_draft_tokens;
  const int m = static_cast<int>(tokens.size());
  if (m < 1 || m > 1 + d)
    throw EngineLogicError(fmt::format("request '{}': {} tokens from a step verifying {} drafts", r.id(), m, d));
  for (int j = 0; j + 1 < m; ++j)
    if (tokens[static_cast<std::size_t>(j)] != s.tokens[static_cast<std::size_t>(1 + j)])
      throw EngineLogicError(fmt::format("request '{}': token {} of a verify step is not the draft it accepts", r.id(), j));
  SpecDecodeMetrics& spec = counters_.spec_decode;
  ++spec.num_drafts;
  spec.num_draft_tokens += d;
  spec.num_accepted_tokens += m - 1;
  for (int j = 0; j + 1 < m; ++j) ++spec.num_accepted_tokens_per_pos[static_cast<std::size_t>(j)];

  // Append one token at a time with the usual checks; a finish drops the tokens after it (vLLM
  // _update_request_with_output), so the request ends exactly where the plain decode would.
  RequestStatus status = RequestStatus::kRunning;
  int kept = 0;
  while (kept < m && status == RequestStatus::kRunning) {
    const std::int32_t token = tokens[static_cast<std::size_t>(kept)];
    r.append_output_token(token);
    ++counters_.generation_tokens;
    status = finish_status(r);
    results_.push_back(StepResult{&r, token, false, RequestStatus::kRunning, index, kept});
    ++kept;
  }
  results_.back().finished = status != RequestStatus::kRunning;
  results_.back().status = status;

  // Positions start .. start + kept - 1 hold the last token and the kept drafts; the rest of the
  // step's positions held rejected (or dropped) drafts.
  r.num_computed_tokens = s.start_position + kept;
  kv_.truncate(r, r.num_computed_tokens);
  kv_.cache_computed_blocks(r);
  VerifyOutcome outcome;
  outcome.scheduled_index = index;
  outcome.kept_tokens = kept;
  outcome.snapshot_begin = static_cast<int>(output_.kept_snapshot_points.size());
  plan_kept_snapshots(r, s.start_position, r.num_computed_tokens);
  outcome.snapshot_count = static_cast<int>(output_.kept_snapshot_points.size()) - outcome.snapshot_begin;
  output_.verify_outcomes.push_back(outcome);
  if (status != RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
    retire(r, status);  // commits the tail planned above; the runner fills it before the next step
  }
}

void Scheduler::fork(Request& r, Request& c, std::int32_t token, int scheduled_index, int fork_index,
                     int& fallback_at) {
  // This step computed r's last prompt token (emit lists fork children only then).
  const int prompt = r.num_prompt_tokens();
  if (c.fork_source != &r) throw EngineLogicError(fmt::format("'{}' is not held on '{}'", c.id(), r.id()));
  c.fork_source = nullptr;
  --num_held_;
  c.prompt_logprobs_pending = false;  // the engine hands it the source's prompt logprobs
  c.append_output_token(token);
  ++counters_.generation_tokens;
  const RequestStatus status = finish_status(c);
  if (status != RequestStatus::kRunning) {
    // Done at its first token (max_tokens 1, a stop token): it ran, through its source.
    c.transition_to(RequestStatus::kRunning);
    c.num_cached_tokens = prompt;
    counters_.prompt_tokens_forked += prompt;
    retire(c, status);
  } else {
    int slot = -1, src_block = -1, dst_block = -1;
    bool forked = static_cast<int>(running_.size()) < config_.max_num_seqs && (slot = slots_.allocate()) >= 0;
    if (forked && !kv_.fork_blocks(r, c, prompt, &src_block, &dst_block)) {
      slots_.free(slot);
      forked = false;
    }
    if (forked) {
      c.transition_to(RequestStatus::kRunning);
      c.num_computed_tokens = prompt;
      c.num_cached_tokens = prompt;
      c.res.state_slot = slot;
      running_.push_back(&c);
      counters_.prompt_tokens_forked += prompt;
      output_.forks.push_back(ForkCopy{r.res.state_slot, slot, src_block, dst_block});
    } else {
      // No room to fork now: wait at the front, as a preempted request does, and recompute the
      // prompt and the first token (a prefix hit where the cache has them) when admitted.
      waiting_.insert(waiting_.begin() + fallback_at++, &c);
    }
  }
  fork_results_.push_back(StepResult{&c, token, status != RequestStatus::kRunning, status, scheduled_index, 0,
                                     fork_index});
}

void Scheduler::promote_fork_children(Request& r, std::deque<Request*>::iterator at) {
  if (r.fork_children.empty()) return;
  Request& first = *r.fork_children.front();
  first.fork_source = nullptr;
  --num_held_;
  for (std::size_t k = 1; k < r.fork_children.size(); ++k) {
    r.fork_children[k]->fork_source = &first;
    first.fork_children.push_back(r.fork_children[k]);
  }
  r.fork_children.clear();
  waiting_.insert(at, &first);
}

// The same snapshots plan_snapshots would have planned over the decode steps that produced these
// positions one at a time, but decided after the fact: each is reserved and committed now, and the
// model runner copies its state (kept in the rollback entries) right after this update, before any
// step can read it. Committing in order also reproduces the plain decode's LRU order.
void Scheduler::plan_kept_snapshots(Request& r, int start, int end) {
  if (snapshots_ == nullptr) return;
  const int bs = kv_.block_size();
  const int prompt_end = (r.num_prompt_tokens() - 1) / bs * bs;
  auto& pts = output_.kept_snapshot_points;
  int tail = 0;
  for (int b = (start / bs + 1) * bs; b <= end; b += bs) {
    const bool fixed = (config_.snapshot_interval > 0 && b % config_.snapshot_interval == 0) || b == prompt_end;
    if (!fixed) {
      if (b > prompt_end) tail = b;
      continue;
    }
    const BlockHash key = kv_.prefix_hash(r, b);
    if (const int have = snapshots_->find(key); have >= 0) {
      snapshots_->touch(have);
      continue;
    }
    const int id = snapshots_->reserve();
    if (id < 0) continue;
    pts.push_back(SnapshotPoint{b - start, id, b, key, false});
    if (!snapshots_->commit(id, key, b)) pts.pop_back();
    else kv_.record_snapshot_stored(r, b);
  }
  if (tail == 0) return;
  const BlockHash key = kv_.prefix_hash(r, tail);
  if (snapshots_->find(key) >= 0) return;
  if (r.res.tail_snapshot_id < 0) r.res.tail_snapshot_id = snapshots_->reserve();
  if (r.res.tail_snapshot_id < 0) return;
  pts.push_back(SnapshotPoint{tail - start, r.res.tail_snapshot_id, tail, key, true});
  r.res.tail_snapshot_tokens = tail;
}

void Scheduler::release_resources(Request& r) {
  kv_.free(r);
  if (r.res.state_slot >= 0) slots_.free(r.res.state_slot);
  r.res.state_slot = -1;
  if (r.res.tail_snapshot_id >= 0) {
    // The tail holds the state at the last block boundary this sequence passed: keep it as a
    // prefix-cache entry (next chat turn, or this request's own resume after preemption).
    if (r.res.tail_snapshot_tokens > 0) {
      if (snapshots_->commit(r.res.tail_snapshot_id, kv_.prefix_hash(r, r.res.tail_snapshot_tokens),
                             r.res.tail_snapshot_tokens))
        kv_.record_snapshot_stored(r, r.res.tail_snapshot_tokens);
    } else
      snapshots_->release(r.res.tail_snapshot_id);
  }
  r.res.tail_snapshot_id = -1;
  r.res.tail_snapshot_tokens = 0;
}

void Scheduler::preempt(Request& r) {
  release_resources(r);
  r.num_computed_tokens = 0;
  r.draft_token_ids.clear();
  r.transition_to(RequestStatus::kPreempted);
  ++r.num_preemptions;
  ++counters_.num_preemptions;
  ++output_.num_preempted;
  waiting_.push_front(&r);
}

void Scheduler::retire(Request& r, RequestStatus final_status) {
  if (!r.fork_children.empty() || r.fork_source != nullptr)
    throw EngineLogicError(fmt::format("request '{}' retired with held fork children or while held", r.id()));
  release_resources(r);
  r.transition_to(final_status);
  auto it = requests_.find(std::string_view(r.id()));
  retired_.push_back(std::move(it->second));
  requests_.erase(it);
}

bool Scheduler::abort_request(std::string_view id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  if (step_in_flight_) {
    // The model may be reading this request's blocks and slot: cancel once the step is done.
    deferred_aborts_.emplace_back(id);
    return true;
  }
  Request& r = *it->second;
  if (r.fork_source != nullptr) {  // a held child: in no queue
    auto& held = r.fork_source->fork_children;
    held.erase(std::find(held.begin(), held.end(), &r));
    r.fork_source = nullptr;
    --num_held_;
  } else if (r.status() == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
    promote_fork_children(r, waiting_.begin());
  } else {
    promote_fork_children(r, waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &r)));
  }
  retire(r, RequestStatus::kFinishedAborted);
  return true;
}

SchedulerMetrics Scheduler::metrics() const {
  SchedulerMetrics m = counters_;
  m.num_running = num_running();
  m.num_waiting = num_waiting();
  m.kv_cache_usage = kv_.usage();
  m.state_slots_total = slots_.num_slots();
  m.state_slots_in_use = slots_.num_slots() - slots_.num_free();
  m.prefix_cache_queries = kv_.prefix_stats().queried_tokens;
  m.prefix_cache_hits = kv_.prefix_stats().hit_tokens;
  m.kv_block_evictions = kv_.pool().num_evictions();
  if (snapshots_ != nullptr) {
    m.snapshots_committed = snapshots_->num_committed();
    m.snapshots_capacity = snapshots_->capacity();
    m.snapshot_evictions = snapshots_->num_evictions();
  }
  return m;
}

}  // namespace fp4serve::engine
