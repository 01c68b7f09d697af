#pragma once
// Unicode Normalization Form C, with the Unicode tables of Hugging Face tokenizers (see
// tools/reference/gen_nfc_tables.py), so that "NFC" normalizers in tokenizer.json behave as in HF.
#include <string>
#include <string_view>

namespace fp4serve::tokenizer {

// True when nfc(s) == s is certain without doing the work: s contains no code point that can
// decompose, reorder or compose. Most text (ASCII, CJK, most scripts) takes only this check.
bool nfc_quick_check(std::string_view s);

// NFC of valid UTF-8 text.
std::string nfc(std::string_view s);

}  // namespace fp4serve::tokenizer
