// libFuzzer target: the real Qwen tokenizer (src/tokenizer) on arbitrary bytes, checking the
// properties tokenizer.h and detokenizer.h promise rather than only "no crash". The first input
// byte picks the mode; the rest is the payload.
//
// Text modes (payload = text):
//  - every id encode() returns is in the vocabulary;
//  - valid UTF-8: decode(encode(s)) is s with the text between added tokens NFC-normalized (Qwen's
//    normalizer is NFC and its added tokens are matched in the raw text, leftmost-longest, before
//    normalization, as HF's AddedVocabulary does);
//  - invalid UTF-8: encode(s) == encode(from_utf8_lossy(s)), with Rust's from_utf8_lossy written
//    out independently below (maximal invalid subparts become U+FFFD);
//  - decode(ids, skip_special_tokens) drops exactly the special ids;
//  - the streaming detokenizer fed the ids one by one, then flushed, produces decode(ids).
// Id mode (payload = where the prompt ends, then 3 bytes per id: ordinary ids, single-byte tokens that split UTF-8 sequences,
// added tokens, negative and out-of-range ids):
//  - decode never fails, returns valid UTF-8, and ignores unknown ids;
//  - the streaming detokenizer, primed with a prompt that decodes cleanly (special tokens included),
//    produces decode(ids) of the generated part, for each skip_special_tokens /
//    spaces_between_special_tokens setting.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace {

using namespace fp4serve;
using tokenizer::Tokenizer;

struct Fixture {
  std::shared_ptr<const Tokenizer> tok;
  std::vector<std::string> added_contents;  // all matched in the raw text (normalized: false)
  std::vector<int32_t> added_ids;
  int32_t byte_token[256] = {};  // the id whose bytes are exactly this one byte
};
Fixture* g = nullptr;

std::string_view input_text;  // for finding()

void check(bool ok, const std::string& what) {
  if (!ok) fuzz::finding(what, input_text);
}

// Rust's String::from_utf8_lossy: each maximal prefix of a valid sequence that cannot be completed
// (or a lone invalid byte) becomes one U+FFFD (Unicode's "maximal subpart" practice).
std::string from_utf8_lossy(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += s[i++];
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) len = 3;
    else if (b == 0xED) len = 3, hi = 0x9F;
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F;
    std::size_t k = 1;
    while (len && k < len && i + k < s.size()) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++k;
    }
    if (len && k == len) {
      out.append(s.substr(i, len));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += len ? k : 1;
  }
  return out;
}

// What decode(encode(s)) must give for valid UTF-8 s.
std::string expected_round_trip(std::string_view s) {
  std::string out;
  std::size_t piece = 0, i = 0;
  while (i < s.size()) {
    std::size_t best = 0;
    for (const std::string& t : g->added_contents)
      if (t.size() > best && s.substr(i, t.size()) == t) best = t.size();
    if (!best) {
      ++i;
      continue;
    }
    out += tokenizer::nfc(s.substr(piece, i - piece));
    out += s.substr(i, best);
    i += best;
    piece = i;
  }
  return out + tokenizer::nfc(s.substr(piece));
}

std::vector<int32_t> without_specials(const std::vector<int32_t>& ids) {
  std::vector<int32_t> out;
  for (int32_t id : ids)
    if (!g->tok->is_special(id)) out.push_back(id);
  return out;
}

// The streaming detokenizer over `generated` after priming with `prompt` equals one decode.
void check_stream(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated, bool skip, bool spaces) {
  const Tokenizer& tok = *g->tok;
  tokenizer::IncrementalDetokenizer det(tok, {skip, spaces}, prompt);
  std::string streamed;
  for (int32_t id : generated) streamed += det.step(id);
  streamed += det.flush();
  const std::string whole = tok.decode(generated, skip);
  check(streamed == whole, "streamed text '" + streamed + "' != decode '" + whole + "' (skip_special_tokens=" +
                               std::to_string(skip) + ", spaces_between_special_tokens=" + std::to_string(spaces) +
                               ", prompt of " + std::to_string(prompt.size()) + " ids)");
}

void text_mode(std::string_view s, uint8_t flags) {
  const Tokenizer& tok = *g->tok;
  const std::vector<int32_t> ids = tok.encode(s);
  for (int32_t id : ids) check(id >= 0 && static_cast<std::size_t>(id) < tok.vocab_size(), "encode returned id " + std::to_string(id));
  const std::string decoded = tok.decode(ids);
  check(tokenizer::utf8::is_valid(decoded), "decode returned invalid UTF-8");
  if (tokenizer::utf8::is_valid(s)) {
    check(decoded == expected_round_trip(s), "decode(encode(s)) = '" + decoded + "', not NFC(s)");
  } else {
    const std::string lossy = from_utf8_lossy(s);
    check(tokenizer::utf8::to_valid_lossy(s) == lossy, "utf8::to_valid_lossy differs from from_utf8_lossy");
    check(tok.encode(lossy) == ids, "encode of invalid UTF-8 differs from encode of its lossy repair");
  }
  check(tok.decode(ids, true) == tok.decode(without_specials(ids), false), "skip_special_tokens dropped other ids");
  check_stream({}, ids, flags & 1, flags & 2);
}

void id_mode(std::string_view payload, uint8_t flags) {
  const Tokenizer& tok = *g->tok;
  static const int32_t kEdges[] = {-1, INT32_MIN, INT32_MAX, 0, 248069, 248070, 248319, 248320};
  const uint8_t split_at = payload.empty() ? 0 : static_cast<uint8_t>(payload[0]);
  if (!payload.empty()) payload.remove_prefix(1);
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i + 3 <= payload.size(); i += 3) {
    const auto b0 = static_cast<uint8_t>(payload[i]), b1 = static_cast<uint8_t>(payload[i + 1]),
               b2 = static_cast<uint8_t>(payload[i + 2]);
    if (b0 < 128) ids.push_back(((b0 & 3) << 16) | (b1 << 8) | b2);  // 0..262143: past the vocabulary too
    else if (b0 < 192) ids.push_back(g->byte_token[b1]);
    else if (b0 < 240) ids.push_back(g->added_ids[b1 % g->added_ids.size()]);
    else ids.push_back(kEdges[b1 % (sizeof(kEdges) / sizeof(kEdges[0]))]);
  }
  std::vector<int32_t> known;
  for (int32_t id : ids)
    if (tok.id_to_token(id)) known.push_back(id);
  for (const bool skip : {false, true}) {
    const std::string text = tok.decode(ids, skip);
    check(tokenizer::utf8::is_valid(text), "decode returned invalid UTF-8");
    check(text == tok.decode(known, skip), "unknown ids changed the decode");
  }
  check(tok.decode(ids, true) == tok.decode(without_specials(ids), false), "skip_special_tokens dropped other ids");
  // Prompt / generated split. The property needs a prompt that ends on a character boundary with
  // and without its special tokens: vLLM picks the priming suffix by decoding it without them, and
  // primes the stream with them, so bytes of a character split by a special token in the prompt
  // come out as U+FFFD ahead of the first generated text (as in vLLM).
  const std::size_t split = split_at % (ids.size() + 1);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
  const std::vector<int32_t> generated(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
  if (tok.decode(prompt, false).find("\xEF\xBF\xBD") != std::string::npos) return;
  check_stream(prompt, generated, flags & 1, flags & 2);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g = new Fixture;
  g->tok = fuzz::load_tokenizer_or_skip("tokenizer_fuzz");
  for (const auto& t : g->tok->added_tokens().tokens()) {
    if (t.normalized || t.lstrip || t.rstrip || t.single_word) {
      std::fprintf(stderr, "tokenizer_fuzz: added token '%s' has options this target's model of HF does not cover\n",
                   t.content.c_str());
      std::exit(1);
    }
    g->added_contents.push_back(t.content);
    g->added_ids.push_back(t.id);
  }
  for (int b = 0; b < 256; ++b) g->byte_token[b] = -1;
  for (int32_t id = 0; static_cast<std::size_t>(id) < g->tok->vocab_size(); ++id) {
    const std::string& bytes = g->tok->token_bytes(id);
    if (bytes.size() == 1 && !g->tok->is_added(id)) g->byte_token[static_cast<uint8_t>(bytes[0])] = id;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  input_text = std::string_view(reinterpret_cast<const char*>(data), size);
  const uint8_t mode = data[0];
  const std::string_view payload = input_text.substr(1);
  try {
    if (mode < 0xC0) text_mode(payload, mode);
    else id_mode(payload, mode);
  } catch (const std::exception& e) {
    fuzz::finding(std::string(typeid(e).name()) + " escaped: " + e.what(), input_text);
  }
  return 0;
}
