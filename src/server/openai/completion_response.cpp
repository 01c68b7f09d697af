#include "server/openai/completion_response.h"

#include "server/openai/logprobs_format.h"

namespace fp4serve::server::openai {

namespace {

bool as_token_ids(const CompletionRequest& request, const ResponseContext& context) {
  return request.common.return_tokens_as_token_ids.value_or(context.return_tokens_as_token_ids);
}

Json token_id_list(const std::vector<int32_t>& ids) {
  Json out = Json::array();
  for (int32_t id : ids) out.push_back(id);
  return out;
}

}  // namespace

Json build_completion_response(const CompletionRequest& request,
                               const std::vector<CompletionPromptResult>& results,
                               const ResponseContext& context) {
  Json choices = Json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::optional<int64_t> cached;
  for (const auto& result : results) {
    for (const auto& seq : result.sequences) {
      if (is_generation_error(seq.finish_reason)) throw ApiException(internal_server_error());
      std::string text = seq.text;
      std::vector<int32_t> ids = seq.token_ids;
      // One entry per id of `ids`: the echoed prompt's logprobs (None first), then the output's.
      std::vector<const engine::SampleLogprobs*> lps;
      if (request.common.echo) {
        // vLLM quirk kept: with return_token_ids the echoed prompt text is "".
        const std::string prompt_text = request.common.return_token_ids ? "" : result.prompt_text;
        if (seq.prompt_logprobs) append_logprob_refs(lps, *seq.prompt_logprobs);
        if (request.max_tokens == 0) {
          text = prompt_text;
          ids = result.prompt_token_ids;
        } else {
          text = prompt_text + seq.text;
          ids.insert(ids.begin(), result.prompt_token_ids.begin(), result.prompt_token_ids.end());
          append_logprob_refs(lps, seq.logprobs);
        }
      } else {
        append_logprob_refs(lps, seq.logprobs);
      }
      Json choice = Json::object();
      choice["index"] = choices.size();
      choice["text"] = text;
      if (request.logprobs && context.tokenizer) {
        choice["logprobs"] = completion_logprobs_json(*context.tokenizer, ids, lps, *request.logprobs, 0,
                                                      as_token_ids(request, context));
      } else {
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = seq.finish_reason.empty() ? Json() : Json(seq.finish_reason);
      choice["stop_reason"] = stop_reason_json(seq.stop_reason);
      choice["token_ids"] = request.common.return_token_ids ? token_id_list(seq.token_ids) : Json();
      choice["prompt_logprobs"] = seq.prompt_logprobs && context.tokenizer
                                      ? prompt_logprobs_json(*context.tokenizer, *seq.prompt_logprobs)
                                      : Json();
      choice["prompt_token_ids"] = request.common.return_token_ids ? token_id_list(result.prompt_token_ids) : Json();
      choices.push_back(std::move(choice));
      completion_tokens += static_cast<int64_t>(seq.token_ids.size());
    }
    prompt_tokens += static_cast<int64_t>(result.prompt_token_ids.size());
    cached = result.num_cached_tokens;
  }
  Json out = Json::object();
  out["id"] = context.id;
  out["object"] = "text_completion";
  out["created"] = context.created;
  out["model"] = context.model;
  out["choices"] = std::move(choices);
  out["service_tier"] = nullptr;
  out["system_fingerprint"] = context.system_fingerprint ? Json(*context.system_fingerprint) : Json();
  out["usage"] = usage_json(prompt_tokens, completion_tokens, true,
                            context.enable_prompt_tokens_details ? cached : std::nullopt);
  out["kv_transfer_params"] = nullptr;
  return out;
}

CompletionStream::CompletionStream(const CompletionRequest& request, ResponseContext context)
    : request_(request), context_(std::move(context)) {
  n_ = static_cast<std::size_t>(request.common.n);
  const std::size_t slots = n_ * std::max<std::size_t>(1, request.prompts.size());
  text_lens_.assign(slots, 0);
  num_tokens_.assign(slots, 0);
  echoed_.assign(slots, false);
  prompt_tokens_.assign(std::max<std::size_t>(1, request.prompts.size()), 0);
  std::tie(include_usage_, continuous_usage_) =
      should_include_usage(request.common.stream ? request.common.stream_options : std::nullopt,
                           context_.force_include_usage);
}

std::string CompletionStream::on_output(std::size_t prompt_index, const std::string& prompt_text,
                                        const std::vector<int32_t>& prompt_token_ids,
                                        const engine::RequestOutput& output) {
  if (done_) return "";
  std::string events;
  if (!num_cached_tokens_) num_cached_tokens_ = output.num_prompt_tokens > 0 ? output.num_cached_tokens : 0;
  if (prompt_index < prompt_tokens_.size()) prompt_tokens_[prompt_index] = static_cast<int64_t>(prompt_token_ids.size());
  for (const auto& delta : output.deltas) {
    const std::size_t i = static_cast<std::size_t>(delta.index) + prompt_index * n_;
    if (i >= echoed_.size()) continue;
    if (is_generation_error(delta.finish_reason)) return fail(internal_server_error());
    std::string text;
    std::vector<int32_t> ids;
    std::vector<const engine::SampleLogprobs*> lps;
    Json prompt_ids_to_return;  // null
    if (request_.common.echo && !echoed_[i]) {
      prompt_ids_to_return = token_id_list(prompt_token_ids);
      const std::string ptext = request_.common.return_token_ids ? "" : prompt_text;
      // The first delta carries the prompt's logprobs (echo with logprobs asks for them).
      if (delta.prompt_logprobs) append_logprob_refs(lps, *delta.prompt_logprobs);
      if (request_.max_tokens == 0) {
        text = ptext;
        ids = prompt_token_ids;
      } else {
        text = ptext + delta.text;
        ids = prompt_token_ids;
        ids.insert(ids.end(), delta.token_ids.begin(), delta.token_ids.end());
        append_logprob_refs(lps, delta.logprobs);
      }
      echoed_[i] = true;
    } else {
      text = delta.text;
      ids = delta.token_ids;
      append_logprob_refs(lps, delta.logprobs);
      // has_echoed doubles as "prompt ids already returned", as in vLLM.
      if (!echoed_[i] && request_.common.return_token_ids) {
        prompt_ids_to_return = token_id_list(prompt_token_ids);
        echoed_[i] = true;
      }
      if (text.empty() && ids.empty() && num_tokens_[i] == 0) continue;  // chunked prefill
    }
    Json choice = Json::object();
    choice["index"] = i;
    choice["text"] = text;
    if (request_.logprobs && context_.tokenizer) {
      choice["logprobs"] = completion_logprobs_json(*context_.tokenizer, ids, lps, *request_.logprobs, text_lens_[i],
                                                    as_token_ids(request_, context_));
    } else {
      choice["logprobs"] = nullptr;
    }
    text_lens_[i] += text_offset_length(text);
    num_tokens_[i] += static_cast<int64_t>(delta.token_ids.size());
    choice["finish_reason"] = delta.finished() ? Json(delta.finish_reason) : Json();
    choice["stop_reason"] = stop_reason_json(delta.stop_reason);
    if (request_.common.return_token_ids) {
      choice["prompt_token_ids"] = prompt_ids_to_return;
      choice["token_ids"] = token_id_list(delta.token_ids);
    }
    Json chunk = Json::object();
    chunk["id"] = context_.id;
    chunk["object"] = "text_completion";
    chunk["created"] = context_.created;
    chunk["model"] = context_.model;
    chunk["choices"] = Json::array({std::move(choice)});
    if (continuous_usage_) {
      const int64_t p = prompt_index < prompt_tokens_.size() ? prompt_tokens_[prompt_index] : 0;
      chunk["usage"] = usage_json(p, num_tokens_[i], false, std::nullopt);
    }
    if (!include_usage_ && context_.system_fingerprint && delta.finished()) {
      chunk["system_fingerprint"] = *context_.system_fingerprint;
    }
    events += sse_event(chunk);
  }
  return events;
}

std::string CompletionStream::finish() {
  if (done_) return "";
  done_ = true;
  std::string events;
  if (include_usage_) {
    int64_t prompt = 0, completion = 0;
    for (int64_t p : prompt_tokens_) prompt += p;
    for (int64_t c : num_tokens_) completion += c;
    Json chunk = Json::object();
    chunk["id"] = context_.id;
    chunk["object"] = "text_completion";
    chunk["created"] = context_.created;
    chunk["model"] = context_.model;
    chunk["choices"] = Json::array();
    const bool details = context_.enable_prompt_tokens_details && num_cached_tokens_.has_value();
    chunk["usage"] = usage_json(prompt, completion, details, num_cached_tokens_);
    if (context_.system_fingerprint) chunk["system_fingerprint"] = *context_.system_fingerprint;
    events += sse_event(chunk);
  }
  return events + kSseDone;
}

std::string CompletionStream::fail(const ApiError& error) {
  if (done_) return "";
  done_ = true;
  return sse_event(error) + kSseDone;
}

}  // namespace fp4serve::server::openai
