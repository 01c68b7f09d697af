#include "server/metrics/engine_metrics_exposition.h"

#include <array>
#include <vector>

#include "server/metrics/process_metrics.h"
#include "server/metrics/prometheus_text.h"

namespace fp4serve::server::metrics {
namespace {

using Sample = PrometheusTextWriter::Sample;
using HistogramSample = PrometheusTextWriter::HistogramSample;

// vLLM registers a request_success child for every FinishReason up front, so all of them show,
// zero or not (vllm/v1/engine FINISH_REASON_STRINGS order).
constexpr std::array<const char*, 5> kFinishReasons = {"stop", "length", "abort", "error", "repetition"};

}  // namespace

std::string render_engine_metrics(const engine::EngineStats& stats, const ExpositionConfig& config) {
  PrometheusTextWriter w(config.created_unix_seconds);
  if (config.include_process_metrics) {
    if (const auto process = read_process_metrics()) write_process_metrics(*process, w);
  }

  const Labels base = {{"model_name", config.model_name}, {"engine", config.engine}};
  const auto one = [&](double value) { return std::vector<Sample>{{base, value}}; };
  const auto with = [&](const char* key, std::string value) {
    Labels labels = base;
    labels.emplace_back(key, std::move(value));
    return labels;
  };
  const auto hist = [&](const engine::Histogram& h) {
    return std::vector<HistogramSample>{{base, h.upper_bounds(), h.counts(), h.sum()}};
  };
  const engine::SchedulerMetrics& s = stats.scheduler;

  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", one(s.num_running));
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", one(s.num_waiting));
  w.gauge("vllm:engine_sleep_state",
          "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
          "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
          {{with("sleep_state", "awake"), 1.0},
           {with("sleep_state", "weights_offloaded"), 0.0},
           {with("sleep_state", "discard_all"), 0.0}});
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", one(s.kv_cache_usage));
  w.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            one(static_cast<double>(s.prefix_cache_queries)));
  w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            one(static_cast<double>(s.prefix_cache_hits)));
  // No KV connector and no multi-modal cache: vLLM still registers these, at zero.
  w.counter("vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of "
            "queried tokens.",
            one(0));
  w.counter("vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of "
            "cached tokens.",
            one(0));
  w.counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.", one(0));
  w.counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", one(0));
  w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            one(static_cast<double>(s.num_preemptions)));
  // vLLM counts every prompt token here (computed + prefix-cache hits); the split is in
  // prompt_tokens_by_source.
  const double computed = static_cast<double>(s.prompt_tokens_computed);
  // Prompt tokens an n > 1 child took from the sibling that prefilled them count as cache hits.
  const double cached = static_cast<double>(s.prefix_cache_hits + s.prompt_tokens_forked);
  w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", one(computed + cached));
  w.counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
            {{with("source", "local_compute"), computed},
             {with("source", "local_cache_hit"), cached},
             {with("source", "external_kv_transfer"), 0.0}});
  w.counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", one(cached));
  w.counter("vllm:generation_tokens", "Number of generation tokens processed.",
            one(static_cast<double>(s.generation_tokens)));

  std::vector<Sample> finished;
  for (const char* reason : kFinishReasons) {
    const auto it = stats.requests_finished.find(reason);
    finished.push_back({with("finished_reason", reason),
                        it == stats.requests_finished.end() ? 0.0 : static_cast<double>(it->second)});
  }
  for (const auto& [reason, count] : stats.requests_finished) {
    bool known = false;
    for (const char* r : kFinishReasons) known = known || reason == r;
    if (!known) finished.push_back({with("finished_reason", reason), static_cast<double>(count)});
  }
  w.counter("vllm:request_success", "Count of successfully processed requests.", finished);

  // Speculative decoding (vllm/v1/spec_decode/metrics.py SpecDecodingProm): only when it is on, one
  // per-position counter for each of the num_speculative_tokens positions.
  if (const engine::SpecDecodeMetrics& sd = s.spec_decode; sd.num_speculative_tokens > 0) {
    w.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", one(static_cast<double>(sd.num_drafts)));
    w.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
              one(static_cast<double>(sd.num_draft_tokens)));
    w.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
              one(static_cast<double>(sd.num_accepted_tokens)));
    std::vector<Sample> per_pos;
    for (int pos = 0; pos < sd.num_speculative_tokens && pos < engine::kMaxSpeculativeTokens; ++pos)
      per_pos.push_back({with("position", std::to_string(pos)),
                         static_cast<double>(sd.num_accepted_tokens_per_pos[static_cast<std::size_t>(pos)])});
    w.counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", per_pos);
  }

  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", hist(stats.request_prompt_tokens));
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
              hist(stats.request_generation_tokens));
  w.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              hist(stats.iteration_tokens));
  w.histogram("fp4serve:engine_step_duration_seconds",
              "Histogram of the wall time of engine steps that ran the model, in seconds.",
              hist(stats.engine_step_duration));
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              hist(stats.time_to_first_token));
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              hist(stats.inter_token_latency));
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              hist(stats.e2e_request_latency));
  w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              hist(stats.request_queue_time));
  w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              hist(stats.request_inference_time));
  w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              hist(stats.request_prefill_time));
  w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
              hist(stats.request_decode_time));
  w.histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
              hist(stats.request_time_per_output_token));
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", hist(stats.request_params_n));
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              hist(stats.request_params_max_tokens));
  w.histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
              hist(stats.request_max_num_generation_tokens));

  if (!config.cache_config_info.empty()) {
    auto info = config.cache_config_info;
    info["engine"] = config.engine;
    const Labels labels(info.begin(), info.end());
    w.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", {{labels, 1.0}});
  }
  if (config.engine_restarts) {
    w.counter("fp4serve:engine_restarts", "Times the engine process died or wedged and was restarted.",
              one(static_cast<double>(stats.engine_restarts)));
  }
  return w.text();
}

}  // namespace fp4serve::server::metrics
