#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {

Tokenizer::~Tokenizer() = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool /*add_special_tokens*/) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (utf8::is_valid(text)) {
    encode_text(text, ids);
  } else {
    encode_text(utf8::to_valid_lossy(text), ids);
  }
  return ids;
}

// HF AddedVocabulary::extract_and_normalize + pre-tokenize + model, for valid UTF-8.
void Tokenizer::encode_text(std::string_view text, std::vector<std::int32_t>& ids) const {
  std::vector<AddedSplit> splits;
  added_.split_raw(text, splits);
  for (const AddedSplit& s : splits) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view piece = text.substr(s.begin, s.end - s.begin);
    if (piece.empty()) continue;
    if (normalizer_.leaves_unchanged(piece)) {
      encode_normalized(piece, ids);
    } else {
      encode_normalized(normalizer_.normalize(piece), ids);
    }
  }
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<std::int32_t>& ids) const {
  std::vector<AddedSplit> splits;
  added_.split_normalized(text, splits);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pieces, next;
  for (const AddedSplit& s : splits) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view part = text.substr(s.begin, s.end - s.begin);
    if (part.empty()) continue;
    pieces.clear();
    pieces.emplace_back(0, std::uint32_t(part.size()));
    for (const auto& splitter : splitters_) {
      next.clear();
      for (const auto& [b, e] : pieces) {
        const std::size_t first = next.size();
        splitter->split(part.substr(b, e - b), next);
        for (std::size_t i = first; i < next.size(); ++i) {
          next[i].first += b;
          next[i].second += b;
        }
      }
      pieces.swap(next);
    }
    for (const auto& [b, e] : pieces) model_->encode_word(part.substr(b, e - b), ids);
  }
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (const std::int32_t id : ids) {
    if (id < 0 || std::size_t(id) >= id_bytes_.size()) continue;
    if (id_bytes_[id].empty() && !is_added(id) && !model_->id_to_token(id)) continue;
    if (skip_special_tokens && id_special_[id]) continue;
    if (!byte_level_decoder_ && !first) bytes += ' ';  // HF without a decoder joins with spaces
    bytes += id_bytes_[id];
    first = false;
  }
  return utf8::to_valid_lossy(bytes);
}

const std::string& Tokenizer::token_bytes(std::int32_t id) const {
  static const std::string empty;
  if (id < 0 || std::size_t(id) >= id_bytes_.size()) return empty;
  return id_bytes_[id];
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (const AddedToken* t = added_.find_by_id(id)) return t->content;
  if (const std::string* t = model_->id_to_token(id)) return *t;
  return std::nullopt;
}

std::int32_t Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added_.find_by_content(token)) return t->id;
  return model_->token_to_id(token);
}

bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && std::size_t(id) < id_special_.size() && id_special_[id];
}

}  // namespace fp4serve::tokenizer
