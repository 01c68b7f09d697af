#include "json_mutator.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string_view>

#include <nlohmann/json.hpp>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace fp4serve::fuzz {
namespace {

using Json = nlohmann::ordered_json;
using Rng = std::minstd_rand;

// Markers the writer understands: a string value "\x01raw:TEXT" is written as TEXT, unquoted (number
// literals no JSON library writes, escapes such as lone surrogates); an object key "\x01dup<N>:KEY"
// is written as KEY, so one object can carry KEY twice (Python's json keeps the last).
constexpr std::string_view kRaw = "\x01raw:";
constexpr std::string_view kDup = "\x01dup";

// Trees deeper than this are byte-mutated (the walk below is recursive; the server refuses deep
// bodies before its own walk anyway).
constexpr int kMaxStructuredDepth = 100;

std::size_t pick(Rng& rng, std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }
bool one_in(Rng& rng, std::size_t n) { return pick(rng, n) == 0; }
template <class T, std::size_t N>
const T& pick_from(Rng& rng, const T (&items)[N]) {
  return items[pick(rng, N)];
}

Json raw(std::string_view text) { return Json(std::string(kRaw) + std::string(text)); }

// Number literals at the edges of int64 / double / JSON's grammar (some are not JSON at all: Python
// accepts NaN and Infinity, nobody accepts 0x10).
const char* const kRawNumbers[] = {
    "1e309", "-1e309", "1e-400", "NaN", "-NaN", "Infinity", "-Infinity", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
    "18446744073709551616", "123456789012345678901234567890", "-0", "-0.0", "0.0", "1.0", "1e2", "1E+2",
    "2.5e-3", "4.9e-324", "1.7976931348623157e308", "2147483647", "2147483648", "-2147483649",
    "4294967296", "9007199254740993", "0.1", "01", "1.", ".5", "+1", "0x10"};

// String literals written as-is (escapes a JSON library would normalise or refuse).
const char* const kRawStrings[] = {
    R"("\ud800")", R"("\udfff")", R"("\ud800\udc00")", R"("\udbff\udfff")", R"("\u0000")", R"("a\u0000b")",
    R"("\uFFFD")", R"("\"")", R"("\/")", R"("\ud83d")", R"("x\ud800y")", R"("\uD800\u0041")"};

// String values: numbers and booleans as text, template syntax, special tokens, Unicode edge cases
// and invalid UTF-8 (written raw inside the quotes).
const char* const kStrings[] = {
    "", "NaN", "nan", "inf", "-inf", "Infinity", "1e309", "0", "-1", "1.5", " 1 ", "1_000", "true", "True",
    "yes", "off", "null", "None", "auto", "none", "required", "function", "text", "assistant", "user",
    "system", "tool", "developer", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<tool_response>", "<function=f>", "<parameter=x>",
    "{{ raise_exception('x') }}", "{% for x in y %}", "{{", "}}", "\xff", "\xc3", "\xe2\x82",
    "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\xc3\xa9", "e\xcc\x81", "<\xcc\xb8", "\xe2\x80\x8b",
    "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9", "\r\n", "\t", "\\", "\"", "'", "left", "right",
    "json_object", "json_schema", "image_url", "input_audio", "refusal", "qwen3.6", "fp4serve-demo"};

const int64_t kInts[] = {0, 1, -1, 2, 5, 20, 21, 100, 255, 256, 4096, 65536, 248069, 248320, 2147483647,
                         -2147483648LL, 4294967296LL, INT64_MAX, INT64_MIN, 9007199254740993LL};
const double kDoubles[] = {0.5, -0.0, 1e300, -1e300, 1e-300, 3.0, 1e16, 2.0, -2.0, 1e-7, 0.9999999999999999};

struct Slot {
  Json* node;
  Json* parent;     // null for the root
  std::string key;  // in an object parent
  std::size_t index = 0;  // in an array parent
};

void collect(Json& node, Json* parent, std::string key, std::size_t index, int depth, std::vector<Slot>& out) {
  out.push_back(Slot{&node, parent, key, index});
  if (depth >= kMaxStructuredDepth) return;
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) collect(it.value(), &node, it.key(), 0, depth + 1, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) collect(node[i], &node, {}, i, depth + 1, out);
  }
}

// --- writing ---------------------------------------------------------------------------------

void write_string(std::string_view s, std::string& out) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static const char* kHex = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;  // bytes >= 0x80 as they are, valid UTF-8 or not
    }
  }
  out += '"';
}

void write(const Json& j, std::string& out) {
  switch (j.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        std::string_view key = it.key();
        if (key.substr(0, kDup.size()) == kDup) {
          const auto colon = key.find(':');
          key = colon == std::string_view::npos ? key : key.substr(colon + 1);
        }
        write_string(key, out);
        out += ": ";
        write(it.value(), out);
      }
      out += '}';
      break;
    }
    case Json::value_t::array:
      out += '[';
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        write(j[i], out);
      }
      out += ']';
      break;
    case Json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (std::string_view(s).substr(0, kRaw.size()) == kRaw) out += s.substr(kRaw.size());
      else write_string(s, out);
      break;
    }
    default:
      out += j.dump();
  }
}

std::string written(const Json& j) {
  std::string out;
  write(j, out);
  return out;
}

// --- values ----------------------------------------------------------------------------------

Json random_value(Rng& rng, const JsonVocabulary& vocab, std::size_t budget) {
  switch (pick(rng, 13)) {
    case 0: return nullptr;
    case 1: return one_in(rng, 2);
    case 2: return static_cast<int64_t>(pick(rng, 7)) - 3;
    case 3: return pick_from(rng, kInts);
    case 4: return pick_from(rng, kDoubles);
    case 5: return raw(pick_from(rng, kRawNumbers));
    case 6: return std::string(pick_from(rng, kStrings));
    case 7: return raw(pick_from(rng, kRawStrings));
    case 8: return one_in(rng, 2) ? Json::array() : Json::object();
    case 9:
      if (!vocab.strings.empty()) return vocab.strings[pick(rng, vocab.strings.size())];
      return "x";
    case 10: {  // a long string, up to what the size budget allows
      const std::size_t n = std::min<std::size_t>(budget, one_in(rng, 2) ? 64 : 4096);
      return std::string(n, one_in(rng, 2) ? 'a' : ' ');
    }
    case 11: {
      const auto& fields = one_in(rng, 2) ? vocab.top_level_fields : vocab.nested_fields;
      if (fields.empty()) return nullptr;
      return Json::parse(fields[pick(rng, fields.size())].second, nullptr, false);
    }
    default: {
      Json a = Json::array();
      const std::size_t n = pick(rng, 5);
      for (std::size_t i = 0; i < n; ++i) a.push_back(static_cast<int64_t>(pick(rng, 300000)) - 10);
      return a;
    }
  }
}

Json number_edge(Rng& rng, const Json& n) {
  const double v = n.get<double>();
  // Integer steps wrap (as uint64) rather than overflow: the mutator runs under UBSan too.
  const bool is_float = n.is_number_float();
  const uint64_t u = is_float ? 0 : n.is_number_unsigned() ? n.get<uint64_t>() : static_cast<uint64_t>(n.get<int64_t>());
  switch (pick(rng, 8)) {
    case 0: return is_float ? Json(v + 1) : Json(static_cast<int64_t>(u + 1));
    case 1: return is_float ? Json(v - 1) : Json(static_cast<int64_t>(u - 1));
    case 2: return is_float ? Json(-v) : Json(static_cast<int64_t>(0 - u));
    case 3: return v * 1e10;
    case 4: return raw(pick_from(rng, kRawNumbers));
    case 5: return pick_from(rng, kInts);
    case 6: return pick_from(rng, kDoubles);
    default: return n.dump();  // the number as a string: pydantic's lax mode converts it
  }
}

Json mutate_string(Rng& rng, const std::string& s, std::size_t budget) {
  switch (pick(rng, 7)) {
    case 0: return std::string(pick_from(rng, kStrings));
    case 1: return s + pick_from(rng, kStrings);
    case 2: return std::string(pick_from(rng, kStrings)) + s;
    case 3: {  // libFuzzer's byte mutation of the content (may leave invalid UTF-8)
      std::string buf = s;
      const std::size_t cap = std::min<std::size_t>(s.size() * 2 + 16, s.size() + budget);
      buf.resize(std::max<std::size_t>(cap, 1));
      const std::size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(buf.data()), s.size(), buf.size());
      buf.resize(n);
      return buf;
    }
    case 4: {  // repeated up to the budget
      std::string out = s.empty() ? std::string("ab") : s;
      while (out.size() * 2 <= s.size() + budget && out.size() < 65536) out += out;
      return out;
    }
    case 5: return raw(pick_from(rng, kRawStrings));
    default: return std::string();
  }
}

const std::pair<std::string, std::string>* pick_field(Rng& rng, const std::vector<std::pair<std::string, std::string>>& f) {
  return f.empty() ? nullptr : &f[pick(rng, f.size())];
}

// One mutation of the tree rooted at `root`; false when nothing applied.
bool mutate_tree(Json& root, Rng& rng, const JsonVocabulary& vocab, std::size_t budget) {
  std::vector<Slot> slots;
  collect(root, nullptr, {}, 0, 0, slots);
  Slot& s = slots[pick(rng, slots.size())];
  Json& node = *s.node;
  switch (pick(rng, 14)) {
    case 0: node = random_value(rng, vocab, budget); return true;
    case 1:
      if (!node.is_number()) return false;  // (bools are not numbers in nlohmann)
      node = number_edge(rng, node);
      return true;
    case 2:
    case 3:
      if (!node.is_string()) return false;
      node = mutate_string(rng, node.get<std::string>(), budget);
      return true;
    case 4:
    case 5: {  // insert a known field (the top level of an object root gets top-level names)
      Json* target = node.is_object() ? &node : (s.parent && s.parent->is_object() ? s.parent : nullptr);
      if (!target) target = root.is_object() ? &root : nullptr;
      if (!target) return false;
      const bool top = target == &root;
      const auto* field = pick_field(rng, top ? vocab.top_level_fields : vocab.nested_fields);
      if (!field) return false;
      (*target)[field->first] =
          one_in(rng, 3) ? random_value(rng, vocab, budget) : Json::parse(field->second, nullptr, false);
      return true;
    }
    case 6:  // delete
      if (!s.parent) return false;
      if (s.parent->is_object()) s.parent->erase(s.key);
      else s.parent->erase(s.index);
      return true;
    case 7: {  // duplicate a key with another value
      if (!s.parent || !s.parent->is_object()) return false;
      const std::string key = std::string(kDup) + std::to_string(pick(rng, 1000)) + ":" + s.key;
      (*s.parent)[key] = one_in(rng, 2) ? random_value(rng, vocab, budget) : node;
      return true;
    }
    case 8: {  // wrap
      Json inner = node;
      if (one_in(rng, 2)) {
        node = Json::array({std::move(inner)});
      } else {
        const auto* field = pick_field(rng, vocab.nested_fields);
        node = Json::object();
        node[field ? field->first : std::string("x")] = std::move(inner);
      }
      return true;
    }
    case 9: {  // unwrap
      if (!node.is_structured() || node.empty()) return false;
      const std::size_t i = pick(rng, node.size());
      Json child = node.is_array() ? node[i] : std::next(node.begin(), static_cast<std::ptrdiff_t>(i)).value();
      node = std::move(child);
      return true;
    }
    case 10: {  // repeat an array element
      if (!node.is_array() || node.empty()) return false;
      const Json item = node[pick(rng, node.size())];
      const std::size_t copies = one_in(rng, 4) ? 1 + pick(rng, 64) : 1;
      for (std::size_t i = 0; i < copies; ++i) node.push_back(item);
      return true;
    }
    case 11: {  // copy another subtree here
      const Json copy = *slots[pick(rng, slots.size())].node;
      node = copy;
      return true;
    }
    case 12: {  // move a key to the front (key order reaches tojson output)
      if (!node.is_object() || node.size() < 2) return false;
      const std::size_t i = pick(rng, node.size());
      auto it = std::next(node.begin(), static_cast<std::ptrdiff_t>(i));
      Json reordered = Json::object();
      reordered[it.key()] = it.value();
      for (auto jt = node.begin(); jt != node.end(); ++jt)
        if (jt != it) reordered[jt.key()] = jt.value();
      node = std::move(reordered);
      return true;
    }
    default: {  // rename a key
      if (!s.parent || !s.parent->is_object()) return false;
      const auto* field = pick_field(rng, s.parent == &root ? vocab.top_level_fields : vocab.nested_fields);
      std::string name = field ? field->first : s.key;
      if (one_in(rng, 3)) name += pick_from(rng, kStrings);
      if (name == s.key) return false;
      const Json value = node;
      s.parent->erase(s.key);
      (*s.parent)[name] = value;
      return true;
    }
  }
}

bool parse_structured(const uint8_t* data, std::size_t size, Json& out) {
  if (size == 0 || json_text_depth(std::string_view(reinterpret_cast<const char*>(data), size)) > kMaxStructuredDepth) return false;
  out = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

std::size_t emit(const std::string& text, uint8_t* out, std::size_t max_size) {
  if (text.size() > max_size) return 0;
  std::memcpy(out, text.data(), text.size());
  return text.size();
}

}  // namespace

int json_text_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::size_t mutate_json(uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                        const JsonVocabulary& vocabulary) {
  Rng rng(seed);
  Json tree;
  // Non-JSON input, and one JSON input in 8: libFuzzer's byte mutations (truncation, stray bytes).
  if (one_in(rng, 8) || !parse_structured(data, size, tree)) return LLVMFuzzerMutate(data, size, max_size);
  for (int attempt = 0; attempt < 4; ++attempt) {
    Json copy = tree;
    const std::size_t budget = max_size > size ? max_size - size : 0;
    bool changed = false;
    const std::size_t steps = 1 + pick(rng, 3);
    for (std::size_t i = 0; i < steps; ++i) changed |= mutate_tree(copy, rng, vocabulary, budget);
    if (!changed) continue;
    if (const std::size_t n = emit(written(copy), data, max_size)) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

std::size_t crossover_json(const uint8_t* a, std::size_t size_a, const uint8_t* b, std::size_t size_b,
                           uint8_t* out, std::size_t max_out, unsigned seed) {
  Rng rng(seed);
  Json ta, tb;
  if (parse_structured(a, size_a, ta) && parse_structured(b, size_b, tb)) {
    std::vector<Slot> sa, sb;
    collect(ta, nullptr, {}, 0, 0, sa);
    collect(tb, nullptr, {}, 0, 0, sb);
    const Json graft = *sb[pick(rng, sb.size())].node;
    *sa[pick(rng, sa.size())].node = graft;
    if (const std::size_t n = emit(written(ta), out, max_out)) return n;
  }
  // Bytes: a prefix of a, then a suffix of b.
  const std::size_t head = size_a ? pick(rng, size_a + 1) : 0;
  const std::size_t tail = size_b ? pick(rng, size_b + 1) : 0;
  const std::size_t n = std::min(max_out, head + tail);
  const std::size_t from_a = std::min(head, n);
  std::memcpy(out, a, from_a);
  std::memcpy(out + from_a, b + (size_b - tail), n - from_a);
  return n;
}

}  // namespace fp4serve::fuzz
