#include "tools/bench/request_func.h"

#include <chrono>
#include <cstdlib>
#include <exception>

#include "tools/bench/sse_stream.h"

namespace fp4serve::tools::bench {

double perf_counter() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json build_payload(const RequestInput& in) {
  nlohmann::json p = nlohmann::json::object();
  p["model"] = in.model;
  if (in.kind == EndpointKind::kCompletions) {
    p["prompt"] = in.prompt;
    p["repetition_penalty"] = 1.0;
    p["max_tokens"] = in.output_len;
    p["logprobs"] = nullptr;
  } else {
    p["messages"] = nlohmann::json::array(
        {{{"role", "user"}, {"content", nlohmann::json::array({{{"type", "text"}, {"text", in.prompt}}})}}});
    p["max_completion_tokens"] = in.output_len;
  }
  p["stream"] = true;
  p["stream_options"] = {{"include_usage", true}};
  if (in.ignore_eos) p["ignore_eos"] = true;
  if (in.extra_body.is_object()) {
    for (const auto& [k, v] : in.extra_body.items()) p[k] = v;
  }
  return p;
}

namespace {

HeaderMap request_headers(const RequestInput& in) {
  HeaderMap h;
  if (const char* key = std::getenv("OPENAI_API_KEY"); key != nullptr && *key != '\0') {
    h["Authorization"] = std::string("Bearer ") + key;
  }
  for (const auto& [k, v] : in.extra_headers) h[k] = v;
  if (!in.request_id.empty()) h["x-request-id"] = in.request_id;
  return h;
}

// The text a token chunk carries: completions choices[0].text, chat choices[0].delta.content.
std::string chunk_text(const nlohmann::json& choice, EndpointKind kind) {
  const nlohmann::json* v = nullptr;
  if (kind == EndpointKind::kCompletions) {
    if (choice.contains("text")) v = &choice["text"];
  } else if (choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content")) {
    v = &choice["delta"]["content"];
  }
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

RequestOutput run_request(const BaseUrl& base, const RequestInput& in) {
  RequestOutput out;
  out.prompt_len = in.prompt_len;
  const std::string body = build_payload(in).dump();
  const HeaderMap headers = request_headers(in);

  bool first_chunk_received = false;
  SseMessageSplitter splitter;
  const double st = perf_counter();
  out.start_time = st;
  double most_recent = st;
  try {
    const HttpResponse r = http_post_stream(base, in.endpoint, body, headers, [&](std::string_view bytes) {
      for (const std::string& message : splitter.add(bytes)) {
        if (!message.empty() && message.front() == ':') continue;  // SSE comment / ping
        std::string_view chunk = message;
        if (chunk.rfind("data: ", 0) == 0) chunk.remove_prefix(6);
        if (chunk == "[DONE]") continue;
        const double timestamp = perf_counter();
        const nlohmann::json data = nlohmann::json::parse(chunk);
        const auto choices = data.find("choices");
        if (choices != data.end() && choices->is_array() && !choices->empty()) {
          if (!first_chunk_received) {
            first_chunk_received = true;
            out.ttft = timestamp - st;
          } else {
            out.itl.push_back(timestamp - most_recent);
          }
          most_recent = timestamp;
          out.generated_text += chunk_text((*choices)[0], in.kind);
        } else if (const auto usage = data.find("usage"); usage != data.end() && usage->is_object()) {
          // A missing or null count leaves 0, and calculate_metrics then counts the text.
          if (usage->contains("completion_tokens") && (*usage)["completion_tokens"].is_number_integer()) {
            out.output_tokens = (*usage)["completion_tokens"].get<int>();
          }
          if (usage->contains("prompt_tokens") && (*usage)["prompt_tokens"].is_number_integer()) {
            out.prompt_len = (*usage)["prompt_tokens"].get<int>();
          }
        }
      }
    });
    if (r.status == 200) {
      out.success = first_chunk_received;
      if (!first_chunk_received) {
        out.error = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!";
      }
      out.latency = most_recent - st;
    } else {
      out.success = false;
      out.error = r.reason.empty() ? ("HTTP " + std::to_string(r.status)) : r.reason;
    }
  } catch (const std::exception& e) {
    out.success = false;
    out.error = e.what();
  }
  return out;
}

}  // namespace fp4serve::tools::bench
