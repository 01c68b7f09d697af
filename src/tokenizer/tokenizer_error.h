#pragma once
#include <stdexcept>
#include <string>

namespace fp4serve::tokenizer {

// Every tokenizer failure (bad tokenizer.json, unreadable file, regex that PCRE2 rejects, ...).
// The message names the file or field at fault.
class TokenizerError : public std::runtime_error {
 public:
  explicit TokenizerError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace fp4serve::tokenizer
