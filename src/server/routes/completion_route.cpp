// POST /v1/completions: parse -> tokenize each prompt -> length rules -> one engine request per
// prompt -> stream SSE chunks or answer once every prompt finished.
#include <mutex>

#include <spdlog/spdlog.h>

#include "server/openai/completion_request.h"
#include "server/openai/completion_response.h"
#include "server/openai/prompt_length.h"
#include "server/routes/route_support.h"
#include "server/routes/routes.h"
#include "engine/block_hash.h"

namespace fp4serve::server {
namespace {

using openai::ApiError;
using openai::ApiException;

struct CompletionJob {
  const ServingContext* ctx = nullptr;
  std::shared_ptr<http::Exchange> ex;
  openai::CompletionRequest req;
  openai::ResponseContext rctx;
  std::vector<std::string> prompt_texts;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> engine_ids;
  std::vector<std::shared_ptr<engine::OutputChannel>> channels;
  std::unique_ptr<openai::CompletionStream> stream;
  std::vector<openai::CompletionPromptResult> results;
  std::mutex mu;  // the engine thread (notifier) and the io thread (submission) both pump
  size_t num_finished = 0;
  bool done = false;

  void abort_all() {
    for (const auto& id : engine_ids) ctx->engine->abort(id);
  }

  // Drains every channel submitted so far; answers when all prompts are finished. Under mu.
  void pump_locked() {
    for (size_t i = 0; i < channels.size() && !done; ++i) {
      for (engine::RequestOutput& out : channels[i]->drain()) {
        if (done) break;
        if (out.error) {
          fail(engine_output_error(out));
          return;
        }
        if (stream) {
          const std::string text = stream->on_output(i, prompt_texts[i], prompt_ids[i], out);
          if (!text.empty() && !ex->write(text)) {
            done = true;  // the client is gone; on_close aborts
            return;
          }
          if (stream->done()) {  // a generation error turned into the error event
            done = true;
            ex->finish();
            abort_all();
            return;
          }
        } else {
          accumulate(i, out);
        }
        if (out.finished && ++num_finished == channels.size() && channels.size() == engine_ids.size()) complete();
      }
    }
  }

  void accumulate(size_t i, engine::RequestOutput& out) {
    openai::CompletionPromptResult& r = results[i];
    r.num_cached_tokens = out.num_cached_tokens;
    for (engine::SequenceDelta& d : out.deltas) {
      openai::CompletionSequence& s = r.sequences.at(static_cast<size_t>(d.index));
      s.text += d.text;
      append_delta(s, d);
    }
  }

  void complete() {
    done = true;
    if (stream) {
      ex->finish(stream->finish());
      return;
    }
    try {
      respond_json(ex, 200, openai::dump_json(openai::build_completion_response(req, results, rctx)));
    } catch (const ApiException& e) {
      respond_error(ex, e.error());
    }
  }

  void fail(const ApiError& err) {
    done = true;
    abort_all();
    if (stream) ex->finish(stream->fail(err));
    else respond_error(ex, err);
  }
};

void handle_completion(const ServingContext& ctx, std::shared_ptr<http::Exchange> ex) {
  auto job = std::make_shared<CompletionJob>();
  job->ctx = &ctx;
  job->ex = ex;
  const int64_t max_len = ctx.limits.max_model_len;
  std::vector<engine::EngineRequest> requests;
  try {
    job->req = openai::parse_completion_request(std::string_view(ex->request().body), ctx.limits);
    for (const auto& f : job->req.ignored_fields) spdlog::warn("The following fields were present in the request but ignored: {{'{}'}}", f);
    openai::check_max_output_tokens(job->req.max_tokens, "max_tokens", max_len);
    job->rctx = make_response_context(ctx, *ex, "cmpl-", job->req.common.request_id, job->req.model_name);
    for (size_t i = 0; i < job->req.prompts.size(); ++i) {
      const openai::CompletionPrompt& p = job->req.prompts[i];
      std::vector<int32_t> ids = p.text ? ctx.tokenizer->encode(*p.text, job->req.common.add_special_tokens) : p.token_ids;
      openai::apply_prompt_length_rules(ids, job->req.max_tokens, max_len, job->req.common.truncate_prompt_tokens,
                                        job->req.common.truncation_side);
      openai::check_prompt_token_ids(ids, ctx.limits.sampling.vocab_size);
      const int64_t max_tokens = openai::resolve_max_tokens(max_len, job->req.max_tokens,
                                                            static_cast<int64_t>(ids.size()), ctx.defaults.max_tokens);
      engine::EngineRequest r;
      r.id = job->rctx.id + "-" + std::to_string(i);
      r.params = openai::to_sampling_params(job->req, max_tokens, ctx.defaults, ctx.limits);
      openai::resolve_bad_words(r.params, *ctx.tokenizer);
      openai::resolve_reasoning_markers(r.params, *ctx.tokenizer);
      r.prompt_token_ids = ids;
      r.detokenize.skip_special_tokens = job->req.common.skip_special_tokens;
      r.detokenize.spaces_between_special_tokens = job->req.common.spaces_between_special_tokens;
      if (job->req.common.cache_salt) r.cache_salt_hash = engine::cache_salt_key(*job->req.common.cache_salt);
      job->prompt_texts.push_back(p.text ? *p.text : ctx.tokenizer->decode(ids));
      job->prompt_ids.push_back(std::move(ids));
      openai::CompletionPromptResult res;
      res.prompt_text = job->prompt_texts.back();
      res.prompt_token_ids = job->prompt_ids.back();
      res.sequences.resize(static_cast<size_t>(std::max<int64_t>(1, r.params.n)));
      job->results.push_back(std::move(res));
      requests.push_back(std::move(r));
    }
  } catch (const ApiException& e) {
    respond_error(ex, e.error());
    return;
  }
  if (job->req.common.stream) {
    job->stream = std::make_unique<openai::CompletionStream>(job->req, job->rctx);
  }
  std::weak_ptr<CompletionJob> weak = job;
  std::lock_guard lock(job->mu);  // the notifiers wait until every prompt is submitted
  for (engine::EngineRequest& r : requests) {
    r.notifier = [weak] {
      if (auto j = weak.lock()) {
        std::lock_guard l(j->mu);
        j->pump_locked();
      }
    };
    const std::string id = r.id;
    try {
      job->channels.push_back(ctx.engine->submit(std::move(r)));
      job->engine_ids.push_back(id);
    } catch (const engine::EngineRejected& e) {
      job->done = true;
      job->abort_all();
      respond_engine_rejection(ex, e);
      return;
    }
  }
  if (job->stream) ex->start_stream();
  // The job lives as long as the exchange holds its callbacks (until the response completes).
  ex->on_close([job](http::CloseReason) {
    std::lock_guard l(job->mu);
    if (!job->done) {
      job->done = true;
      job->abort_all();
    }
  });
  ex->on_drain([] {});
  job->pump_locked();
}

}  // namespace

void register_completion_route(http::Router& router, const ServingContext& context) {
  router.post("/v1/completions", [&context](std::shared_ptr<http::Exchange> ex) { handle_completion(context, ex); });
}

}  // namespace fp4serve::server
