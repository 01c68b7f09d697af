#pragma once
// The tokenizer.json "normalizer": what HF applies to text outside non-normalized added tokens.
// Supported: null, "NFC", and a "Sequence" of those; anything else is refused at load.
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace fp4serve::tokenizer {

class Normalizer {
 public:
  // `what` names the file in error messages.
  static Normalizer from_json(const nlohmann::json& spec, const std::string& what);

  bool is_identity() const { return !nfc_; }
  std::string normalize(std::string_view text) const;
  // True when normalize(text) == text is known without allocating.
  bool leaves_unchanged(std::string_view text) const;

 private:
  bool nfc_ = false;
};

}  // namespace fp4serve::tokenizer
