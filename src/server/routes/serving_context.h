// Everything a route handler needs, built once at start-up by `serve` and shared read-only by all
// io threads (the engine is thread-safe through its public API; the chat template renders
// concurrently; the tokenizer encodes concurrently).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_client.h"
#include "server/metrics/engine_metrics_exposition.h"
#include "server/openai/chat_request.h"
#include "server/openai/request_common.h"
#include "server/routes/chat_images.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::server {

struct ServingOptions {
  std::string model_root;              // the model path, /v1/models "root"
  bool reasoning_parser = false;       // --reasoning-parser qwen3
  bool enable_auto_tool_choice = false;  // with --tool-call-parser qwen3_coder
  openai::ChatParseOptions chat;
  std::chrono::milliseconds health_stall_timeout{std::chrono::seconds(60)};
  bool enable_prompt_tokens_details = false;
  bool enable_force_include_usage = false;
  bool return_tokens_as_token_ids = false;
  bool emit_reasoning_content = true;  // also send "reasoning_content" for pre-0.11 clients
  bool debug_endpoints = false;        // /debug/stall, /debug/corrupt-gdn (tests, the canary's proof)
  ImageServing images;                 // image_url parts: limits, sources, the image processor
  std::string version;
};

struct ServingContext {
  engine::EngineClient* engine = nullptr;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;  // null: chat requests are refused (no template)
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // bos/eos/pad... for the template
  openai::ServerLimits limits;
  openai::DefaultSamplingParams defaults;
  ServingOptions options;
  metrics::ExpositionConfig exposition;
  std::int64_t created_unix = 0;
};

}  // namespace fp4serve::server
