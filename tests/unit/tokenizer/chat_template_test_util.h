// Shared helpers of the chat-template / Jinja test files: reading the committed JSONL case files
// that tools/reference/make_chat_template_cases.py generates with transformers + jinja2.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::test {

inline std::string chat_template_data_dir() { return std::string(FP4SERVE_TEST_DATA_DIR) + "/chat_templates"; }

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One ordered_json object per non-empty line (ordered: tojson output depends on key order).
inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<nlohmann::ordered_json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

// Where two strings first differ, with some context, for readable failure messages.
inline std::string first_difference(const std::string& expected, const std::string& actual) {
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const std::size_t from = i > 60 ? i - 60 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  expected: ..." +
         nlohmann::json(expected.substr(from, 140)).dump() + "\n  actual:   ..." +
         nlohmann::json(actual.substr(from, 140)).dump();
}

}  // namespace fp4serve::test
