// What the engine hands back for a request, step by step: per sequence (n > 1 has several) the new
// tokens, the new text (detokenized on the engine thread, stop strings already applied), their
// logprobs when asked (and the prompt's, with the first token), and, at the end, why it finished.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/logprobs.h"

namespace fp4serve::engine {

// vLLM's stop_reason: the stop string that matched, the stop token id that ended the sequence
// (EOS included), or nothing (max_tokens, abort).
using StopReason = std::variant<std::monostate, std::string, std::int64_t>;

struct SequenceDelta {
  int index = 0;                          // which of the request's n sequences
  std::vector<std::int32_t> token_ids;    // tokens generated since the last delta
  std::string text;                       // text they complete (may be empty: held back bytes)
  std::vector<SampleLogprobs> logprobs;   // one per token, when the request asked for logprobs
  // With the sequence's first token, when the request asked for prompt_logprobs (every sequence
  // of an n > 1 request computes its own, as vLLM's child requests do).
  std::optional<PromptLogprobs> prompt_logprobs;
  // "stop", "length" or "abort" once this sequence is finished; empty while it runs.
  std::string finish_reason;
  StopReason stop_reason;
  bool finished() const { return !finish_reason.empty(); }
};

struct RequestOutput {
  std::string request_id;
  std::vector<SequenceDelta> deltas;  // only sequences that changed since the last output
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;          // prompt tokens restored from the prefix cache
  bool finished = false;              // every sequence finished: the last output of the request
  // Set when the engine ends the request for a reason of its own (shutdown drain, internal error):
  // the server sends it as the final error chunk / 500 body.
  std::optional<std::string> error;
  // The error is the shutdown drain ending the request (--shutdown-timeout passed), not a fault: the
  // server says so instead of "Internal server error".
  bool error_is_shutdown = false;
};

}  // namespace fp4serve::engine
