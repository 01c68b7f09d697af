// One generation request as the scheduler sees it: its tokens, its progress, its status and the
// resources (KV blocks, GDN state slot, state snapshot) it currently holds.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/block_hash.h"

namespace fp4serve::engine {

struct MultimodalPrompt;

// vLLM V1 RequestStatus, minus the states we have no use for yet (structured-output FSM, remote KV).
enum class RequestStatus : std::uint8_t {
  kWaiting,           // queued, never scheduled
  kRunning,           // in the running list (holds KV blocks and a state slot)
  kPreempted,         // was running, resources freed, back at the front of the waiting queue
  kFinishedStopped,   // EOS / stop token / stop string (finish_reason "stop")
  kFinishedLength,    // max_tokens or max_model_len reached (finish_reason "length")
  kFinishedAborted,   // cancelled by the client or the server (finish_reason "abort")
};

const char* to_string(RequestStatus status);
bool is_finished(RequestStatus status);
// OpenAI finish_reason of a finished status ("stop", "length", "abort"); nullptr if not finished.
const char* finish_reason(RequestStatus status);
// Whether `from -> to` is a legal transition of the state machine.
bool is_valid_transition(RequestStatus from, RequestStatus to);

class Request {
 public:
  // prompt must be non-empty and max_tokens >= 1 (checked; EngineLogicError otherwise).
  // arrival_seq orders requests FCFS; the scheduler assigns it.
  Request(std::string id, std::vector<std::int32_t> prompt_token_ids, int max_tokens,
          std::uint64_t arrival_seq);

  const std::string& id() const { return id_; }
  std::uint64_t arrival_seq() const { return arrival_seq_; }
  int max_tokens() const { return max_tokens_; }

  std::span<const std::int32_t> prompt_token_ids() const {
    return {all_token_ids_.data(), static_cast<std::size_t>(num_prompt_tokens_)};
  }
  std::span<const std::int32_t> output_token_ids() const {
    return std::span<const std::int32_t>(all_token_ids_).subspan(num_prompt_tokens_);
  }
  // Prompt followed by the generated tokens: what a recompute after preemption re-prefills.
  std::span<const std::int32_t> all_token_ids() const { return all_token_ids_; }
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  int num_tokens() const { return static_cast<int>(all_token_ids_.size()); }
  void append_output_token(std::int32_t token) { all_token_ids_.push_back(token); }
  // Reserves room for this many tokens in all, so appending on the step path never reallocates.
  // The scheduler passes min(prompt + max_tokens, max_model_len): max_tokens alone is client input.
  void reserve_tokens(int max_total_tokens);

  RequestStatus status() const { return status_; }
  // Checked transition; an illegal one throws EngineLogicError naming the request and both states.
  void transition_to(RequestStatus next);
  bool finished() const { return is_finished(status_); }

  // Tokens whose KV (and GDN state) are computed. A decode step schedules the one token after it.
  int num_computed_tokens = 0;
  // Tokens restored from the prefix cache at the first admission (-1 until admitted); for metrics.
  int num_cached_tokens = -1;
  int num_preemptions = 0;

  // Prompt logprobs are asked for and not yet computed: the scheduler skips the prefix-cache
  // lookup (vLLM skip_reading_prefix_cache: every prompt row must be computed; the request still
  // fills the cache) and asks the model for the logits rows that score prompt tokens. Cleared once
  // the prompt's last chunk ran, so a recompute after a later preemption reads the cache again.
  bool prompt_logprobs_pending = false;

  // Speculative decoding: the drafter's proposal for the tokens after all_token_ids() (vLLM
  // spec_token_ids). The scheduler runs as many as fit the step and the request's limits and clears
  // it; the engine refills it after each step while the request is in decode.
  std::vector<std::int32_t> draft_token_ids;

  // Shared prefill for n > 1 (Scheduler::add_fork_child): a held child is in no queue; it waits for
  // fork_source's prompt to be computed and is then forked from it (its first token sampled from
  // the source's last prompt row, the source's KV blocks and GDN state copied or shared). Written
  // only by the Scheduler.
  Request* fork_source = nullptr;
  std::vector<Request*> fork_children;  // the children held on this request, in index order

  // Opaque per-request payload of the layers above (the engine stores its SamplingParams,
  // output channel, ... here); the scheduler never looks inside.
  std::shared_ptr<void> user_data;
  // Hash of the OpenAI `cache_salt` mixed into the first block's hash (0 = none), so tenants that
  // salt their requests never share prefix-cache entries (vLLM semantics).
  std::uint64_t cache_salt_hash = 0;
  // The prompt's images (null for text): their rows' features, M-RoPE positions and the content
  // hashes mixed into the block hashes. Set before the block hashes are computed; fork children
  // share their source's.
  std::shared_ptr<const MultimodalPrompt> mm;

  // ---- Resources. Written only by KvCacheManager / Scheduler. ----
  struct Resources {
    std::vector<BlockHash> block_hashes;  // hash of every full block of all_token_ids, chained
    std::vector<std::int32_t> block_ids;  // block table (KV blocks, in token order)
    int num_registered_blocks = 0;        // leading blocks already offered to the prefix cache
    int state_slot = -1;                  // GDN state slot while running
    // Rolling "tail" snapshot: the state at the last block boundary this sequence passed that is
    // not otherwise snapshotted; committed to the prefix cache when the sequence ends or is
    // preempted, so a follow-up turn (or the resume) restores from it.
    int tail_snapshot_id = -1;
    int tail_snapshot_tokens = 0;         // boundary the tail holds (0 = nothing valid)
    // A verify step's input: the last token, then the drafts it runs (ScheduledRequest::tokens).
    std::vector<std::int32_t> verify_tokens;
  };
  Resources res;

 private:
  std::string id_;
  std::vector<std::int32_t> all_token_ids_;
  int num_prompt_tokens_;
  int max_tokens_;
  std::uint64_t arrival_seq_;
  RequestStatus status_ = RequestStatus::kWaiting;
};

}  // namespace fp4serve::engine
