#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/onig_compat_data.h"
#include "tokenizer/tokenizer_error.h"
#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {
namespace {

// Generous limits: the patterns we serve are linear, but a hostile tokenizer.json must not hang.
constexpr std::uint32_t kMatchLimit = 100'000'000;
constexpr std::uint32_t kDepthLimit = 10'000'000;
constexpr std::size_t kJitStackMax = 8 << 20;

const char* extra_for_property(std::string_view name) {
  if (name == "L") return onig_compat::kExtraL;
  if (name == "N") return onig_compat::kExtraN;
  if (name == "M") return onig_compat::kExtraM;
  return nullptr;
}

std::string pcre_error_text(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string translate_onig_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's' || e == 'S') {
        if (in_class && e == 'S') {
          out += "\\S";  // no exact rewrite inside a class; not used by the patterns we serve
        } else if (in_class) {
          out += onig_compat::kWhitespace;
        } else {
          out += (e == 's') ? "[" : "[^";
          out += onig_compat::kWhitespace;
          out += "]";
        }
        ++i;
        continue;
      }
      if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i + 3);
        if (close != std::string_view::npos) {
          const std::string_view name = p.substr(i + 3, close - (i + 3));
          const std::string_view verbatim = p.substr(i, close + 1 - i);
          const char* extra = extra_for_property(name);
          if (extra && e == 'p') {
            if (in_class) {
              out.append(verbatim);
              out += extra;
            } else {
              out += "[";
              out.append(verbatim);
              out += extra;
              out += "]";
            }
          } else if (extra && !in_class) {  // \P{X} outside a class
            out += "[^\\p{";
            out.append(name);
            out += "}";
            out += extra;
            out += "]";
          } else {
            out.append(verbatim);
          }
          i = close;
          continue;
        }
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

// Per-thread match state: PCRE2 match data, match context and JIT stack are not shareable.
struct ThreadMatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context, kMatchLimit);
    pcre2_set_depth_limit(context, kDepthLimit);
    jit_stack = pcre2_jit_stack_create(64 << 10, kJitStackMax, nullptr);
    if (jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

RegexSplitter::RegexSplitter(std::string_view onig_pattern, std::string what)
    : impl_(std::make_unique<Impl>()), pcre_pattern_(translate_onig_pattern(onig_pattern)), what_(std::move(what)) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern_.data()), pcre_pattern_.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!impl_->code) {
    throw TokenizerError(what_ + ": PCRE2 cannot compile regex '" + std::string(onig_pattern) + "' (as '" +
                         pcre_pattern_ + "'): " + pcre_error_text(err) + " at offset " + std::to_string(offset));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::pair<std::uint32_t, std::uint32_t>>& pieces) const {
  if (text.empty()) return;
  ThreadMatchState& state = thread_match_state();
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0, prev = 0;
  while (pos < text.size()) {
    // The text is known-valid UTF-8; skipping PCRE2's check keeps the whole split linear.
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md,
                                                state.context)
                              : pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md,
                                            state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw TokenizerError(what_ + ": PCRE2 match failed at byte " + std::to_string(pos) + ": " + pcre_error_text(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t start = ov[0], end = ov[1];
    if (end == start) {  // empty matches make no piece (HF drops empty splits); step one character
      std::size_t next = start;
      if (next < text.size()) utf8::decode(text, next);
      pos = next;
      continue;
    }
    if (start > prev) pieces.emplace_back(std::uint32_t(prev), std::uint32_t(start));
    pieces.emplace_back(std::uint32_t(start), std::uint32_t(end));
    prev = pos = end;
  }
  pcre2_match_data_free(md);
  if (prev < text.size()) pieces.emplace_back(std::uint32_t(prev), std::uint32_t(text.size()));
}

}  // namespace fp4serve::tokenizer
