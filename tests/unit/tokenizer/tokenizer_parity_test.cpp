// Parity with Hugging Face tokenizers on the committed corpus (tests/data/tokenizer), for the
// Qwen3.5/3.6 and the Qwen3 tokenizer. Goldens: tools/reference/make_tokenizer_goldens.py.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace fp4serve::tokenizer {
namespace {

using testing::data_dir;
using testing::ids_of;
using testing::installed;
using testing::read_json_lines;

struct Goldens {
  std::vector<nlohmann::json> corpus;  // {"cat", "text"}
  std::vector<nlohmann::json> lines;   // header, records...
};

const Goldens& goldens(const std::string& name) {
  static std::map<std::string, Goldens> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Goldens g;
  g.corpus = read_json_lines(data_dir() / "corpus.jsonl");
  g.lines = read_json_lines(data_dir() / ("goldens_" + name + ".jsonl.gz"));
  return cache.emplace(name, std::move(g)).first->second;
}

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, HeaderMatchesCorpusAndVocab) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  const Goldens& g = goldens(GetParam());
  ASSERT_FALSE(g.lines.empty());
  EXPECT_EQ(g.lines[0]["count"].get<std::size_t>(), g.corpus.size()) << "goldens are stale: rerun make_tokenizer_goldens.py";
  EXPECT_GE(g.corpus.size(), 2000u);
  EXPECT_EQ(tok->vocab_size(), g.lines[0]["vocab_size"].get<std::size_t>());
}

TEST_P(TokenizerParity, EncodeEqualsHfOnEveryCorpusString) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  const Goldens& g = goldens(GetParam());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < g.corpus.size(); ++i) {
    const std::string text = g.corpus[i]["text"];
    const auto expected = ids_of(g.lines[i + 1]["ids"]);
    const auto got = tok->encode(text);
    if (got != expected && ++mismatches <= 10) {
      ADD_FAILURE() << GetParam() << " corpus line " << i + 1 << " (" << g.corpus[i]["cat"] << "): "
                    << nlohmann::json(text).dump() << "\n  expected " << nlohmann::json(expected).dump()
                    << "\n  got      " << nlohmann::json(got).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << g.corpus.size() << " strings";
}

TEST_P(TokenizerParity, DecodeEqualsHfOnEveryCorpusString) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  const Goldens& g = goldens(GetParam());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < g.corpus.size(); ++i) {
    const auto& rec = g.lines[i + 1];
    const auto ids = ids_of(rec["ids"]);
    const std::string dec = rec.contains("dec") ? rec["dec"].get<std::string>() : g.corpus[i]["text"].get<std::string>();
    const std::string dec_skip = rec.contains("dec_skip") ? rec["dec_skip"].get<std::string>() : dec;
    if (tok->decode(ids, false) != dec && ++mismatches <= 10) ADD_FAILURE() << "decode, corpus line " << i + 1;
    if (tok->decode(ids, true) != dec_skip && ++mismatches <= 10)
      ADD_FAILURE() << "decode(skip_special_tokens), corpus line " << i + 1;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST_P(TokenizerParity, OneMegabyteMixedTextInOneEncode) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  const Goldens& g = goldens(GetParam());
  const std::string text = read_maybe_gzipped(data_dir() / "mixed_1mb.txt.gz");
  ASSERT_GE(text.size(), 1'000'000u);
  for (const auto& rec : g.lines) {
    if (!rec.contains("mixed_1mb_ids")) continue;
    const auto expected = ids_of(rec["mixed_1mb_ids"]);
    const auto got = tok->encode(text);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_TRUE(got == expected);
    EXPECT_EQ(tok->decode(got), tok->decode(expected));
    return;
  }
  FAIL() << "goldens lack mixed_1mb_ids";
}

TEST_P(TokenizerParity, InvalidUtf8IsRepairedLikeFromUtf8Lossy) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  std::size_t n = 0;
  for (const auto& rec : goldens(GetParam()).lines) {
    if (!rec.contains("bytes_hex")) continue;
    const std::string hex = rec["bytes_hex"];
    std::string bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
    EXPECT_EQ(tok->encode(bytes), ids_of(rec["ids"])) << "bytes " << hex;
    ++n;
  }
  EXPECT_GE(n, 10u);
}

TEST_P(TokenizerParity, DecodeOfRandomIdSequencesEqualsHf) {
  const Tokenizer* tok = installed(GetParam());
  ASSERT_NE(tok, nullptr);
  std::size_t n = 0;
  for (const auto& rec : goldens(GetParam()).lines) {
    if (!rec.contains("decode_ids")) continue;
    const auto ids = ids_of(rec["decode_ids"]);
    EXPECT_EQ(tok->decode(ids, false), rec["dec"].get<std::string>()) << nlohmann::json(ids).dump();
    EXPECT_EQ(tok->decode(ids, true), rec["dec_skip"].get<std::string>()) << nlohmann::json(ids).dump();
    ++n;
  }
  EXPECT_GE(n, 100u);
}

INSTANTIATE_TEST_SUITE_P(Qwen, TokenizerParity, ::testing::Values("qwen3.5", "qwen3"),
                         [](const auto& info) { return info.param == "qwen3.5" ? std::string("Qwen35") : std::string("Qwen3"); });

TEST(TokenizerQwen35, KnownIdsAndSizes) {
  const Tokenizer* tok = installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 248077u);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 248046);
  EXPECT_EQ(tok->token_to_id("<|endoftext|>"), 248044);
  EXPECT_EQ(tok->token_to_id("<|audio_pad|>"), 248076);  // from tokenizer_config.json only
  EXPECT_EQ(tok->token_to_id("Ġderrota"), 200380);
  EXPECT_EQ(tok->id_to_token(248069).value_or(""), "</think>");
  EXPECT_TRUE(tok->is_special(248046));
  EXPECT_FALSE(tok->is_special(248068));  // <think> is added but not special
  EXPECT_EQ(tok->encode("<think>hi</think>"), (std::vector<std::int32_t>{248068, 5834, 248069}));
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{248068, 5834, 248069, 248046}, true), "<think>hi</think>");
}

}  // namespace
}  // namespace fp4serve::tokenizer

namespace fp4serve::tokenizer {
namespace {

// encode() is const and shared by server threads: concurrent calls (sharing the word cache and
// per-thread PCRE2 state) must give the single-threaded ids.
TEST(TokenizerQwen35, ConcurrentEncodeGivesTheSameIds) {
  const Tokenizer* tok = testing::installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const auto corpus = testing::read_json_lines(testing::data_dir() / "corpus.jsonl");
  std::vector<std::vector<std::int32_t>> expected;
  for (const auto& row : corpus) expected.push_back(tok->encode(row["text"].get<std::string>()));
  std::vector<std::thread> threads;
  std::atomic<std::size_t> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = t; i < corpus.size(); i += 2)
        if (tok->encode(corpus[i]["text"].get<std::string>()) != expected[i]) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0u);
}

}  // namespace
}  // namespace fp4serve::tokenizer

namespace fp4serve::tokenizer {
namespace {

// Worst cases for the regex and BPE: one megabyte of a single pre-token, of whitespace, of
// combining marks, of digits... Each must finish (linear-ish, no recursion) and round-trip to the
// NFC of the input. No timing assertion; a regression shows up as a test timeout.
TEST(TokenizerQwen35, PathologicalMegabyteInputsRoundTrip) {
  const Tokenizer* tok = testing::installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const std::size_t n = 1 << 20;
  auto repeat = [&](const std::string& unit) {
    std::string s;
    while (s.size() < n) s += unit;
    return s;
  };
  const std::vector<std::string> inputs = {
      std::string(n, 'a'), std::string(n, ' '), std::string(n, '\n'), repeat(" \t"), repeat("\r\n"),
      repeat("1"), repeat("'s"), repeat("!?"), repeat("\xCC\x81"),          // U+0301 alone
      repeat("a\xCC\x81\xCC\xA3"), repeat("\xE4\xB8\xAD"), repeat("\xF0\x9F\xA6\x99"),
      repeat("<|im_end|>"), repeat("<|im_end"), repeat("\xE3\x80\x80"),   // ideographic space
  };
  for (const auto& s : inputs) {
    const auto ids = tok->encode(s);
    EXPECT_FALSE(ids.empty());
    EXPECT_TRUE(tok->decode(ids) == nfc(s)) << "round trip failed for a run of " << nlohmann::json(s.substr(0, 8)).dump();
  }
}

}  // namespace
}  // namespace fp4serve::tokenizer

namespace fp4serve::tokenizer {
namespace {

// Random bytes (valid or not, with combining marks and CJK fragments mixed in): encode never
// throws, and decoding gives back the input repaired like from_utf8_lossy and NFC-normalized.
// ('<' is left out so that no added token splits the text into separately normalized pieces.)
TEST(TokenizerQwen35, RandomBytesRoundTripToLossyNfc) {
  const Tokenizer* tok = testing::installed("qwen3.5");
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> fragments = {"a", "e", " ", "\n", "\t", "\xCC\x81", "\xCC\xA3", "\xE4\xB8\xAD",
                                              "\xE4", "\xB8", "\xF0\x9F", "\xA6\x99", "'s", "1", "\xC3", "\xFF",
                                              "\xE1\x84\x80", "\xE1\x85\xA1", "\xE1\x86\xA8", "!", "\xED\xA0\x80"};
  std::uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return std::uint32_t(state >> 33);
  };
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = int(next() % 24);
    for (int k = 0; k < n; ++k) {
      if (next() % 4 == 0) {
        char c = char(next() & 0xFF);
        s += (c == '<') ? 'x' : c;
      } else {
        s += fragments[next() % fragments.size()];
      }
    }
    const auto ids = tok->encode(s);
    ASSERT_EQ(tok->decode(ids), nfc(utf8::to_valid_lossy(s))) << nlohmann::json(utf8::to_valid_lossy(s)).dump();
  }
}

}  // namespace
}  // namespace fp4serve::tokenizer
