#pragma once
// Incremental detokenization for streaming, as vLLM's FastIncrementalDetokenizer does it on top of
// HF tokenizers' DecodeStream: text is released only when the decode of the pending ids does not
// end in U+FFFD, so a code point split across tokens is never emitted half-done.
//
// The pieces returned by step() followed by flush() concatenate to
// tokenizer.decode(all generated ids, skip_special_tokens). vLLM never calls the equivalent of
// flush(): bytes of an unfinished character at the end of a generation are dropped there.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fp4serve::tokenizer {

struct DetokenizerOptions {
  bool skip_special_tokens = true;             // OpenAI / vLLM default
  bool spaces_between_special_tokens = true;   // vLLM default; only matters when not skipping
};

// HF tokenizers' DecodeStream (tokenizer/mod.rs step_decode_stream), step for step.
class DecodeStream {
 public:
  DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}
  // New text completed by this id, or nullopt when nothing is complete yet. Throws
  // TokenizerError when the new decode does not extend the previous one (HF's InvalidPrefix).
  std::optional<std::string> step(std::int32_t id);
  // Text of the ids still held back (with U+FFFD for unfinished characters).
  std::string pending_text() const;

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::int32_t> ids_;
  std::string prefix_;
  std::size_t prefix_index_ = 0;
};

class IncrementalDetokenizer {
 public:
  // prompt_ids prime the stream as vLLM does (a short prompt suffix that decodes cleanly), so that
  // the first generated token is decoded in context. Nothing is emitted for them.
  IncrementalDetokenizer(const Tokenizer& tokenizer, DetokenizerOptions options,
                         std::span<const std::int32_t> prompt_ids = {});

  // Text to append to the output after this generated token (often empty).
  std::string step(std::int32_t id);
  // Whatever is still held back, for a caller that wants decode() exactness at the end.
  std::string flush();
  const std::string& output_text() const { return output_; }

 private:
  std::optional<std::string> protected_step(std::int32_t id);

  const Tokenizer* tokenizer_;
  DetokenizerOptions options_;
  DecodeStream stream_;
  bool spaces_between_special_tokens_;
  bool last_special_ = false;
  std::string output_;
};

}  // namespace fp4serve::tokenizer
