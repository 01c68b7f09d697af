// `fp4serve serve [MODEL] [flags]`: the OpenAI-compatible server, with vLLM's flag names. Loads the
// model (or makes the built-in demo model), starts the engine and the HTTP server, logs vLLM's
// periodic stats line, and on SIGTERM/SIGINT drains: stops accepting, lets in-flight requests
// finish for --shutdown-timeout seconds, then ends the rest with a final error chunk.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "server/http/connection_limits.h"
#include "server/http/http_server.h"
#include "server/http/termination_signals.h"
#include "server/metrics/stats_log_line.h"
#include "server/routes/routes.h"
#include "tools/commands.h"
#include "tools/demo_model.h"
#include "tools/doctor_host.h"
#include "tools/preflight_checks.h"
#include "engine/ipc/engine_core_server.h"
#include "tools/engine_process_flags.h"
#include "tools/device_choice.h"
#include "tools/engine_setup.h"
#include "tools/serve_media_flags.h"
#include "tools/serve_transport_flags.h"

namespace fp4serve::tools {
namespace {

struct ServeArgs {
  std::string model_positional;
  std::string model_flag;
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_names;
  std::string api_key;
  std::string generation_config = "auto";
  std::string chat_template;
  std::string default_chat_template_kwargs;
  bool trust_request_chat_template = false;
  int tensor_parallel_size = 1;
  std::string reasoning_parser;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  double health_stall_timeout = 60.0;
  double shutdown_timeout = 30.0;
  int max_waiting_requests = 4096;
  int max_logprobs = 20;
  bool disable_log_stats = false;
  bool disable_log_requests = true;
  bool enable_log_requests = false;
  bool enable_prompt_tokens_details = false;
  bool enable_force_include_usage = false;
  bool return_tokens_as_token_ids = false;
  bool enable_debug_endpoints = false;
  unsigned io_threads = 0;
  std::size_t max_connections = 0;
  double timeout_keep_alive = -1;  // < 0: VLLM_HTTP_TIMEOUT_KEEP_ALIVE, else 5 s
  double request_head_timeout = 10.0;
  double request_body_timeout = 60.0;
  TransportFlags transport;
  EngineProcessFlags engine_process;
  MediaFlags media;
  EngineFlags engine;
  GpuFlags gpu;
};

std::string read_chat_template_arg(const std::string& arg) {
  // vLLM: a path to a file, else the template text itself.
  std::ifstream in(arg);
  if (in) return std::string(std::istreambuf_iterator<char>(in), {});
  if (arg.find("{%") == std::string::npos && arg.find("{{") == std::string::npos)
    throw std::runtime_error(fmt::format("--chat-template: '{}' is neither a readable file nor a Jinja template", arg));
  return arg;
}

void run_serve(ServeArgs a) {
  StartupPhases phases;  // logged once the server listens
  if (!a.model_positional.empty() && !a.model_flag.empty() && a.model_positional != a.model_flag)
    throw std::runtime_error("give the model once: as MODEL or as --model, not two different ones");
  // Every known-bad configuration (preflight_checks.h; `fp4serve doctor` prints the same verdicts).
  ServeSettings preflight;
  preflight.tensor_parallel_size = a.tensor_parallel_size;
  preflight.gpu_memory_utilization = a.engine.gpu_memory_utilization;
  preflight.reasoning_parser = a.reasoning_parser;
  preflight.tool_call_parser = a.tool_call_parser;
  preflight.enable_auto_tool_choice = a.enable_auto_tool_choice;
  preflight.generation_config = a.generation_config;
  preflight.engine = a.engine;
  preflight.gpu = a.gpu;
  HostInfo host = probe_host();
  // --device (device_choice.h): --device cuda without a GPU stops here; the GPU rules apply on CUDA.
  host.gpu_backend = choose_device(a.engine.device, probe_cuda()).kind == DeviceKind::kCuda;
  enforce_preflight(preflight, host);  // flag rules, before the slow load
  const engine::CudaGraphSettings cuda_graphs = resolve_cuda_graph_flags(a.gpu);  // cuda_graph_flags.h
  // A bad certificate or CORS list is refused before the load too (the server loads the files
  // again when it starts; --enable-ssl-refresh may change them later).
  const TransportSettings transport = resolve_transport_flags(a.transport);
  const MediaSettings media = resolve_media_flags(a.media);
  if (!transport.tls.enabled() && (!a.transport.ssl_ca_certs.empty() || a.transport.ssl_cert_reqs != 0))
    spdlog::warn("--ssl-ca-certs/--ssl-cert-reqs without --ssl-certfile: serving plain http (as vLLM does)");
  if (a.api_key.empty()) {
    if (const char* k = std::getenv("VLLM_API_KEY")) a.api_key = k;
  }

  std::string model = a.model_flag.empty() ? a.model_positional : a.model_flag;
  const bool demo = model.empty();
  if (demo) {
    model = ensure_demo_model();
    if (a.served_model_names.empty()) a.served_model_names.push_back("fp4serve-demo");
    if (a.engine.max_model_len == 0) a.engine.max_model_len = 8192;
  }
  // The engine process (`serve` run again with --engine-core-fd) loads the model; its front-end
  // reads only the configs and the tokenizer.
  const bool engine_core = a.engine_process.engine_core_fd >= 0;
  const bool multiprocessing = !engine_core && engine_multiprocessing_enabled();
  if (engine_core) spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] (EngineCore pid=%P) %v");
  ServingModel sm = load_serving_model(
      model, a.engine, &phases, VisionChoice{media.vision_tower_needed(), media.vision_device == VisionDevice::kCpu},
      /*weights=*/!multiprocessing);
  if (!demo) {
    preflight.model = model_facts(*sm.checkpoint, a.engine.tokenizer);
    enforce_preflight(preflight, host);  // model, tokenizer and cache-plan rules
  }
  for (const std::string& d : sm.decisions) spdlog::info("{}", d);
  sm.config.max_waiting_requests = a.max_waiting_requests;
  sm.config.cuda_graphs = cuda_graphs;
  std::unique_ptr<engine::EngineClient> engine_client;
  if (multiprocessing) {
    engine_client = std::make_unique<engine::ipc::ProcessEngineClient>(
        engine_process_options(a.engine_process, a.health_stall_timeout));
  } else {
    auto in_process = std::make_unique<engine::Engine>(sm.model, sm.tokenizer, sm.config);
    for (const std::string& l : in_process->info().cache.log_lines) spdlog::info("{}", l);
    if (engine_core) {
      spdlog::info("Engine process pid {} serving its front-end", ::getpid());
      engine::ipc::run_engine_core(*in_process, a.engine_process.engine_core_fd, {a.enable_debug_endpoints});
      return;
    }
    engine_client = std::make_unique<engine::InProcessEngineClient>(std::move(in_process));
  }
  engine::EngineClient& eng = *engine_client;
  phases.mark(multiprocessing ? "engine process" : "cache plan");

  server::ServingContext ctx;
  ctx.engine = &eng;
  ctx.tokenizer = sm.tokenizer;
  const std::string tpl = a.chat_template.empty() ? sm.chat_template : read_chat_template_arg(a.chat_template);
  if (!tpl.empty()) ctx.chat_template = std::make_unique<ChatTemplate>(tpl);
  else spdlog::warn("no chat template in {} and no --chat-template: /v1/chat/completions will refuse requests", sm.tokenizer_dir);
  ctx.special_tokens = nlohmann::ordered_json::object();
  {
    std::ifstream in(std::filesystem::path(sm.tokenizer_dir) / "tokenizer_config.json");
    if (in) {
      const auto cfg = nlohmann::ordered_json::parse(in, nullptr, false);
      for (const char* k : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
        if (!cfg.is_object() || !cfg.contains(k)) continue;
        const auto& v = cfg[k];
        if (v.is_string()) ctx.special_tokens[k] = v;
        else if (v.is_object() && v.contains("content")) ctx.special_tokens[k] = v["content"];
      }
    }
  }
  ctx.limits.served_model_names = a.served_model_names.empty() ? std::vector<std::string>{model} : a.served_model_names;
  ctx.limits.max_model_len = eng.info().max_model_len;
  ctx.limits.sampling.vocab_size = eng.info().vocab_size;
  ctx.limits.sampling.max_logprobs = a.max_logprobs;
  ctx.limits.sampling.valid_vocab_size = eng.info().valid_vocab_size;
  ctx.limits.sampling.reasoning_enabled = a.reasoning_parser == "qwen3";  // thinking_token_budget's markers
  ctx.limits.enable_auto_tool_choice = a.enable_auto_tool_choice;
  ctx.limits.trust_request_chat_template = a.trust_request_chat_template;
  if (a.generation_config == "auto") {
    ctx.defaults = server::openai::DefaultSamplingParams::from_generation_config(sm.checkpoint->generation_config());
  }
  ctx.options.model_root = model;
  ctx.options.reasoning_parser = a.reasoning_parser == "qwen3";
  ctx.options.enable_auto_tool_choice = a.enable_auto_tool_choice;
  if (!a.default_chat_template_kwargs.empty()) {
    auto kw = nlohmann::ordered_json::parse(a.default_chat_template_kwargs, nullptr, false);
    if (!kw.is_object()) throw std::runtime_error("--default-chat-template-kwargs must be a JSON object");
    ctx.options.chat.default_chat_template_kwargs = kw;
  }
  ctx.options.health_stall_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.health_stall_timeout * 1000));
  ctx.options.enable_prompt_tokens_details = a.enable_prompt_tokens_details;
  ctx.options.enable_force_include_usage = a.enable_force_include_usage;
  ctx.options.return_tokens_as_token_ids = a.return_tokens_as_token_ids;
  ctx.options.debug_endpoints = a.enable_debug_endpoints;
  ctx.options.version = FP4SERVE_VERSION;
  {
    std::vector<std::string> lines;
    ctx.options.images = make_image_serving(media, *sm.checkpoint, *sm.tokenizer, lines);
    for (const std::string& l : lines) spdlog::info("{}", l);
  }
  ctx.created_unix = static_cast<int64_t>(std::time(nullptr));
  ctx.exposition.model_name = ctx.limits.served_model_names.front();
  ctx.exposition.created_unix_seconds = static_cast<double>(ctx.created_unix);
  ctx.exposition.engine_restarts = multiprocessing;
  ctx.exposition.cache_config_info = {
      {"block_size", std::to_string(eng.info().block_size)},
      {"cache_dtype", eng.info().kv_cache_dtype},
      {"enable_prefix_caching", eng.info().prefix_caching ? "True" : "False"},
      {"num_gpu_blocks", std::to_string(eng.info().cache.num_kv_blocks)},
      {"num_cpu_blocks", "None"},
  };

  http::Router router;
  server::register_openai_routes(router, ctx);
  http::HttpServerConfig hc;
  hc.host = a.host;
  hc.port = static_cast<unsigned short>(a.port);
  hc.uds = transport.uds;
  hc.tls = transport.tls;
  hc.cors = transport.cors;
  hc.root_path = transport.root_path;
  hc.io_threads = a.io_threads;
  // vLLM raises the soft descriptor limit at start (set_ulimit); the connection cap follows it.
  const std::size_t fd_limit = http::raise_open_file_limit();
  hc.max_connections = http::resolve_max_connections(a.max_connections);
  auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  double keep_alive = a.timeout_keep_alive;
  if (keep_alive < 0) {
    const char* env = std::getenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE");
    keep_alive = env ? std::max(0.0, std::atof(env)) : 5.0;
  }
  hc.keep_alive_timeout = ms(keep_alive);
  hc.request_head_timeout = ms(a.request_head_timeout);
  hc.request_body_timeout = ms(a.request_body_timeout);
  spdlog::info("HTTP: at most {} open connections (descriptor limit {}), request head within {:.0f} s, body within {:.0f} s",
               hc.max_connections, fd_limit == 0 ? std::string("unlimited") : std::to_string(fd_limit),
               a.request_head_timeout, a.request_body_timeout);
  if (!a.api_key.empty()) hc.api_keys.push_back(a.api_key);
  if (a.enable_log_requests || !a.disable_log_requests)
    hc.access_log = [](const http::AccessLogEntry& e) { spdlog::info("{}", http::uvicorn_style_access_line(e)); };
  hc.error_log = [](const std::string& m) { spdlog::error("{}", m); };
  hc.info_log = [](const std::string& m) { spdlog::info("{}", m); };
  http::TerminationSignals signals;
  http::HttpServer srv(hc, std::move(router));
  srv.start();
  phases.mark("server");
  spdlog::info("{}", phases.line());
  spdlog::info("Serving {} ({}) on {} — max_model_len {}, max_num_seqs {}", ctx.limits.served_model_names.front(),
               demo ? "built-in demo model, random weights" : model, srv.listen_address(), eng.info().max_model_len,
               eng.info().max_num_seqs);
  if (!transport.root_path.empty())
    spdlog::info("Root path {}: routes answer under it and without it (FastAPI root_path)", transport.root_path);
  // Routes: the same list vLLM prints at start-up.
  spdlog::info("Available routes: /v1/completions, /v1/chat/completions, /v1/models, /tokenize, /detokenize, "
               "/version, /health, /ping, /metrics{}",
               a.enable_debug_endpoints ? ", /debug/stall, /debug/corrupt-gdn, /debug/segfault, /debug/engine" : "");

  // vLLM's periodic stats line (VLLM_LOG_STATS_INTERVAL seconds, default 10).
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread stats_thread;
  if (!a.disable_log_stats) {
    double interval = 10.0;
    if (const char* e = std::getenv("VLLM_LOG_STATS_INTERVAL")) interval = std::max(0.1, std::atof(e));
    stats_thread = std::thread([&, interval] {
      server::metrics::StatsLogger logger;
      engine::EngineStats prev = eng.stats();
      auto t_prev = std::chrono::steady_clock::now();
      std::unique_lock lock(stop_mu);
      while (!stop_cv.wait_for(lock, std::chrono::duration<double>(interval), [&] { return stopping; })) {
        const engine::EngineStats cur = eng.stats();
        const auto now = std::chrono::steady_clock::now();
        if (cur.engine_restarts != prev.engine_restarts) {
          // A restarted engine process counts from zero again: no line across the restart.
          prev = cur;
          t_prev = now;
          continue;
        }
        const auto line = logger.log(prev, cur, std::chrono::duration<double>(now - t_prev).count());
        if (line.idle) spdlog::debug("{}", line.text);
        else spdlog::info("{}", line.text);
        if (!line.spec_decode.empty()) spdlog::info("{}", line.spec_decode);
        prev = cur;
        t_prev = now;
      }
    });
  }

  const int sig = signals.wait();
  spdlog::info("{} received: draining (at most {:.0f} s)", sig == SIGINT ? "SIGINT" : "SIGTERM", a.shutdown_timeout);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000));
  srv.stop_accepting();
  srv.begin_drain();
  srv.wait_idle(deadline);
  // What is still running gets a final error chunk ("server shutting down") from the engine.
  eng.shutdown(std::chrono::milliseconds(0));
  srv.wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(2));
  srv.stop();
  {
    std::lock_guard lock(stop_mu);
    stopping = true;
  }
  stop_cv.notify_all();
  if (stats_thread.joinable()) stats_thread.join();
  spdlog::info("Shutdown complete");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (vLLM's flags; no MODEL: a built-in demo model)");
  cmd->add_option("MODEL", a->model_positional, "model directory or Hugging Face id in the local cache");
  cmd->add_option("--model", a->model_flag, "the same as MODEL");
  cmd->add_option("--host", a->host, "address to listen on");
  cmd->add_option("--port", a->port, "port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", a->served_model_names, "model name(s) in the API (default: MODEL)");
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1 routes (or VLLM_API_KEY)");
  cmd->add_option("--generation-config", a->generation_config, "auto (the model's generation_config.json) or vllm");
  cmd->add_option("--chat-template", a->chat_template, "chat template file or text (default: the tokenizer's)");
  cmd->add_option("--default-chat-template-kwargs", a->default_chat_template_kwargs,
                  "JSON object of chat template variables, e.g. '{\"enable_thinking\": false}'");
  cmd->add_flag("--trust-request-chat-template", a->trust_request_chat_template,
                "render a request's own chat_template (compiled per request, sandboxed and bounded like the "
                "server's); without it such requests get 400");
  cmd->add_option("--tensor-parallel-size", a->tensor_parallel_size, "must be 1 (CPU backend)");
  cmd->add_option("--reasoning-parser", a->reasoning_parser, "qwen3: thinking goes to message.reasoning");
  cmd->add_flag("--enable-auto-tool-choice", a->enable_auto_tool_choice, "parse tool calls (with --tool-call-parser)");
  cmd->add_option("--tool-call-parser", a->tool_call_parser, "qwen3_coder");
  cmd->add_option("--health-stall-timeout", a->health_stall_timeout,
                  "/health answers 503 when work is pending and no token came out for this many seconds")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shutdown-timeout", a->shutdown_timeout, "seconds in-flight requests get to finish on SIGTERM")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting-requests", a->max_waiting_requests,
                  "queued requests beyond this get 503 with Retry-After")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-logprobs", a->max_logprobs, "most logprobs a request may ask for (-1: vocabulary)");
  cmd->add_flag("--disable-log-stats", a->disable_log_stats, "no periodic stats line");
  cmd->add_flag("--disable-log-requests", a->disable_log_requests, "no access log (the default)");
  cmd->add_flag("--enable-log-requests", a->enable_log_requests, "log every request");
  cmd->add_flag("--enable-prompt-tokens-details", a->enable_prompt_tokens_details, "usage.prompt_tokens_details");
  cmd->add_flag("--enable-force-include-usage", a->enable_force_include_usage, "usage on every stream");
  cmd->add_flag("--return-tokens-as-token-ids", a->return_tokens_as_token_ids, "logprob tokens as 'token_id:N'");
  cmd->add_flag("--enable-debug-endpoints", a->enable_debug_endpoints,
                "POST /debug/stall and /debug/corrupt-gdn (tests and the canary's fault injection)");
  cmd->add_option("--io-threads", a->io_threads, "HTTP threads (default: min(4, cores))");
  cmd->add_option("--max-connections", a->max_connections,
                  "open connections at most (uvicorn's --limit-concurrency; default: the descriptor limit "
                  "minus a reserve). Past it: idle connections are evicted, then 503 (/health still answers)");
  cmd->add_option("--timeout-keep-alive", a->timeout_keep_alive,
                  "seconds an idle keep-alive connection stays open (default: VLLM_HTTP_TIMEOUT_KEEP_ALIVE or 5)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--request-head-timeout", a->request_head_timeout,
                  "seconds from a request's first byte to the end of its headers, else 408 (slow clients)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-body-timeout", a->request_body_timeout,
                  "seconds from the end of a request's headers to the end of its body, else 408")
      ->check(CLI::PositiveNumber);
  add_transport_flags(*cmd, a->transport);
  add_engine_process_flags(*cmd, a->engine_process);
  add_media_flags(*cmd, a->media);
  add_engine_flags(*cmd, a->engine);
  add_gpu_flags(*cmd, a->gpu);
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace fp4serve::tools
