#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer_error.h"
#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {

std::optional<std::string> DecodeStream::step(std::int32_t id) {
  if (prefix_.empty() && !ids_.empty()) {
    std::string new_prefix = tokenizer_->decode(ids_, skip_special_tokens_);
    if (!utf8::ends_with_replacement(new_prefix)) {
      prefix_ = std::move(new_prefix);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() > prefix_.size() && !utf8::ends_with_replacement(text)) {
    if (text.compare(0, prefix_.size(), prefix_) != 0)
      throw TokenizerError("decode stream: invalid prefix at token " + std::to_string(id));
    std::string new_text = text.substr(prefix_.size());
    const std::size_t new_prefix_index = ids_.size() - prefix_index_;
    ids_.erase(ids_.begin(), ids_.begin() + std::ptrdiff_t(prefix_index_));
    prefix_ = tokenizer_->decode(ids_, skip_special_tokens_);
    prefix_index_ = new_prefix_index;
    return new_text;
  }
  return std::nullopt;
}

std::string DecodeStream::pending_text() const {
  const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || text.compare(0, prefix_.size(), prefix_) != 0) return {};
  return text.substr(prefix_.size());
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, DetokenizerOptions options,
                                               std::span<const std::int32_t> prompt_ids)
    : tokenizer_(&tokenizer),
      options_(options),
      stream_(tokenizer, options.skip_special_tokens),
      spaces_between_special_tokens_(options.skip_special_tokens || options.spaces_between_special_tokens) {
  // vLLM: prime with the shortest suffix of 4..23 prompt tokens that decodes without U+FFFD, else
  // with the whole prompt. (vLLM checks with tokenizers' Python decode, whose
  // skip_special_tokens defaults to true.)
  std::span<const std::int32_t> suffix = prompt_ids;
  if (prompt_ids.size() > 4) {
    for (std::size_t i = 4; i < std::min<std::size_t>(prompt_ids.size() + 1, 24); ++i) {
      const auto candidate = prompt_ids.subspan(prompt_ids.size() - i);
      if (tokenizer.decode(candidate, true).find("\xEF\xBF\xBD") == std::string::npos) {
        suffix = candidate;
        break;
      }
    }
  }
  for (const std::int32_t id : suffix) protected_step(id);
}

// vLLM's _protected_step: a decode that stops extending the previous one resets the stream.
std::optional<std::string> IncrementalDetokenizer::protected_step(std::int32_t id) {
  try {
    return stream_.step(id);
  } catch (const TokenizerError&) {
    stream_ = DecodeStream(*tokenizer_, options_.skip_special_tokens);
    return stream_.step(id);
  }
}

std::string IncrementalDetokenizer::step(std::int32_t id) {
  std::string text = protected_step(id).value_or(std::string());
  if (!spaces_between_special_tokens_) {
    // vLLM: consecutive added tokens are emitted as their raw content.
    const AddedToken* added = tokenizer_->added_tokens().find_by_id(id);
    if (added && last_special_) text = added->content;
    last_special_ = added != nullptr;
  }
  output_ += text;
  return text;
}

std::string IncrementalDetokenizer::flush() {
  std::string text = stream_.pending_text();
  stream_ = DecodeStream(*tokenizer_, options_.skip_special_tokens);
  output_ += text;
  return text;
}

}  // namespace fp4serve::tokenizer
