// A sequence resumed after its engine process died: what the client has already been sent. The
// engine takes it as a preempted sequence arriving fresh (vLLM's recompute preemption): the
// original prompt plus these tokens as outputs, nothing computed, everything recomputed (penalties,
// max_tokens/min_tokens, stop strings, the detokenizer, the grammar's matcher), and only what comes
// after `text_bytes` of its text is sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fp4serve::engine {

struct ResumedSequence {
  int index = 0;                            // which of the request's n sequences
  std::vector<std::int32_t> token_ids;      // every output token already sent
  std::size_t text_bytes = 0;               // bytes of output text already sent
  bool finished = false;                    // its final delta was sent: it is not run again
};

}  // namespace fp4serve::engine
