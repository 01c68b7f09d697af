// libFuzzer target: one request body through every OpenAI endpoint that takes JSON
// (/v1/chat/completions, /v1/completions, /tokenize, /detokenize), each followed by what its route
// does next without a model: the chat template (the real Qwen3.6 one) rendered and tokenized with
// the real Qwen tokenizer, the length rules, the sampling parameters, and the error body written.
// The steps are those of src/server/routes/{chat_route,completion_route,info_routes}.cpp.
//
// Outcomes: success, or ApiException whose answer serialises to JSON. Anything else (another
// exception escaping, a crash, a sanitizer report, a leak, a hang) is a finding. With
// FP4SERVE_FUZZ_STRICT=1, the parsers' catch-all 400 for a JSON shape no check foresaw ("Invalid
// request body: ...") is a finding too: such answers say nothing useful to the client.
//
// The custom mutator edits the parsed JSON tree (json_mutator.h) with the request fields of vLLM's
// ChatCompletionRequest / CompletionRequest / Tokenize*Request / DetokenizeRequest.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fuzz_support.h"
#include "json_mutator.h"
#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "server/openai/prompt_length.h"
#include "server/openai/reasoning_parser.h"
#include "server/openai/response_common.h"
#include "server/openai/small_endpoints.h"
#include "server/routes/chat_prompt.h"
#include "tokenizer/utf8.h"

namespace {

using namespace fp4serve;
using server::openai::ApiException;

struct Fixture {
  server::ServingContext plain;   // content format "string", no default template kwargs
  server::ServingContext openai;  // content format "openai", --default-chat-template-kwargs
  bool strict = false;
};
Fixture* g_fixture = nullptr;

void configure(server::ServingContext& ctx, std::shared_ptr<const tokenizer::Tokenizer> tok,
               const std::string& chat_template, const std::filesystem::path& tokenizer_dir) {
  ctx.tokenizer = std::move(tok);
  ctx.chat_template = std::make_unique<ChatTemplate>(chat_template);
  // The special tokens the template sees, read as `serve` reads them.
  std::ifstream in(tokenizer_dir / "tokenizer_config.json");
  const auto cfg = nlohmann::ordered_json::parse(in, nullptr, false);
  for (const char* k : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!cfg.is_object() || !cfg.contains(k)) continue;
    const auto& v = cfg[k];
    if (v.is_string()) ctx.special_tokens[k] = v;
    else if (v.is_object() && v.contains("content")) ctx.special_tokens[k] = v["content"];
  }
  ctx.limits.served_model_names = {"qwen3.6", "fp4serve-demo"};
  ctx.limits.max_model_len = 8192;
  ctx.limits.sampling.vocab_size = 248320;  // the model's embedding rows (more than the tokenizer's ids)
  ctx.limits.enable_auto_tool_choice = true;
  // Qwen3.6's generation_config.json.
  ctx.defaults.temperature = 1.0;
  ctx.defaults.top_p = 0.95;
  ctx.defaults.top_k = 20;
  ctx.defaults.stop_token_ids = {248046, 248044};
  ctx.options.reasoning_parser = true;
  ctx.options.enable_auto_tool_choice = true;
}

void check_error(const ApiException& e, std::string_view endpoint, std::string_view input) {
  const server::openai::ApiError& err = e.error();
  if (err.status < 400 || err.status > 599) fuzz::finding(std::string(endpoint) + ": error status " + std::to_string(err.status), input);
  if (err.message.empty()) fuzz::finding(std::string(endpoint) + ": empty error message", input);
  const std::string body = err.body();  // what respond_error sends; throws on invalid UTF-8
  if (nlohmann::json::parse(body, nullptr, false).is_discarded()) fuzz::finding(std::string(endpoint) + ": error body is not JSON", input);
  if (g_fixture->strict && err.message.rfind("Invalid request body: ", 0) == 0)
    fuzz::finding(std::string(endpoint) + ": catch-all answer: " + err.message, input);
}

void run_endpoint(const char* endpoint, std::string_view input, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiException& e) {
    check_error(e, endpoint, input);
  } catch (const std::exception& e) {
    fuzz::finding(std::string(endpoint) + ": " + typeid(e).name() + " escaped: " + e.what(), input);
  }
}

// chat_route.cpp handle_chat, up to the engine submission.
void chat(const server::ServingContext& ctx, std::string_view body) {
  namespace oa = server::openai;
  const oa::ChatRequest req = oa::parse_chat_request(body, ctx.limits, ctx.options.chat);
  (void)oa::ignored_fields_warning(req.ignored_fields);
  const int64_t max_len = ctx.limits.max_model_len;
  oa::check_max_output_tokens(req.max_output_tokens(), req.max_tokens_param(), max_len);
  const std::string prompt = server::render_chat_prompt(ctx, req.messages, req.tools, req.add_generation_prompt,
                                                        req.continue_final_message, req.chat_template_kwargs);
  if (!tokenizer::utf8::is_valid(prompt)) fuzz::finding("chat: the rendered prompt is not valid UTF-8", body);
  std::vector<int32_t> ids = ctx.tokenizer->encode(prompt, req.common.add_special_tokens);
  oa::apply_prompt_length_rules(ids, req.max_output_tokens(), max_len, req.common.truncate_prompt_tokens,
                                req.common.truncation_side);
  oa::check_prompt_token_ids(ids, ctx.limits.sampling.vocab_size);
  const int64_t max_tokens =
      oa::resolve_max_tokens(max_len, req.requested_max_tokens(), static_cast<int64_t>(ids.size()), ctx.defaults.max_tokens);
  if (static_cast<int64_t>(ids.size()) + max_tokens > max_len)
    fuzz::finding("chat: max_tokens " + std::to_string(max_tokens) + " for a prompt of " + std::to_string(ids.size()), body);
  engine::SamplingParams params = oa::to_sampling_params(req, max_tokens, ctx.defaults, ctx.limits);
  oa::resolve_bad_words(params, *ctx.tokenizer);
  (void)oa::prompt_ends_reasoning(prompt);
  (void)req.echo_prefix();
}

// completion_route.cpp handle_completion, up to the engine submission.
void completion(const server::ServingContext& ctx, std::string_view body) {
  namespace oa = server::openai;
  const oa::CompletionRequest req = oa::parse_completion_request(body, ctx.limits);
  (void)oa::ignored_fields_warning(req.ignored_fields);
  const int64_t max_len = ctx.limits.max_model_len;
  oa::check_max_output_tokens(req.max_tokens, "max_tokens", max_len);
  if (req.prompts.empty()) fuzz::finding("completion: accepted without a prompt", body);
  for (const oa::CompletionPrompt& p : req.prompts) {
    std::vector<int32_t> ids = p.text ? ctx.tokenizer->encode(*p.text, req.common.add_special_tokens) : p.token_ids;
    oa::apply_prompt_length_rules(ids, req.max_tokens, max_len, req.common.truncate_prompt_tokens,
                                  req.common.truncation_side);
    oa::check_prompt_token_ids(ids, ctx.limits.sampling.vocab_size);
    const int64_t max_tokens =
        oa::resolve_max_tokens(max_len, req.max_tokens, static_cast<int64_t>(ids.size()), ctx.defaults.max_tokens);
    engine::SamplingParams params = oa::to_sampling_params(req, max_tokens, ctx.defaults, ctx.limits);
    oa::resolve_bad_words(params, *ctx.tokenizer);
    const std::string text = p.text ? *p.text : ctx.tokenizer->decode(ids);
    if (!tokenizer::utf8::is_valid(text)) fuzz::finding("completion: prompt text is not valid UTF-8", body);
  }
}

// info_routes.cpp handle_tokenize.
void tokenize(const server::ServingContext& ctx, std::string_view body) {
  namespace oa = server::openai;
  const oa::TokenizeRequest req = oa::parse_tokenize_request(body, ctx.limits, ctx.options.chat);
  std::vector<int32_t> ids;
  if (req.chat) {
    const std::string prompt = server::render_chat_prompt(ctx, req.messages, req.tools, req.add_generation_prompt,
                                                          req.continue_final_message, req.chat_template_kwargs);
    ids = ctx.tokenizer->encode(prompt, req.add_special_tokens);
  } else {
    ids = ctx.tokenizer->encode(req.prompt, req.add_special_tokens);
  }
  std::optional<std::vector<std::string>> strs;
  if (req.return_token_strs) {
    strs.emplace();
    for (int32_t id : ids) strs->push_back(ctx.tokenizer->id_to_token(id).value_or(""));
  }
  (void)oa::dump_json(oa::tokenize_response_json(ids, ctx.limits.max_model_len, strs));
}

// info_routes.cpp handle_detokenize.
void detokenize(const server::ServingContext& ctx, std::string_view body) {
  namespace oa = server::openai;
  const oa::DetokenizeRequest req = oa::parse_detokenize_request(body, ctx.limits);
  oa::check_prompt_token_ids(req.tokens, ctx.limits.sampling.vocab_size);
  (void)oa::dump_json(oa::detokenize_response_json(ctx.tokenizer->decode(req.tokens)));
}

const fuzz::JsonVocabulary& vocabulary() {
  static const fuzz::JsonVocabulary v = [] {
    fuzz::JsonVocabulary voc;
    // ChatCompletionRequest / CompletionRequest / Tokenize*Request / DetokenizeRequest fields
    // [vllm: entrypoints/openai/chat_completion/protocol.py, completion/protocol.py,
    // entrypoints/serve/tokenize/protocol.py], each with a value of its usual type.
    voc.top_level_fields = {
        {"model", R"("qwen3.6")"},
        {"messages", R"([{"role": "user", "content": "Hi"}])"},
        {"prompt", R"("Hello")"},
        {"tokens", R"([9707, 11, 1879])"},
        {"max_tokens", "16"},
        {"max_completion_tokens", "32"},
        {"temperature", "0.7"},
        {"top_p", "0.9"},
        {"top_k", "20"},
        {"min_p", "0.05"},
        {"n", "2"},
        {"best_of", "2"},
        {"seed", "42"},
        {"stop", R"(["\n", "</s>"])"},
        {"stop_token_ids", "[248046]"},
        {"stream", "true"},
        {"stream_options", R"({"include_usage": true, "continuous_usage_stats": true})"},
        {"logprobs", "true"},
        {"top_logprobs", "5"},
        {"prompt_logprobs", "1"},
        {"logprob_token_ids", "[1, 2]"},
        {"echo", "true"},
        {"suffix", R"("x")"},
        {"presence_penalty", "0.5"},
        {"frequency_penalty", "-0.5"},
        {"repetition_penalty", "1.1"},
        {"length_penalty", "1.0"},
        {"logit_bias", R"({"100": 5, "200": -100})"},
        {"allowed_token_ids", "[1, 2, 3]"},
        {"bad_words", R"(["bad"])"},
        {"min_tokens", "4"},
        {"ignore_eos", "true"},
        {"skip_special_tokens", "false"},
        {"spaces_between_special_tokens", "false"},
        {"include_stop_str_in_output", "true"},
        {"truncate_prompt_tokens", "-1"},
        {"truncation_side", R"("left")"},
        {"add_special_tokens", "true"},
        {"add_generation_prompt", "false"},
        {"continue_final_message", "true"},
        {"tools", R"([{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])"},
        {"tool_choice", R"("auto")"},
        {"parallel_tool_calls", "false"},
        {"response_format", R"({"type": "json_object"})"},
        {"structured_outputs", R"({"choice": ["a", "b"]})"},
        {"guided_json", R"({"type": "object"})"},
        {"chat_template", R"("{{ messages }}")"},
        {"chat_template_kwargs", R"({"enable_thinking": false, "preserve_thinking": true})"},
        {"documents", R"([{"title": "t", "text": "x"}])"},
        {"mm_processor_kwargs", R"({"a": 1})"},
        {"media_io_kwargs", R"({"a": 1})"},
        {"reasoning_effort", R"("low")"},
        {"include_reasoning", "false"},
        {"return_tokens_as_token_ids", "true"},
        {"return_token_ids", "true"},
        {"return_token_strs", "true"},
        {"return_prompt_text", "true"},
        {"priority", "1"},
        {"request_id", R"("req-1")"},
        {"user", R"("u")"},
        {"cache_salt", R"("salt")"},
        {"kv_transfer_params", R"({"do_remote_decode": true})"},
        {"vllm_xargs", R"({"k": "v"})"},
        {"use_beam_search", "true"},
        {"stream_interval", "2"},
        {"thinking_token_budget", "100"},
        {"prompt_embeds", R"("AAAA")"},
        {"metadata", R"({"k": "v"})"},
        {"store", "true"},
        {"service_tier", R"("auto")"},
        {"modalities", R"(["text"])"},
        {"audio", R"({"voice": "x"})"},
        {"prediction", R"({"type": "content", "content": "x"})"},
        {"web_search_options", "{}"},
        {"functions", "[]"},
        {"function_call", R"("auto")"},
    };
    voc.nested_fields = {
        {"role", R"("assistant")"},
        {"content", R"("text")"},
        {"name", R"("fn")"},
        {"tool_calls", R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}])"},
        {"tool_call_id", R"("call_1")"},
        {"reasoning", R"("thinking...")"},
        {"reasoning_content", R"("thinking...")"},
        {"refusal", R"("no")"},
        {"type", R"("text")"},
        {"text", R"("hello")"},
        {"image_url", R"({"url": "http://x/y.png"})"},
        {"input_audio", R"({"data": "AA", "format": "wav"})"},
        {"function", R"({"name": "get_weather", "arguments": {"city": "Paris"}})"},
        {"arguments", R"("{\"a\": 1}")"},
        {"parameters", R"({"type": "object", "properties": {}})"},
        {"description", R"("d")"},
        {"strict", "true"},
        {"properties", R"({"x": {"type": "integer"}})"},
        {"required", R"(["x"])"},
        {"include_usage", "false"},
        {"continuous_usage_stats", "true"},
        {"enable_thinking", "true"},
        {"preserve_thinking", "true"},
        {"json_schema", R"({"name": "s", "schema": {}})"},
        {"id", R"("call_1")"},
        {"url", R"("http://x")"},
    };
    voc.strings = {"qwen3.6", "fp4serve-demo", "get_weather", "call_1"};
    return voc;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto tok = fuzz::load_tokenizer_or_skip("openai_request_fuzz");
  const std::string tpl = fuzz::load_chat_template_or_skip("openai_request_fuzz");
  const auto dir = fuzz::data_path("FP4SERVE_FUZZ_TOKENIZER_DIR", FP4SERVE_FUZZ_TOKENIZER_DIR);
  g_fixture = new Fixture;
  configure(g_fixture->plain, tok, tpl, dir);
  configure(g_fixture->openai, tok, tpl, dir);
  g_fixture->openai.options.chat.content_format = server::openai::ContentFormat::kOpenAI;
  g_fixture->openai.options.chat.default_chat_template_kwargs = {{"enable_thinking", false}};
  const char* strict = std::getenv("FP4SERVE_FUZZ_STRICT");
  g_fixture->strict = strict && std::strcmp(strict, "0") != 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // Both content formats get exercised: which one is a function of the input.
  const server::ServingContext& ctx = (std::hash<std::string_view>{}(body) & 1) ? g_fixture->openai : g_fixture->plain;
  run_endpoint("chat", body, [&] { chat(ctx, body); });
  run_endpoint("completion", body, [&] { completion(ctx, body); });
  run_endpoint("tokenize", body, [&] { tokenize(ctx, body); });
  run_endpoint("detokenize", body, [&] { detokenize(ctx, body); });
  return 0;
}

FP4SERVE_FUZZ_JSON_MUTATOR(vocabulary())
