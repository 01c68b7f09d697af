// llama.cpp's tokenizer fixtures (../shared/data/qwen35): inputs and expected ids.
//
// ggml-vocab-qwen2 is the Qwen2/Qwen3 vocabulary: it must match our Qwen3 tokenizer as installed.
// ggml-vocab-qwen35 is NOT the Qwen3.5 vocabulary: its ids are the Qwen2 ones ("Hello" = 9707; the
// Qwen3.5 vocab has 9419) with the Qwen3.5 pre-tokenizer regex, and it expects no NFC ("e\u0301"
// stays two tokens), because llama.cpp does not normalize. It is checked against the Qwen3
// tokenizer.json with the Qwen3.5 regex and without the normalizer, which reproduces it exactly
// (verified with HF tokenizers too).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer_test_support.h"

namespace fp4serve::tokenizer {
namespace {

struct FixtureCase {
  std::string input;
  std::vector<std::int32_t> ids;
};

std::vector<FixtureCase> read_fixture(const std::string& name) {
  const auto dir = testing::shared_dir() / "data" / "qwen35";
  const std::string inp = read_maybe_gzipped(dir / (name + ".inp"));
  const std::string out = read_maybe_gzipped(dir / (name + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<FixtureCase> cases;
  for (std::size_t pos = 0; pos < inp.size();) {
    std::size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (std::int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

void expect_fixture(const Tokenizer& tok, const std::string& name) {
  const auto cases = read_fixture(name);
  ASSERT_GE(cases.size(), 40u) << name;
  for (const auto& c : cases) EXPECT_EQ(tok.encode(c.input, false), c.ids) << name << ": " << nlohmann::json(c.input).dump();
}

TEST(LlamaCppFixtures, Qwen2FixtureWithTheQwen3Tokenizer) {
  const Tokenizer* tok = testing::installed("qwen3");
  ASSERT_NE(tok, nullptr);
  expect_fixture(*tok, "ggml-vocab-qwen2.gguf");
}

TEST(LlamaCppFixtures, Qwen35FixtureIsQwen2VocabWithQwen35RegexAndNoNfc) {
  ASSERT_NE(testing::installed("qwen3"), nullptr);
  TokenizerFiles files = read_tokenizer_files(testing::cache_dir("qwen3"));
  const auto q35 = read_tokenizer_files(testing::cache_dir("qwen3.5"));
  files.tokenizer_json["pre_tokenizer"] = q35.tokenizer_json["pre_tokenizer"];
  files.tokenizer_json["normalizer"] = nullptr;
  const auto tok = Tokenizer::from_files(files);
  expect_fixture(*tok, "ggml-vocab-qwen35.gguf");
  // With NFC (the real tokenizers) the decomposed cases differ, as HF's do.
  const auto real_q3 = testing::installed("qwen3");
  EXPECT_NE(real_q3->encode("e\xCC\x81"), tok->encode("e\xCC\x81"));
}

}  // namespace
}  // namespace fp4serve::tokenizer
