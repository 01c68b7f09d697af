// The OpenAI protocol layer in one include, and the order a route handler uses it in (the order
// vLLM's serving code checks things, so the first fault reported is the one vLLM reports):
//
//  /v1/completions
//    1. req = parse_completion_request(body_text, limits)          400 / 404 (ApiException)
//       log ignored_fields_warning(req.ignored_fields) if not empty
//    2. check_max_output_tokens(req.max_output_tokens(), "max_tokens", max_model_len)
//    3. per prompt: ids = text ? tokenizer.encode(text, req.common.add_special_tokens) : token_ids
//       apply_prompt_length_rules(ids, req.max_output_tokens(), max_model_len,
//                                 req.common.truncate_prompt_tokens, req.common.truncation_side)
//       max_tokens = resolve_max_tokens(max_model_len, req.max_tokens, ids.size(), defaults.max_tokens)
//       params = to_sampling_params(req, max_tokens, defaults, limits)
//       check_prompt_token_ids(ids, vocab_size)   (the engine's admission check)
//    4. stream ? CompletionStream : build_completion_response(...)
//       detokenize with req.common.skip_special_tokens / spaces_between_special_tokens.
//
//  /v1/chat/completions
//    1. req = parse_chat_request(body_text, limits, options)
//    2. check_max_output_tokens(req.max_output_tokens(), req.max_tokens_param(), max_model_len)
//    3. ctx = make_chat_template_context(req.messages, req.tools, req.add_generation_prompt,
//                                        special_tokens, req.chat_template_kwargs); render
//       (continue_final_message: cut the render after the final message's content, as
//       transformers does); ids = encode(prompt, req.common.add_special_tokens)
//       apply_prompt_length_rules(ids, req.max_output_tokens(), max_model_len, ...)
//       max_tokens = resolve_max_tokens(max_model_len, req.requested_max_tokens(), ids.size(),
//                                       defaults.max_tokens)
//       params = to_sampling_params(req, max_tokens, defaults, limits)
//    4. stream ? ChatStream (start() on the first engine output, on_delta() per sequence delta
//       with the parsers' split, finish()) : build_chat_response(...)
//
//  Any ApiException -> HTTP error.status with error.body(); after a stream started -> the
//  stream's fail(error) text.
#pragma once

#include "server/openai/chat_request.h"
#include "server/openai/chat_response.h"
#include "server/openai/completion_request.h"
#include "server/openai/completion_response.h"
#include "server/openai/logprobs_format.h"
#include "server/openai/openai_error.h"
#include "server/openai/prompt_length.h"
#include "server/openai/response_common.h"
#include "server/openai/small_endpoints.h"
