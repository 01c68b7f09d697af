#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_error.h"
#include "tokenizer/unicode_nfc.h"

namespace fp4serve::tokenizer {
namespace {

void add_spec(const nlohmann::json& spec, bool& nfc, const std::string& what) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "NFC") {
    nfc = true;
  } else if (type == "Sequence") {
    for (const auto& inner : spec.at("normalizers")) add_spec(inner, nfc, what);
  } else {
    throw TokenizerError(what + ": normalizer type '" + type + "' is not supported (only NFC and Sequence)");
  }
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& spec, const std::string& what) {
  Normalizer n;
  add_spec(spec, n.nfc_, what);
  return n;
}

std::string Normalizer::normalize(std::string_view text) const {
  return nfc_ ? nfc(text) : std::string(text);
}

bool Normalizer::leaves_unchanged(std::string_view text) const { return !nfc_ || nfc_quick_check(text); }

}  // namespace fp4serve::tokenizer
