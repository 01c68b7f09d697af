// Unit tests of the tokenizer's parts: UTF-8 repair, NFC, the Oniguruma->PCRE2 translation and
// splitting, BPE merging, added-token matching rules, and load-time errors.
#include <gtest/gtest.h>


#include "tokenizer/byte_level.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_error.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, LossyRepairReplacesMaximalSubpartsLikeRust) {
  // Expected values from Python's bytes.decode("utf-8", "replace"), which follows the same
  // Unicode "maximal subpart" practice as Rust's String::from_utf8_lossy.
  EXPECT_EQ(utf8::to_valid_lossy("abc"), "abc");
  EXPECT_EQ(utf8::to_valid_lossy("\xff"), R);
  EXPECT_EQ(utf8::to_valid_lossy("\xe4\xb8"), R);                      // truncated 3-byte: one U+FFFD
  EXPECT_EQ(utf8::to_valid_lossy("\xe4\xb8\xadx\xe4"), "\xe4\xb8\xadx" + R);
  EXPECT_EQ(utf8::to_valid_lossy("\xc0\xaf"), R + R);                  // C0 is never valid
  EXPECT_EQ(utf8::to_valid_lossy("\xed\xa0\x80"), R + R + R);          // surrogate
  EXPECT_EQ(utf8::to_valid_lossy("\xf4\x90\x80\x80"), R + R + R + R);  // > U+10FFFF
  EXPECT_EQ(utf8::to_valid_lossy("\xf0\x9f\xa6"), R);
  EXPECT_EQ(utf8::to_valid_lossy("\xe0\x80\x80"), R + R + R);          // overlong
  EXPECT_EQ(utf8::to_valid_lossy("\xf0\x28\x8c\xbc"), R + "(" + R + R);
  EXPECT_EQ(utf8::to_valid_lossy("\xe2\x82\x28"), R + "(");
  EXPECT_TRUE(utf8::is_valid("\xf0\x9f\xa6\x99"));
  EXPECT_FALSE(utf8::is_valid("\xf0\x9f\xa6"));
  EXPECT_TRUE(utf8::ends_with_replacement("ab" + R));
}

TEST(Nfc, ComposesReordersAndLeavesStableTextAlone) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                       // e + U+0301 -> é
  EXPECT_EQ(nfc("e\xCC\xA3\xCC\x82"), "\xE1\xBB\x87");           // e + dot below + circumflex -> ệ
  EXPECT_EQ(nfc("e\xCC\x82\xCC\xA3"), "\xE1\xBB\x87");           // reordered by combining class
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> 각
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                    // Angstrom sign -> Å (singleton)
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");    // U+0958 is a composition exclusion
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");                // ﬁ: compatibility only, unchanged
  EXPECT_TRUE(nfc_quick_check("plain ASCII, 中文, 한국어"));
  EXPECT_FALSE(nfc_quick_check("e\xCC\x81"));
}

TEST(RegexSplitter, TranslatesOnigurumaClassesForPcre2) {
  const std::string p = translate_onig_pattern(R"([^\s\p{L}]+|\s+(?!\S)|\p{N})");
  EXPECT_EQ(p.find("\\s"), std::string::npos);
  EXPECT_EQ(p.find("\\S"), std::string::npos);
  EXPECT_NE(p.find("\\p{L}\\x{1c89}"), std::string::npos);  // letters of Unicode 15/16 appended
  EXPECT_EQ(translate_onig_pattern(R"(a\.b[\]x])"), R"(a\.b[\]x])");
}

TEST(RegexSplitter, IsolatedSplitKeepsGapsAndMatches) {
  RegexSplitter s(R"(\p{N})", "test");
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pieces;
  s.split("ab12c", pieces);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0], std::make_pair(0u, 2u));
  EXPECT_EQ(pieces[1], std::make_pair(2u, 3u));
  EXPECT_EQ(pieces[3], std::make_pair(4u, 5u));
}

TEST(RegexSplitter, BadPatternIsAClearError) {
  try {
    RegexSplitter s("(unclosed", "tokenizer.json pre_tokenizer");
    FAIL();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json pre_tokenizer"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos);
  }
}

// A tiny byte-level tokenizer.json with the Qwen3.5 regex, written to a temp file.
std::string tiny_tokenizer_json(const std::string& normalizer = R"({"type": "NFC"})",
                                const std::string& added = "[]", const std::string& merges = R"(["h e", "l l", "he ll", "hell o"])") {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    nlohmann::json key = byte_level::char_for_byte(static_cast<unsigned char>(b));
    vocab += key.dump() + ": " + std::to_string(b) + ",";
  }
  vocab += R"("he": 256, "ll": 257, "hell": 258, "hello": 259})";
  return R"({"version": "1.0", "added_tokens": )" + added + R"(, "normalizer": )" + normalizer +
         R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
             {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
         "post_processor": null, "decoder": {"type": "ByteLevel"},
         "model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": )" + merges + "}}";
}

std::unique_ptr<Tokenizer> load_tiny(const std::string& json_text) {
  TokenizerFiles files;
  files.tokenizer_json_path = "tiny/tokenizer.json";
  files.tokenizer_json = nlohmann::json::parse(json_text);
  return Tokenizer::from_files(files);
}

TEST(Bpe, MergesByRankAndAcceptsBothMergeForms) {
  auto tok = load_tiny(tiny_tokenizer_json());
  EXPECT_EQ(tok->encode("hello"), std::vector<std::int32_t>{259});
  EXPECT_EQ(tok->decode(tok->encode("hello hell")), "hello hell");
  auto tok2 = load_tiny(tiny_tokenizer_json(R"({"type": "NFC"})", "[]", R"([["h","e"],["l","l"],["he","ll"],["hell","o"]])"));
  EXPECT_EQ(tok2->encode("hello"), std::vector<std::int32_t>{259});
  // Without the "hell o" merge, "hello" stops at hell + o even though "hello" is in the vocab.
  auto tok3 = load_tiny(tiny_tokenizer_json(R"({"type": "NFC"})", "[]", R"(["h e", "l l", "he ll"])"));
  EXPECT_EQ(tok3->encode("hello"), (std::vector<std::int32_t>{258, 'o'}));
}

TEST(Bpe, LongWhitespaceRunsAndMegabyteWordsStayLinear) {
  auto tok = load_tiny(tiny_tokenizer_json());
  const std::string spaces(1 << 20, ' ');
  const auto ids = tok->encode("x" + spaces + "y");
  EXPECT_EQ(ids.size(), spaces.size() + 2);  // no merges for spaces in the tiny vocab
  const std::string letters(1 << 20, 'l');
  EXPECT_EQ(tok->encode(letters).size(), letters.size() / 2);  // "ll" merges pairwise
}

TEST(AddedTokens, LongestMatchFirstAndNormalizedFlag) {
  const std::string added = R"([
    {"id": 300, "content": "<|a|>", "special": true, "normalized": false},
    {"id": 301, "content": "<|a|>x", "special": false, "normalized": false},
    {"id": 302, "content": "é", "special": false, "normalized": true}])";
  auto tok = load_tiny(tiny_tokenizer_json(R"({"type": "NFC"})", added));
  EXPECT_EQ(tok->encode("<|a|>x"), std::vector<std::int32_t>{301});
  EXPECT_EQ(tok->encode("<|a|>y"), (std::vector<std::int32_t>{300, 'y'}));
  EXPECT_EQ(tok->encode("e\xCC\x81"), std::vector<std::int32_t>{302});  // matched after NFC
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{300, 259}, true), "hello");
}

TEST(AddedTokens, LstripRstripAndSingleWord) {
  const std::string added = R"([
    {"id": 300, "content": "<m>", "lstrip": true, "rstrip": true, "normalized": false, "special": true},
    {"id": 301, "content": "he", "single_word": true, "normalized": false, "special": false}])";
  auto tok = load_tiny(tiny_tokenizer_json("null", added));
  EXPECT_EQ(tok->encode("hello  <m>  hello"), (std::vector<std::int32_t>{259, 300, 259}));
  EXPECT_EQ(tok->encode("he")[0], 301);
  EXPECT_NE(tok->encode("hello")[0], 301);  // inside a word: not matched
}

TEST(Loader, RefusesWhatItDoesNotImplementWithTheFieldNamed) {
  auto expect_error = [](const std::string& json_text, const std::string& needle) {
    try {
      load_tiny(json_text);
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tiny/tokenizer.json"), std::string::npos) << e.what();
    }
  };
  expect_error(tiny_tokenizer_json(R"({"type": "Lowercase"})"), "Lowercase");
  expect_error(tiny_tokenizer_json(R"({"type": "NFC"})", "[]", R"(["h e", "x y z"])"), "x y z");
  expect_error(tiny_tokenizer_json(R"({"type": "NFC"})", "[]", R"(["h q"])"), "not in the vocab");
  try {
    Tokenizer::load("/nonexistent/tokenizer/dir");
    ADD_FAILURE();
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer/dir"), std::string::npos);
  }
}

}  // namespace
}  // namespace fp4serve::tokenizer
