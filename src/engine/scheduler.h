// Continuous-batching scheduler with vLLM V1 semantics (vllm/v1/core/sched/scheduler.py):
//
//  * One schedule() per engine step with a budget of max_num_batched_tokens tokens.
//  * RUNNING requests first, in order: each gets min(remaining tokens, budget) (1 for a decode, the
//    rest of the prompt for an unfinished prefill, capped by long_prefill_token_threshold). When its
//    KV blocks cannot be allocated, the NEWEST running request is preempted by recompute (blocks,
//    state slot freed; num_computed_tokens = 0; put at the FRONT of the waiting queue) and the
//    allocation retried; if the victim is the request itself it is not scheduled.
//  * WAITING requests next, FCFS, only if nothing was preempted this step and fewer than
//    max_num_seqs are running: prefix-cache lookup, then the rest chunked into the leftover budget.
//    A failed allocation stops admission (head of line; waiting requests never preempt).
//  * update_from_output() appends the sampled tokens, advances num_computed_tokens, registers computed
//    blocks and GDN snapshots in the prefix cache, and finishes requests on max_tokens/max_model_len
//    ("length") or when the engine's StopChecker says so ("stop").
//
// GDN snapshots (see state_snapshot_store.h) are planned here: at every multiple of
// snapshot_interval, at the last block boundary before a prompt's last token (so the same prompt, or
// a longer one starting with it, hits), and as a rolling "tail" at the last block boundary a sequence
// passed, committed when it finishes or is preempted (a multi-turn chat resumes from the previous
// turn; a preempted request resumes from where it was). Hit granularity: any block_size multiple at
// which such a snapshot exists; for a shared prefix that is not a previous prompt or conversation, the
// largest snapshot_interval multiple inside it.
//
// Chunk alignment: none. The model copies state at any token inside a chunk (SnapshotPoint), since
// the recurrent form splits anywhere bit-identically; so no chunk is ever shortened for a snapshot
// and no request is skipped for lack of budget (vLLM's align mode has both costs).
//
// Speculative decoding (vLLM spec_token_ids / num_draft_tokens): a running request in decode whose
// draft_token_ids the engine filled gets 1 + d tokens (its last token and d drafts) and 1 + d logits
// rows. d is trimmed so the step never passes the token budget, long_prefill_token_threshold,
// num_speculative_tokens, max_model_len or max_tokens even if every draft is accepted; when the KV
// blocks for the drafts are missing the request runs without them (drafts never preempt anyone).
// update_from_emitted takes the accepted drafts and the correction or bonus token, appends them one at
// a time with the usual finish checks (a finish drops the tokens after it), moves num_computed_tokens
// back to the kept length, returns the blocks that only held rejected positions, registers only
// blocks of kept tokens, and plans the GDN snapshots the kept tokens passed (VerifyOutcome): nothing a
// rejected draft touched reaches the prefix cache.
//
// Shared prefill for n > 1 (add_fork_child): children 1 .. n-1 of a request are held, in no queue,
// while child 0 (the source) prefills the prompt alone. The step that computes the source's last
// prompt token lists them in ScheduledRequest::fork_children; the engine samples each one's first
// token from the source's logits row with the child's own options (so it equals what a single request
// with the child's seed samples), and update_from_emitted forks each child: it takes the source's
// full KV blocks by reference, a copy of the partial last block and a copy of the GDN state
// (SchedulerOutput::forks), num_computed_tokens = prompt length, and continues in decode. Its prompt
// tokens count as prompt_tokens_forked, not computed. A child that cannot fork (no free slot, block or
// running place) joins the front of the waiting queue with its first token, as a preempted request,
// and prefills itself. A source aborted before the fork hands its held children to the first of them.
//
// Single-threaded: the engine thread owns it. Calls alternate schedule() / update_from_output();
// abort_request() between them is deferred to the end of update_from_output(), and the step's work
// for that request is discarded: no token appended or counted, nothing cached (the engine's async
// scheduling ends requests this way when a stop string is found while their next step runs).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/request.h"
#include "engine/scheduler_metrics.h"
#include "engine/scheduler_output.h"
#include "engine/state_pool.h"
#include "engine/state_snapshot_store.h"

namespace fp4serve::engine {

struct SchedulerConfig {
  int max_num_batched_tokens = 8192;
  int max_num_seqs = 256;
  int max_model_len = 0;
  int long_prefill_token_threshold = 0;  // 0 = off
  // GDN snapshot every this many tokens (a multiple of the KV block size); 0 = only at prompt ends
  // and sequence ends. Ignored without a snapshot store or without prefix caching.
  int snapshot_interval = 0;
  // Most drafts a request verifies per step (0: drafts are ignored); at most kMaxSpeculativeTokens.
  int num_speculative_tokens = 0;
};

// Decides, after a token was appended, whether the request stops (EOS, stop token ids, stop strings,
// min_tokens handling). max_tokens and max_model_len are the scheduler's own checks and come first,
// as in vLLM check_stop.
using StopChecker = std::function<bool(const Request&)>;

// One appended token. A verify step gives a request several, in order; only the last can be finished.
struct StepResult {
  const Request* request = nullptr;  // valid until the next schedule()
  std::int32_t token = -1;           // the token appended this step
  bool finished = false;
  RequestStatus status = RequestStatus::kRunning;
  int scheduled_index = -1;          // in the step's SchedulerOutput::scheduled
  int token_index = 0;               // 0 .. : which of the request's tokens this step (its logits row)
  int fork_index = -1;               // >= 0: the request is fork_children[fork_index] of the scheduled one
};

class Scheduler {
 public:
  // snapshots may be null (no GDN layers, or prefix caching off). References must outlive this.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, StateSlotPool& slots,
            StateSnapshotStore* snapshots, StopChecker stop_checker = {});

  // Queues a new request (FCFS by arrival). EngineLogicError on a duplicate id, an empty prompt or a
  // prompt longer than max_model_len.
  // cache_salt_hash and mm: Request::cache_salt_hash and Request::mm, set before the prompt's block
  // hashes are computed.
  Request& add_request(std::string id, std::vector<std::int32_t> prompt_token_ids, int max_tokens,
                       std::uint64_t cache_salt_hash = 0, std::shared_ptr<const MultimodalPrompt> mm = nullptr);
  // Queues a held child of source_id (waiting, never scheduled, prompt not computed yet): it is
  // forked from the source when the source's prompt is computed (see above). The child's prompt is
  // the source's. EngineLogicError on a duplicate id or a source that is unknown or past its prompt.
  Request& add_fork_child(std::string id, std::string_view source_id, int max_tokens);
  // Cancels a request in any unfinished state, freeing what it holds; false if unknown or finished.
  bool abort_request(std::string_view id);

  const SchedulerOutput& schedule();
  // The last schedule()'s output (update_from_emitted fills its outcome fields); valid until the next.
  const SchedulerOutput& last_output() const { return output_; }
  // sampled_tokens[i] is the token sampled for output.scheduled[i] (ignored where !needs_logits).
  const std::vector<StepResult>& update_from_output(std::span<const std::int32_t> sampled_tokens);
  // The general form: emitted[i] are the tokens output.scheduled[i] produced (ignored where
  // !needs_logits): one, or for a verify step its accepted drafts followed by the correction or bonus
  // token (1 .. 1 + num_draft_tokens; EngineLogicError if a token before the last is not its draft).
  // fork_tokens: the first token of every fork child of the step, in scheduled order then child order
  // (EngineLogicError if the count differs); their results follow their source's.
  const std::vector<StepResult>& update_from_emitted(std::span<const std::span<const std::int32_t>> emitted,
                                                     std::span<const std::int32_t> fork_tokens = {});

  int num_running() const { return static_cast<int>(running_.size()); }
  // Held fork children count as waiting (a held child's source is always running or waiting).
  int num_waiting() const { return static_cast<int>(waiting_.size()) + num_held_; }
  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }
  const Request* find(std::string_view id) const;
  std::span<Request* const> running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  SchedulerMetrics metrics() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  void emit(Request& r, int num_tokens, std::size_t old_num_blocks, StateInit init,
            int restore_snapshot_id, bool resumed, int num_drafts = 0);
  // Drafts r can verify this step within max_tokens, max_model_len and num_speculative_tokens.
  int draft_limit(const Request& r) const;
  void plan_snapshots(Request& r, int start, int end);
  // Verify steps: the snapshots the kept positions start .. end - 1 passed, into kept_snapshot_points.
  void plan_kept_snapshots(Request& r, int start, int end);
  void update_verified(int index, const ScheduledRequest& s, std::span<const std::int32_t> tokens);
  // A request aborted while its step ran: drops the step's reservations (see the file comment).
  void discard_step(const ScheduledRequest& s);
  // kFinishedLength / kFinishedStopped / kRunning for r after a token was appended.
  RequestStatus finish_status(const Request& r) const;
  // Forks held child c (first token `token`) off source r, whose prompt was computed this step.
  void fork(Request& r, Request& c, std::int32_t token, int scheduled_index, int fork_index, int& fallback_at);
  // r leaves before forking its held children: the first becomes an ordinary waiting request at
  // r's place in the queue (or the front) and the source of the others.
  void promote_fork_children(Request& r, std::deque<Request*>::iterator at);
  void preempt(Request& r);
  void release_resources(Request& r);
  void retire(Request& r, RequestStatus final_status);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  StateSlotPool& slots_;
  StateSnapshotStore* snapshots_;
  StopChecker stop_checker_;

  struct IdHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::unique_ptr<Request>, IdHash, std::equal_to<>> requests_;
  std::vector<Request*> running_;
  std::deque<Request*> waiting_;
  std::vector<std::unique_ptr<Request>> retired_;  // finished; freed at the next schedule()
  std::vector<std::string> deferred_aborts_;
  std::uint64_t next_arrival_ = 0;
  bool step_in_flight_ = false;
  int num_held_ = 0;  // fork children held on a source

  SchedulerOutput output_;
  std::vector<StepResult> results_;
  std::vector<StepResult> fork_results_;  // one source's fork children, appended after its own result
  std::vector<std::span<const std::int32_t>> single_tokens_;  // the one-token form's spans
  SchedulerMetrics counters_;
};

}  // namespace fp4serve::engine
