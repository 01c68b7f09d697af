// POST /v1/chat/completions: parse -> render the chat template -> tokenize -> length rules ->
// engine -> reasoning / tool-call parsing of the output -> SSE chunks or one response.
#include <mutex>

#include <spdlog/spdlog.h>

#include "server/openai/chat_request.h"
#include "server/openai/chat_response.h"
#include "server/openai/prompt_length.h"
#include "server/openai/tool_parser_chat_output.h"
#include "server/routes/chat_images.h"
#include "server/routes/chat_prompt.h"
#include "server/routes/route_support.h"
#include "server/routes/routes.h"
#include "engine/block_hash.h"

namespace fp4serve::server {
namespace {

using openai::ApiError;
using openai::ApiException;

struct ChatJob {
  const ServingContext* ctx = nullptr;
  std::shared_ptr<http::Exchange> ex;
  openai::ChatRequest req;
  openai::ResponseContext rctx;
  openai::ChatOutputOptions parse_options;
  bool reasoning_parser = false;
  std::string engine_id;
  std::shared_ptr<engine::OutputChannel> channel;
  std::unique_ptr<openai::ChatStream> stream;
  std::vector<std::unique_ptr<openai::ChatOutputStreamParser>> parsers;  // per sequence, streaming
  openai::ChatResult result;
  std::vector<std::string> texts;  // per sequence, non-streaming
  std::mutex mu;
  bool done = false;

  void pump_locked() {
    if (!channel) return;
    for (engine::RequestOutput& out : channel->drain()) {
      if (done) return;
      if (out.error) {
        fail(engine_output_error(out));
        return;
      }
      if (stream) stream_output(out);
      else accumulate(out);
      if (done) return;
      if (out.finished) complete();
    }
  }

  void stream_output(const engine::RequestOutput& out) {
    std::string events;
    if (!stream->started()) events += stream->start(static_cast<int64_t>(result.prompt_token_ids.size()), out.num_cached_tokens);
    for (const engine::SequenceDelta& d : out.deltas) {
      auto& parser = *parsers.at(static_cast<size_t>(d.index));
      openai::ChatOutputDelta parsed = parser.feed(d.text);
      if (d.finished()) {
        openai::ChatOutputDelta tail = parser.finish();
        parsed.reasoning += tail.reasoning;
        parsed.content += tail.content;
        parsed.tool_calls.insert(parsed.tool_calls.end(), tail.tool_calls.begin(), tail.tool_calls.end());
      }
      openai::ChatDeltaParts parts;
      if (!parsed.reasoning.empty()) parts.reasoning = parsed.reasoning;
      if (!parsed.content.empty()) parts.content = parsed.content;
      parts.tool_calls = std::move(parsed.tool_calls);
      // Without parsers every token's text is content, even "" (vLLM sends the chunk).
      if (!reasoning_parser && !parser.parses_content() && !parts.content) parts.content = d.text;
      events += stream->on_delta(d, parts);
      if (stream->done()) break;
    }
    if (!events.empty() && !ex->write(events)) {
      done = true;
      return;
    }
    if (stream->done()) {
      done = true;
      ex->finish();
      ctx->engine->abort(engine_id);
    }
  }

  void accumulate(engine::RequestOutput& out) {
    result.num_cached_tokens = out.num_cached_tokens;
    for (engine::SequenceDelta& d : out.deltas) {
      const auto i = static_cast<size_t>(d.index);
      openai::ChatSequence& s = result.sequences.at(i);
      texts.at(i) += d.text;
      append_delta(s, d);
    }
  }

  void complete() {
    done = true;
    if (stream) {
      ex->finish(stream->finish());
      return;
    }
    for (size_t i = 0; i < texts.size(); ++i) {
      const openai::ChatOutput parsed = openai::parse_chat_output(texts[i], parse_options);
      openai::ChatMessageParts& m = result.sequences[i].message;
      m.reasoning = parsed.reasoning;
      m.content = parsed.content;
      m.tool_calls = parsed.tool_calls;
      if (!reasoning_parser && !parse_options.tool_parser && !parse_options.forced_tools()) m.content = texts[i];
    }
    try {
      respond_json(ex, 200, openai::dump_json(openai::build_chat_response(req, result, rctx, reasoning_parser)));
    } catch (const ApiException& e) {
      respond_error(ex, e.error());
    }
  }

  void fail(const ApiError& err) {
    done = true;
    if (!engine_id.empty()) ctx->engine->abort(engine_id);
    if (stream) {
      if (!stream->started()) stream->start(static_cast<int64_t>(result.prompt_token_ids.size()), 0);
      ex->finish(stream->fail(err));
    } else {
      respond_error(ex, err);
    }
  }
};

bool thinking_enabled(const nlohmann::ordered_json& kwargs) {
  if (!kwargs.is_object() || !kwargs.contains("enable_thinking")) return true;
  const auto& v = kwargs["enable_thinking"];
  return !(v.is_boolean() && !v.get<bool>()) && !v.is_null();
}

void handle_chat(const ServingContext& ctx, std::shared_ptr<http::Exchange> ex) {
  auto job = std::make_shared<ChatJob>();
  job->ctx = &ctx;
  job->ex = ex;
  const int64_t max_len = ctx.limits.max_model_len;
  engine::EngineRequest r;
  try {
    job->req = openai::parse_chat_request(std::string_view(ex->request().body), ctx.limits, ctx.options.chat);
    for (const auto& f : job->req.ignored_fields)
      spdlog::warn("The following fields were present in the request but ignored: {{'{}'}}", f);
    openai::check_max_output_tokens(job->req.max_output_tokens(), job->req.max_tokens_param(), max_len);
    // Images are fetched (bounded by VLLM_IMAGE_FETCH_TIMEOUT), decoded and preprocessed here, on
    // the io thread, before the prompt is rendered.
    const PreparedImages images = prepare_chat_images(job->req.images, ctx.options.images);
    const std::string prompt = render_chat_prompt(ctx, job->req.messages, job->req.tools, job->req.add_generation_prompt,
                                                  job->req.continue_final_message, job->req.chat_template_kwargs,
                                                  job->req.chat_template);
    std::vector<int32_t> ids = ctx.tokenizer->encode(prompt, job->req.common.add_special_tokens);
    expand_image_pads(ids, images, ctx.options.images);  // image tokens count in the length rules
    openai::apply_prompt_length_rules(ids, job->req.max_output_tokens(), max_len, job->req.common.truncate_prompt_tokens,
                                      job->req.common.truncation_side);
    r.images = locate_image_runs(ids, images, ctx.options.images);
    openai::check_prompt_token_ids(ids, ctx.limits.sampling.vocab_size);
    const int64_t max_tokens = openai::resolve_max_tokens(max_len, job->req.requested_max_tokens(),
                                                          static_cast<int64_t>(ids.size()), ctx.defaults.max_tokens);
    r.params = openai::to_sampling_params(job->req, max_tokens, ctx.defaults, ctx.limits);
    openai::resolve_bad_words(r.params, *ctx.tokenizer);
    // vLLM's resolve_reasoning_ended: with include_reasoning false the constraint applies from the
    // first token; otherwise, with a reasoning parser, after the reasoning ends.
    openai::resolve_reasoning_markers(r.params, *ctx.tokenizer,
                                      ctx.options.reasoning_parser && job->req.include_reasoning);
    job->rctx = make_response_context(ctx, *ex, "chatcmpl-", job->req.common.request_id, job->req.model_name);
    job->reasoning_parser = ctx.options.reasoning_parser;
    job->parse_options.reasoning_parser = ctx.options.reasoning_parser;
    job->parse_options.reasoning.thinking_enabled = thinking_enabled(job->req.chat_template_kwargs);
    job->parse_options.reasoning.prompt_ends_reasoning = openai::prompt_ends_reasoning(prompt);
    job->parse_options.tool_parser = ctx.options.enable_auto_tool_choice && job->req.auto_tools();
    job->parse_options.tools = job->req.tools;
    if (job->req.tool_choice == openai::ToolChoice::kRequired || job->req.tool_choice == openai::ToolChoice::kNamed) {
      job->parse_options.forced = job->req.tool_choice;
      job->parse_options.forced_function = job->req.tool_choice_function;
    }
    r.id = job->rctx.id;
    r.prompt_token_ids = ids;
    r.detokenize.skip_special_tokens = job->req.common.skip_special_tokens;
    r.detokenize.spaces_between_special_tokens = job->req.common.spaces_between_special_tokens;
    if (job->req.common.cache_salt) r.cache_salt_hash = engine::cache_salt_key(*job->req.common.cache_salt);
    job->result.prompt_token_ids = std::move(ids);
    const size_t n = static_cast<size_t>(std::max<int64_t>(1, r.params.n));
    job->result.sequences.resize(n);
    job->texts.resize(n);
    if (job->req.common.stream) {
      job->stream = std::make_unique<openai::ChatStream>(job->req, job->rctx, job->reasoning_parser);
      for (size_t i = 0; i < n; ++i)
        job->parsers.push_back(std::make_unique<openai::ChatOutputStreamParser>(job->parse_options));
    }
  } catch (const ApiException& e) {
    respond_error(ex, e.error());
    return;
  }
  std::weak_ptr<ChatJob> weak = job;
  r.notifier = [weak] {
    if (auto j = weak.lock()) {
      std::lock_guard l(j->mu);
      j->pump_locked();
    }
  };
  std::lock_guard lock(job->mu);
  job->engine_id = r.id;
  try {
    job->channel = ctx.engine->submit(std::move(r));
  } catch (const engine::EngineRejected& e) {
    job->done = true;
    respond_engine_rejection(ex, e);
    return;
  }
  if (job->stream) ex->start_stream();
  ex->on_close([job](http::CloseReason) {
    std::lock_guard l(job->mu);
    if (!job->done) {
      job->done = true;
      job->ctx->engine->abort(job->engine_id);
    }
  });
  ex->on_drain([] {});
  job->pump_locked();
}

}  // namespace

void register_chat_route(http::Router& router, const ServingContext& context) {
  router.post("/v1/chat/completions", [&context](std::shared_ptr<http::Exchange> ex) { handle_chat(context, ex); });
}

}  // namespace fp4serve::server
