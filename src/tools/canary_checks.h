// The correctness canary's checks (issue 7): the prompts operators bisect builds with, and what a
// healthy model's answer must look like. Pure functions of the answer text, so they are unit-tested
// without a server; canary.cpp sends the prompts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fp4serve::tools {

struct CanaryCheck {
  std::string name;     // "capital-of-france"
  std::string prompt;   // the user message
  std::string expect;   // substring the answer must contain ("" = only the sanity rules)
  std::string image_url;  // "" = text only; else an image_url part sent before the text
};

// The seeds' checks: "What is the capital of France?" -> Paris; 17x23 -> 391; and an open prompt
// for special-token sanity. Then two image checks (issue 19): a 32 x 32 solid red and a solid blue
// PNG (data: URLs) with "What colour is this image?" -> red / blue. The colour reaches the language
// model only through the vision tower's rows at their M-RoPE positions; two colours, because a model
// that sees the same rows for every image (a dead tower) can name at most one of them.
std::vector<CanaryCheck> canary_checks();

// Why an answer fails the sanity rules, or "" when it passes: empty content, U+FFFD replacement
// characters, or a run of two or more special tokens such as "<|box_end|><|box_end|>".
std::string sanity_problem(const std::string& answer);

// Why an answer fails a check ("" = pass): the sanity rules, then the expected substring.
std::string check_problem(const CanaryCheck& check, const std::string& answer);

// True when the text is empty or only whitespace.
bool is_blank(const std::string& text);

// The answer as a verdict line shows it: newlines as spaces, at most max_chars code points (never
// cutting a UTF-8 sequence) with "..." when cut, and "(empty)" for a blank answer.
std::string answer_preview(const std::string& answer, std::size_t max_chars = 120);

}  // namespace fp4serve::tools
