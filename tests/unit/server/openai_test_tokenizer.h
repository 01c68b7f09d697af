// A tiny byte-level BPE tokenizer for the response tests: ids 0-255 are the bytes, 256 "he",
// 257 "ll", 258 "hell", 259 "hello", 300 the special token <|im_end|>.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace fp4serve::server::openai::testing {

inline const tokenizer::Tokenizer& tiny_tokenizer() {
  static std::unique_ptr<tokenizer::Tokenizer> tok = [] {
    std::string vocab = "{";
    for (int b = 0; b < 256; ++b) {
      nlohmann::json key = tokenizer::byte_level::char_for_byte(static_cast<unsigned char>(b));
      vocab += key.dump() + ": " + std::to_string(b) + ",";
    }
    vocab += R"("he": 256, "ll": 257, "hell": 258, "hello": 259})";
    const std::string text =
        R"({"version": "1.0", "added_tokens": [{"id": 300, "content": "<|im_end|>", "single_word": false,
           "lstrip": false, "rstrip": false, "normalized": false, "special": true}], "normalizer": null,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
           "post_processor": null, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": ["h e", "l l", "he ll", "hell o"]}})";
    tokenizer::TokenizerFiles files;
    files.tokenizer_json_path = "tiny/tokenizer.json";
    files.tokenizer_json = nlohmann::json::parse(text);
    return tokenizer::Tokenizer::from_files(files);
  }();
  return *tok;
}

}  // namespace fp4serve::server::openai::testing
