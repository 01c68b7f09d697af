#include "tools/bench/bench_tokenizer.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace fp4serve::tools::bench {

LocalBenchTokenizer::LocalBenchTokenizer(const std::string& path) : tok_(tokenizer::Tokenizer::load(path)) {}
LocalBenchTokenizer::~LocalBenchTokenizer() = default;

std::vector<std::int32_t> LocalBenchTokenizer::encode(const std::string& text) { return tok_->encode(text, false); }
std::string LocalBenchTokenizer::decode(const std::vector<std::int32_t>& ids) { return tok_->decode(ids, false); }

std::int64_t LocalBenchTokenizer::vocab_size() {
  std::int64_t n = 0;
  for (std::size_t id = 0; id < tok_->vocab_size(); ++id) n += tok_->is_added(static_cast<std::int32_t>(id)) ? 0 : 1;
  return n;
}

std::vector<std::int32_t> LocalBenchTokenizer::all_special_ids() {
  std::vector<std::int32_t> ids;
  for (std::size_t id = 0; id < tok_->vocab_size(); ++id) {
    if (tok_->is_special(static_cast<std::int32_t>(id))) ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

ServerBenchTokenizer::ServerBenchTokenizer(BaseUrl base, std::string model, HeaderMap headers)
    : base_(std::move(base)), model_(std::move(model)), headers_(std::move(headers)) {}

std::vector<std::int32_t> ServerBenchTokenizer::tokenize(const std::string& text, bool add_special_tokens) {
  const nlohmann::json body = {{"model", model_}, {"prompt", text}, {"add_special_tokens", add_special_tokens}};
  const HttpResponse r = http_post_json(base_, "/tokenize", body.dump(), headers_);
  if (r.status != 200) {
    throw BenchHttpError("POST " + base_.text() + "/tokenize answered " + std::to_string(r.status) + ": " + r.body);
  }
  return nlohmann::json::parse(r.body).at("tokens").get<std::vector<std::int32_t>>();
}

std::vector<std::int32_t> ServerBenchTokenizer::encode(const std::string& text) { return tokenize(text, false); }

std::string ServerBenchTokenizer::decode(const std::vector<std::int32_t>& ids) {
  const nlohmann::json body = {{"model", model_}, {"tokens", ids}};
  const HttpResponse r = http_post_json(base_, "/detokenize", body.dump(), headers_);
  if (r.status != 200) {
    throw BenchHttpError("POST " + base_.text() + "/detokenize answered " + std::to_string(r.status) + ": " + r.body);
  }
  return nlohmann::json::parse(r.body).at("prompt").get<std::string>();
}

int ServerBenchTokenizer::num_special_tokens_to_add() {
  return static_cast<int>(tokenize("a", true).size()) - static_cast<int>(tokenize("a", false).size());
}

bool ServerBenchTokenizer::decodes_to_text(std::int64_t id, std::string* text) {
  const nlohmann::json body = {{"model", model_}, {"tokens", {id}}};
  const HttpResponse r = http_post_json(base_, "/detokenize", body.dump(), headers_);
  if (r.status != 200) return false;  // beyond the model's vocabulary
  std::string s = nlohmann::json::parse(r.body).at("prompt").get<std::string>();
  if (text != nullptr) *text = s;
  return !s.empty();  // HF decode drops ids the tokenizer does not know
}

void ServerBenchTokenizer::probe_vocab() {
  // Largest id that decodes to text: binary search (ids below it all decode to something).
  std::int64_t lo = 0, hi = 1;
  while (decodes_to_text(hi, nullptr) && hi < (std::int64_t{1} << 30)) hi *= 2;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (decodes_to_text(mid, nullptr) ? lo : hi) = mid;
  }
  // Then peel off the trailing added tokens: "<...>" texts that tokenize to exactly that id.
  std::int64_t end = lo + 1;
  special_ids_.clear();
  while (end > 1) {
    std::string text;
    if (!decodes_to_text(end - 1, &text) || text.size() < 3 || text.front() != '<' || text.back() != '>') break;
    const auto ids = tokenize(text, false);
    if (ids.size() != 1 || ids[0] != end - 1) break;
    special_ids_.push_back(static_cast<std::int32_t>(end - 1));
    --end;
  }
  vocab_size_ = end;
}

std::int64_t ServerBenchTokenizer::vocab_size() {
  if (vocab_size_ < 0) probe_vocab();
  return vocab_size_;
}

std::vector<std::int32_t> ServerBenchTokenizer::all_special_ids() {
  if (vocab_size_ < 0) probe_vocab();
  return special_ids_;
}

}  // namespace fp4serve::tools::bench
