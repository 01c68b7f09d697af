// Incremental detokenization: HF DecodeStream parity (goldens), UTF-8 safety with multi-byte
// tokens split across steps, skip_special_tokens and spaces_between_special_tokens as in vLLM.
#include <gtest/gtest.h>

#include "tokenizer/detokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace fp4serve::tokenizer {
namespace {

using testing::data_dir;
using testing::ids_of;
using testing::installed;
using testing::read_json_lines;

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(DecodeStream, MatchesHfDecodeStreamStepForStep) {
  for (const std::string name : {"qwen3.5", "qwen3"}) {
    const Tokenizer* tok = installed(name);
    ASSERT_NE(tok, nullptr);
    const auto lines = read_json_lines(data_dir() / ("goldens_" + name + ".jsonl.gz"));
    std::size_t streams = 0;
    for (const auto& rec : lines) {
      for (const auto& [key, skip] : {std::pair{"stream", false}, std::pair{"stream_skip", true}}) {
        if (!rec.contains(key)) continue;
        const auto ids = ids_of(rec["ids"]);
        DecodeStream stream(*tok, skip);
        const auto& expected = rec[key];
        ASSERT_EQ(expected.size(), ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
          const auto got = stream.step(ids[i]);
          if (expected[i].is_null()) {
            EXPECT_FALSE(got.has_value()) << name << " step " << i << " of " << nlohmann::json(ids).dump();
          } else {
            EXPECT_EQ(got.value_or("<none>"), expected[i].get<std::string>())
                << name << " step " << i << " of " << nlohmann::json(ids).dump();
          }
        }
        ++streams;
      }
    }
    EXPECT_GE(streams, 200u) << name;
  }
}

TEST(IncrementalDetokenizer, PiecesConcatenateToFullDecodeOnTheWholeCorpus) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const auto corpus = read_json_lines(data_dir() / "corpus.jsonl");
  for (const bool skip : {false, true}) {
    for (const auto& row : corpus) {
      const auto ids = tok->encode(row["text"].get<std::string>());
      IncrementalDetokenizer detok(*tok, DetokenizerOptions{skip, true});
      std::string joined;
      for (const auto id : ids) {
        const std::string piece = detok.step(id);
        ASSERT_TRUE(utf8::is_valid(piece));
        joined += piece;
      }
      joined += detok.flush();
      ASSERT_EQ(joined, tok->decode(ids, skip)) << row["text"].dump();
    }
  }
}

// Feeds the byte tokens of text one byte at a time: nothing may be emitted mid-character.
TEST(IncrementalDetokenizer, MultiByteCharactersSplitAcrossStepsNeverEmitReplacement) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const std::string text = "中文 日本語 한국어 🦙👨‍👩‍👧‍👦 ✅ नमस्ते e\xCC\x81";
  std::vector<std::int32_t> byte_ids;
  // The GPT-2 byte tokens are ids 0..255 in byte-map order; look each byte up by its token string.
  for (const char c : text) {
    std::int32_t found = -1;
    for (std::int32_t id = 0; id < 256 && found < 0; ++id)
      if (tok->token_bytes(id) == std::string(1, c)) found = id;
    ASSERT_GE(found, 0);
    byte_ids.push_back(found);
  }
  IncrementalDetokenizer detok(*tok, DetokenizerOptions{true, true});
  std::string joined;
  std::size_t empty_steps = 0;
  for (const auto id : byte_ids) {
    const std::string piece = detok.step(id);
    EXPECT_EQ(piece.find(kReplacement), std::string::npos) << "emitted a replacement character";
    EXPECT_TRUE(utf8::is_valid(piece));
    empty_steps += piece.empty();
    joined += piece;
  }
  EXPECT_GT(empty_steps, 10u);  // held back while characters were incomplete
  EXPECT_EQ(joined, text);
  EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, RealTokensOfCjkAndEmojiSplitAcrossSteps) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  for (const std::string text : {"🦙🦙 llama", "😶‍🌫️", "我想在apple工作", "🏳️‍🌈 flag", "ก้ ข้ ค้"}) {
    const auto ids = tok->encode(text);
    IncrementalDetokenizer detok(*tok, {});
    std::string joined;
    for (const auto id : ids) {
      const std::string piece = detok.step(id);
      EXPECT_EQ(piece.find(kReplacement), std::string::npos) << text;
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(IncrementalDetokenizer, UnfinishedCharacterAtTheEndIsHeldUntilFlush) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  auto ids = tok->encode("ok ");
  std::int32_t e4 = -1;  // the byte token for 0xE4 (first byte of many CJK characters)
  for (std::int32_t id = 0; id < 256; ++id)
    if (tok->token_bytes(id) == "\xE4") e4 = id;
  ASSERT_GE(e4, 0);
  IncrementalDetokenizer detok(*tok, {});
  std::string joined;
  for (const auto id : ids) joined += detok.step(id);
  EXPECT_EQ(detok.step(e4), "");
  EXPECT_EQ(joined, "ok ");
  EXPECT_EQ(detok.flush(), kReplacement);  // what decode() gives for the lone byte
}

TEST(IncrementalDetokenizer, SkipSpecialTokensAndSpacesBetweenSpecialTokens) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const auto ids = tok->encode("<think>\nplan\n</think>\n\nHi<|im_end|><|endoftext|>");
  auto run = [&](DetokenizerOptions opt) {
    IncrementalDetokenizer detok(*tok, opt);
    for (const auto id : ids) detok.step(id);
    return detok.output_text();
  };
  // <think> is an added but non-special token: kept even when skipping special tokens.
  EXPECT_EQ(run({true, true}), "<think>\nplan\n</think>\n\nHi");
  EXPECT_EQ(run({false, true}), "<think>\nplan\n</think>\n\nHi<|im_end|><|endoftext|>");
  // vLLM's fast detokenizer emits consecutive added tokens raw; byte-level decode adds no spaces.
  EXPECT_EQ(run({false, false}), "<think>\nplan\n</think>\n\nHi<|im_end|><|endoftext|>");
}

TEST(IncrementalDetokenizer, PromptPrimingCompletesACharacterStartedInThePrompt) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  // A prompt ending in the first two bytes of 中 (E4 B8 AD); the generated token is AD.
  std::int32_t b[3] = {-1, -1, -1};
  const std::string zh = "\xE4\xB8\xAD";
  for (std::int32_t id = 0; id < 256; ++id)
    for (int k = 0; k < 3; ++k)
      if (tok->token_bytes(id) == zh.substr(k, 1)) b[k] = id;
  auto prompt = tok->encode("Say it in Chinese: ");
  prompt.push_back(b[0]);
  prompt.push_back(b[1]);
  IncrementalDetokenizer detok(*tok, {}, prompt);
  EXPECT_EQ(detok.output_text(), "");
  EXPECT_EQ(detok.step(b[2]), zh);
}

}  // namespace
}  // namespace fp4serve::tokenizer
