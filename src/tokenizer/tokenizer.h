#pragma once
// The tokenizer facade: a byte-level BPE tokenizer driven entirely by a Hugging Face
// tokenizer.json (+ tokenizer_config.json), with the same ids as HF tokenizers / transformers.
//
// encode(): invalid UTF-8 in the input is first repaired the way Rust's String::from_utf8_lossy
// does (each maximal invalid subpart becomes U+FFFD). HF's Python API only accepts valid str, and
// the server receives text from JSON, so this only matters for raw byte inputs; it is the
// behaviour of the Rust `tokenizers` crate's callers and never throws.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/tokenizer_files.h"

namespace fp4serve::tokenizer {

class Tokenizer {
 public:
  // `path`: a directory with tokenizer.json[.gz] (and maybe tokenizer_config.json), or the file.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& path);
  static std::unique_ptr<Tokenizer> from_files(const TokenizerFiles& files);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // add_special_tokens only matters for post-processors that add tokens; Qwen's (ByteLevel)
  // adds none. Thread-safe.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // HF decode: unknown ids are dropped, special added tokens dropped when skip_special_tokens,
  // then the ByteLevel decoder turns the bytes into UTF-8 with U+FFFD for invalid sequences.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // Raw bytes of one token (before the UTF-8 repair); empty for unknown ids.
  const std::string& token_bytes(std::int32_t id) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;  // as HF: "Ġhello", "<|im_end|>"
  std::int32_t token_to_id(std::string_view token) const;         // -1 when absent
  std::size_t vocab_size() const { return vocab_size_; }          // with added tokens (HF)
  bool is_special(std::int32_t id) const;
  bool is_added(std::int32_t id) const { return added_.find_by_id(id) != nullptr; }
  const AddedVocabulary& added_tokens() const { return added_; }
  const std::string& source() const { return source_; }

 private:
  Tokenizer() = default;
  void encode_text(std::string_view text, std::vector<std::int32_t>& ids) const;
  void encode_normalized(std::string_view text, std::vector<std::int32_t>& ids) const;

  std::string source_;
  Normalizer normalizer_;
  std::vector<std::unique_ptr<RegexSplitter>> splitters_;  // applied in order (HF Sequence)
  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  bool byte_level_decoder_ = true;
  std::vector<std::string> id_bytes_;  // decoder output per id, before the UTF-8 repair
  std::vector<std::uint8_t> id_special_;
  std::size_t vocab_size_ = 0;
};

}  // namespace fp4serve::tokenizer
