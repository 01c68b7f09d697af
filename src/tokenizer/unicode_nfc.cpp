#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tokenizer/unicode_nfc_data.h"
#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {
namespace {

using namespace nfc_data;

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

bool is_hangul_syllable(char32_t c) { return c >= kSBase && c < kSBase + kSCount; }

std::uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const auto* end = kCombiningClasses + kCombiningClassCount;
  const auto* it = std::upper_bound(kCombiningClasses, end, c,
                                    [](char32_t v, const CombiningClassRange& r) { return v < r.first; });
  if (it == kCombiningClasses) return 0;
  --it;
  return (c <= it->last) ? it->combining_class : 0;
}

const Decomposition* find_decomposition(char32_t c) {
  const auto* end = kDecompositions + kDecompositionCount;
  const auto* it = std::lower_bound(kDecompositions, end, c,
                                    [](const Decomposition& d, char32_t v) { return d.code_point < v; });
  return (it != end && it->code_point == c) ? it : nullptr;
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (is_hangul_syllable(a) && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const std::uint64_t key = (std::uint64_t(a) << 21) | b;
  const auto* end = kCompositions + kCompositionCount;
  const auto* it = std::lower_bound(kCompositions, end, key,
                                    [](const Composition& c, std::uint64_t k) { return c.pair < k; });
  return (it != end && it->pair == key) ? it->composite : 0;
}

// Bitmap of code points that may change under NFC or change their neighbours: anything with a
// decomposition, a non-zero combining class, or that appears second in a composition pair
// (including Hangul V and T jamo). Built once from the tables.
class UnstableSet {
 public:
  UnstableSet() : bits_(0x110000 / 64, 0) {
    for (std::size_t i = 0; i < kDecompositionCount; ++i) set(kDecompositions[i].code_point);
    for (std::size_t i = 0; i < kCombiningClassCount; ++i)
      for (char32_t c = kCombiningClasses[i].first; c <= kCombiningClasses[i].last; ++c) set(c);
    for (std::size_t i = 0; i < kCompositionCount; ++i) set(char32_t(kCompositions[i].pair & 0x1FFFFF));
    for (char32_t c = kVBase; c < kVBase + kVCount; ++c) set(c);
    for (char32_t c = kTBase + 1; c < kTBase + kTCount; ++c) set(c);
    // Hangul syllables need no entry: they are already composed, and a following T jamo is marked.
  }
  bool contains(char32_t c) const { return (bits_[c >> 6] >> (c & 63)) & 1; }

 private:
  void set(char32_t c) { bits_[c >> 6] |= std::uint64_t(1) << (c & 63); }
  std::vector<std::uint64_t> bits_;
};

const UnstableSet& unstable_set() {
  static const UnstableSet set;
  return set;
}

void decompose_into(char32_t c, std::vector<char32_t>& out) {
  if (is_hangul_syllable(c)) {
    const char32_t si = c - kSBase;
    out.push_back(kLBase + si / kNCount);
    out.push_back(kVBase + (si % kNCount) / kTCount);
    if (si % kTCount) out.push_back(kTBase + si % kTCount);
    return;
  }
  if (const Decomposition* d = find_decomposition(c)) {
    out.insert(out.end(), kDecompositionPool + d->offset, kDecompositionPool + d->offset + d->length);
  } else {
    out.push_back(c);
  }
}

}  // namespace

bool nfc_quick_check(std::string_view s) {
  // 0xCC is the lead byte of U+0300, the first code point that can be unstable.
  std::size_t pos = 0;
  const UnstableSet* set = nullptr;
  while (pos < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b < 0xCC) {
      pos += (b < 0x80) ? 1 : 2;
      continue;
    }
    if (!set) set = &unstable_set();
    if (set->contains(utf8::decode(s, pos))) return false;
  }
  return true;
}

std::string nfc(std::string_view s) {
  if (nfc_quick_check(s)) return std::string(s);
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) decompose_into(utf8::decode(s, pos), cps);
  // Canonical ordering: stable sort of every run of non-starters by combining class.
  std::vector<std::uint8_t> classes(cps.size());
  for (std::size_t i = 0; i < cps.size(); ++i) classes[i] = combining_class(cps[i]);
  for (std::size_t i = 0; i < cps.size();) {
    if (classes[i] == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && classes[j] != 0) ++j;
    if (j - i > 1) {
      std::vector<std::pair<std::uint8_t, char32_t>> run;
      for (std::size_t k = i; k < j; ++k) run.emplace_back(classes[k], cps[k]);
      std::stable_sort(run.begin(), run.end(), [](auto& a, auto& b) { return a.first < b.first; });
      for (std::size_t k = i; k < j; ++k) std::tie(classes[k], cps[k]) = run[k - i];
    }
    i = j;
  }
  // Canonical composition. A code point composes with the last starter unless blocked: since the
  // marks in between are ordered, only the last kept one needs checking.
  std::vector<char32_t> res;
  res.reserve(cps.size());
  std::ptrdiff_t starter = -1;
  std::uint8_t last_class = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const std::uint8_t k = classes[i];
    if (starter >= 0 &&
        (starter == std::ptrdiff_t(res.size()) - 1 || (last_class != 0 && last_class < k))) {
      if (const char32_t comp = compose_pair(res[starter], c)) {
        res[starter] = comp;
        continue;
      }
    }
    if (k == 0) starter = std::ptrdiff_t(res.size());
    last_class = k;
    res.push_back(c);
  }
  std::string out;
  out.reserve(s.size());
  for (char32_t c : res) utf8::append(out, c);
  return out;
}

}  // namespace fp4serve::tokenizer
