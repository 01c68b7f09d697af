// Splits a streamed response body into SSE messages exactly like vLLM's StreamedResponseHandler
// (vllm/benchmarks/lib/endpoint_request_func.py): messages end at "\n\n"; a trailing
// "data: ..." that is already "[DONE]" or complete JSON counts as a message too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::tools::bench {

class SseMessageSplitter {
 public:
  // Returns the complete messages (stripped of surrounding whitespace) found so far.
  std::vector<std::string> add(std::string_view bytes);

 private:
  std::string buffer_;
};

}  // namespace fp4serve::tools::bench
