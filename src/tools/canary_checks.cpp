#include "tools/canary_checks.h"

#include <cctype>
#include <string_view>

#include "vision/png_encode.h"

namespace fp4serve::tools {

std::vector<CanaryCheck> canary_checks() {
  return {
      {"capital-of-france", "What is the capital of France?", "Paris", ""},
      {"17x23", "What is 17 x 23?", "391", ""},
      {"special-tokens", "Say hello in one short sentence.", "", ""},
      {"image-colour-red", "What colour is this image?", "red",
       vision::png_data_url(vision::solid_image(32, 32, 255, 0, 0))},
      {"image-colour-blue", "What colour is this image?", "blue",
       vision::png_data_url(vision::solid_image(32, 32, 0, 0, 255))},
  };
}

namespace {

// Length of the special token <|name|> (name: [A-Za-z0-9_]+) at `at`, or 0.
std::size_t special_token_at(std::string_view text, std::size_t at) {
  if (text.substr(at, 2) != "<|") return 0;
  std::size_t i = at + 2;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
  if (i == at + 2 || text.substr(i, 2) != "|>") return 0;
  return i + 2 - at;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

// The first run of two or more special tokens separated only by whitespace, or "". A linear scan
// (std::regex recursed per character of a long run).
std::string_view special_token_run(std::string_view text) {
  for (std::size_t start = text.find("<|"); start != std::string_view::npos; start = text.find("<|", start + 1)) {
    std::size_t end = start;
    int count = 0;
    for (std::size_t len; (len = special_token_at(text, end)) > 0; ++count) {
      end += len;
      while (end < text.size() && is_space(text[end])) ++end;
    }
    if (count >= 2) return text.substr(start, end - start);
  }
  return {};
}

}  // namespace

bool is_blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

std::string answer_preview(const std::string& answer, std::size_t max_chars) {
  if (is_blank(answer)) return "(empty)";
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < answer.size(); ++i) {
    const auto c = static_cast<unsigned char>(answer[i]);
    if ((c & 0xc0) != 0x80 && chars++ == max_chars) return out + "...";
    out.push_back(c == '\n' || c == '\r' ? ' ' : answer[i]);
  }
  return out;
}

std::string sanity_problem(const std::string& answer) {
  if (is_blank(answer)) return "empty answer";
  if (answer.find("\xEF\xBF\xBD") != std::string::npos) return "replacement character U+FFFD in the answer";
  // Qwen's special tokens look like <|name|>; two or more in a row is the garbage the seeds saw.
  if (auto run = special_token_run(answer); !run.empty())
    return "run of special tokens: " + answer_preview(std::string(run), 80);
  return "";
}

std::string check_problem(const CanaryCheck& check, const std::string& answer) {
  if (std::string p = sanity_problem(answer); !p.empty()) return p;
  if (!check.expect.empty() && answer.find(check.expect) == std::string::npos)
    return "answer does not contain \"" + check.expect + "\"";
  return "";
}

}  // namespace fp4serve::tools
