// The engine: one thread that owns every piece of scheduling state (scheduler, KV cache manager,
// GDN slots and snapshots, sampler, model runner) and loops schedule -> forward -> sample ->
// update -> detokenize/stop -> push outputs. Other threads talk to it only through submit(),
// abort(), stats() and the per-request OutputChannel (all thread-safe).
//
// Ownership and threading (TurboMind style, written down):
//  * Engine owns the model runner and the scheduling stack; only the engine thread touches them.
//  * submit()/abort() put work in an inbox under inbox_mutex_ and wake the engine thread; the engine
//    drains the inbox at the top of each step, so a cancel takes effect within one step.
//  * Outputs go to each request's OutputChannel; the engine never blocks on a consumer.
//  * stats() copies a snapshot kept under stats_mutex_, refreshed after every step.
//
// n > 1: the request becomes n child sequences in the scheduler ("<index>_<id>", as vLLM names
// them) with seeds seed + index; their outputs come back on the parent's channel with the index.
// The prompt is prefilled once, by child 0; the others are forked from it when it completes
// (Scheduler::add_fork_child): each samples its first token from child 0's last prompt row with its
// own options and continues from child 0's KV blocks and GDN state, so each child's tokens are those
// of a single request with its seed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/cache_plan.h"
#include "engine/cuda_graph_sizes.h"
#include "engine/engine_stats.h"
#include "engine/kv_events.h"
#include "engine/multimodal_input.h"
#include "engine/output_channel.h"
#include "engine/resumed_sequence.h"
#include "engine/sampling_params.h"
#include "model/qwen3_5_moe.h"
#include "model/vision_encoder.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::engine {

class Drafter;

struct EngineConfig {
  int max_model_len = 0;             // 0 = the model's max_position_embeddings
  int max_num_seqs = 0;              // 0 = chosen to fit (see cache_plan.h)
  int max_num_batched_tokens = 2048;
  int long_prefill_token_threshold = 0;
  int block_size = 16;
  std::uint64_t cache_memory_bytes = 1ull << 30;  // KV + GDN slots + snapshots
  kernels::KvDtype kv_dtype = kernels::KvDtype::kBf16;
  bool enable_prefix_caching = true;
  int snapshot_interval = 512;       // GDN snapshot every this many tokens (multiple of block_size)
  double snapshot_fraction = 0.25;
  int num_kv_blocks_override = 0;    // --num-gpu-blocks-override (vLLM's name): fewer KV blocks
  int max_waiting_requests = 4096;   // submit() beyond this is refused (server: 503 + Retry-After)
  std::uint64_t seed = 0;            // generator of unseeded random requests
  // EOS: the tokenizer's eos id ends a sequence with stop_reason none; the generation config's
  // other EOS ids are added to every request's stop_token_ids unless ignore_eos (vLLM).
  std::int64_t eos_token_id = -1;
  std::vector<std::int64_t> generation_eos_token_ids;
  // Speculative decoding: after each step the drafter proposes up to num_speculative_tokens tokens for
  // every request in decode and the next step verifies them; outputs stay exactly those of a run
  // without it (step_sampling.h). Off unless both are set. No serve flag sets them yet (MTP is a later
  // issue): tests and embedders only. The GDN rollback entries come out of cache_memory_bytes.
  std::shared_ptr<Drafter> drafter;
  int num_speculative_tokens = 0;
  // The checkpoint's MTP layer as the drafter (mtp_drafter.h; serve's --speculative-config with
  // method "mtp"), instead of `drafter`: the model must have its MTP head bound (bind_mtp), the KV
  // cache gets the MTP layer's KV in the same blocks (so fewer blocks fit the budget).
  bool mtp = false;
  // CUDA graphs of pure-decode steps (vLLM's cudagraph_mode and capture sizes; cuda_graph_sizes.h),
  // captured when the engine starts. Default: none (eager), as --enforce-eager.
  CudaGraphSettings cuda_graphs;
  // The model's vision tower (null: requests with images are refused). Images are encoded on the
  // engine thread when a request's prefill first reaches their rows (image_features.h); the
  // encoder's out_hidden must be the model's hidden size.
  std::shared_ptr<const model::VisionEncoder> vision_encoder;
  // vLLM's --kv-events-config: KV cache events on a ZMQ PUB socket for KV-aware routers (kv_events.h).
  KvEventsConfig kv_events;
};

struct EngineRequest {
  std::string id;
  std::vector<std::int32_t> prompt_token_ids;
  // Images whose <|image_pad|> runs are in prompt_token_ids (ascending offsets, non-overlapping;
  // checked by submit(): kInvalid names what is wrong, or that the engine has no vision encoder).
  MultimodalInputs images;
  SamplingParams params;  // already through prepare_sampling_params (and tokenize_bad_words)
  std::uint64_t cache_salt_hash = 0;
  tokenizer::DetokenizerOptions detokenize;
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();
  // Called on the engine thread after each output is queued on the request's channel (set before
  // the request is queued, so no output can be missed). Must not block.
  std::function<void()> notifier;
  // Set when the request is resubmitted to a restarted engine: per sequence, what was already sent
  // (empty for a fresh request; resumed_sequence.h).
  std::vector<ResumedSequence> resumed;
};

// submit() refusals: the server maps kOverloaded to 503, the others to 400 / 503.
class EngineRejected : public std::runtime_error {
 public:
  enum class Reason { kOverloaded, kShuttingDown, kInvalid };
  EngineRejected(Reason reason, const std::string& what) : std::runtime_error(what), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

struct EngineInfo {
  int max_model_len = 0;
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  int block_size = 0;
  std::int64_t vocab_size = 0;        // logits row (lm_head rows)
  std::int64_t valid_vocab_size = 0;  // tokenizer size
  CachePlan cache;
  bool prefix_caching = true;
  std::string kv_cache_dtype;
  std::vector<int> cuda_graph_sizes;  // the decode batch sizes planned as graphs (empty: eager)
};

class Engine {
 public:
  // Plans the cache (throws EngineConfigError), allocates it and starts the engine thread.
  Engine(std::shared_ptr<const model::Qwen35MoeModel> model, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
         EngineConfig config);
  ~Engine();  // shutdown(0)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its outputs arrive on the returned channel. Throws EngineRejected.
  std::shared_ptr<OutputChannel> submit(EngineRequest request);
  // Cancels a request (no-op if unknown or finished): its channel gets a final "abort" output.
  void abort(const std::string& request_id);

  EngineStats stats() const;
  const EngineInfo& info() const { return info_; }

  // Stops accepting, lets in-flight requests finish for up to `drain`, then aborts the rest with
  // an error output ("server shutting down") and joins the engine thread. Idempotent.
  void shutdown(std::chrono::milliseconds drain);

  // Test and fault-injection switches (the /health wedge test, the canary's proof).
  void set_debug_stall(bool stalled);
  void set_corrupt_gdn_state(bool on);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  EngineInfo info_;
};

}  // namespace fp4serve::engine
