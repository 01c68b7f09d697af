// A consistent snapshot of what the engine measures, for /metrics, the periodic stats log line and
// the /health watchdog. Taken under the engine's stats lock; cheap to copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "engine/histogram.h"
#include "engine/scheduler_metrics.h"

namespace fp4serve::engine {

struct EngineStats {
  SchedulerMetrics scheduler;  // gauges and token/preemption counters
  // Finished requests by finish_reason ("stop", "length", "abort", "error"):
  // vllm:request_success_total{finished_reason=...}.
  std::map<std::string, std::int64_t> requests_finished;
  Histogram time_to_first_token{ttft_buckets_seconds()};
  Histogram inter_token_latency{inter_token_buckets_seconds()};
  Histogram e2e_request_latency{request_latency_buckets_seconds()};
  Histogram request_queue_time{request_latency_buckets_seconds()};
  Histogram iteration_tokens{iteration_tokens_buckets()};
  // Wall time of each engine step that ran the model: from the scheduler's output to the sampled
  // tokens applied (forward pass, sampling, scheduler update; not the output delivery).
  Histogram engine_step_duration{step_duration_buckets_seconds()};
  Histogram request_prefill_time{request_latency_buckets_seconds()};    // first scheduled -> first token
  Histogram request_decode_time{request_latency_buckets_seconds()};     // first token -> last token
  Histogram request_inference_time{request_latency_buckets_seconds()};  // first scheduled -> last token
  Histogram request_time_per_output_token{inter_token_buckets_seconds()};  // decode time / (tokens - 1)
  Histogram request_params_n{{1, 2, 5, 10, 20}};
  Histogram request_prompt_tokens;      // 1-2-5 buckets up to max_model_len
  Histogram request_generation_tokens;  // same
  Histogram request_max_num_generation_tokens;  // same: the longest of the request's n sequences
  Histogram request_params_max_tokens;          // same
  // The watchdog's signal: when the engine last finished a step that produced a token (or went
  // idle), and whether work is waiting or running now. Wedged = has_work and now - last_progress
  // exceeds the stall timeout.
  std::chrono::steady_clock::time_point last_progress{};
  bool has_work = false;
  std::int64_t num_steps = 0;
  // Times the front-end restarted a dead or wedged engine process (fp4serve:engine_restarts_total;
  // always 0 in process).
  std::int64_t engine_restarts = 0;
};

}  // namespace fp4serve::engine
