#include "tools/canary_checks.h"

#include <regex>

namespace fp4serve::tools {

std::vector<CanaryCheck> canary_checks() {
  return {
      {"capital-of-france", "What is the capital of France?", "Paris"},
      {"17x23", "What is 17 x 23?", "391"},
      {"special-tokens", "Say hello in one short sentence.", ""},
  };
}

std::string sanity_problem(const std::string& answer) {
  if (answer.find_first_not_of(" \t\r\n") == std::string::npos) return "empty answer";
  if (answer.find("\xEF\xBF\xBD") != std::string::npos) return "replacement character U+FFFD in the answer";
  // Qwen's special tokens look like <|name|>; two or more in a row is the garbage the seeds saw.
  static const std::regex run(R"((<\|[A-Za-z0-9_]+\|>\s*){2,})");
  std::smatch m;
  if (std::regex_search(answer, m, run)) return "run of special tokens: " + m.str().substr(0, 80);
  return "";
}

std::string check_problem(const CanaryCheck& check, const std::string& answer) {
  if (std::string p = sanity_problem(answer); !p.empty()) return p;
  if (!check.expect.empty() && answer.find(check.expect) == std::string::npos)
    return "answer does not contain \"" + check.expect + "\"";
  return "";
}

}  // namespace fp4serve::tools
