// What the random dataset needs from a tokenizer (vLLM calls the HF tokenizer for these):
// encode without special tokens, decode, vocab_size (HF: the base vocabulary, added tokens not
// counted), all_special_ids and num_special_tokens_to_add.
//  - LocalBenchTokenizer: tokenizer files on disk (--tokenizer DIR), through fp4serve's own
//    tokenizer, which matches HF id for id.
//  - ServerBenchTokenizer: no files; asks the server's /tokenize and /detokenize.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/http_client.h"

namespace fp4serve::tokenizer {
class Tokenizer;
}

namespace fp4serve::tools::bench {

class BenchTokenizer {
 public:
  virtual ~BenchTokenizer() = default;
  virtual std::vector<std::int32_t> encode(const std::string& text) = 0;  // add_special_tokens=False
  virtual std::string decode(const std::vector<std::int32_t>& ids) = 0;    // skip_special_tokens=False
  virtual std::int64_t vocab_size() = 0;
  virtual std::vector<std::int32_t> all_special_ids() = 0;
  virtual int num_special_tokens_to_add() = 0;
};

class LocalBenchTokenizer : public BenchTokenizer {
 public:
  explicit LocalBenchTokenizer(const std::string& path);
  ~LocalBenchTokenizer() override;
  std::vector<std::int32_t> encode(const std::string& text) override;
  std::string decode(const std::vector<std::int32_t>& ids) override;
  std::int64_t vocab_size() override;
  std::vector<std::int32_t> all_special_ids() override;
  int num_special_tokens_to_add() override { return 0; }  // ByteLevel post-processor adds none

 private:
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

class ServerBenchTokenizer : public BenchTokenizer {
 public:
  ServerBenchTokenizer(BaseUrl base, std::string model, HeaderMap headers);
  std::vector<std::int32_t> encode(const std::string& text) override;
  std::string decode(const std::vector<std::int32_t>& ids) override;
  // Found by probing /detokenize: the number of ids that decode to text, less the trailing run of
  // added tokens ("<...>" that tokenize back to themselves alone). Cached.
  std::int64_t vocab_size() override;
  std::vector<std::int32_t> all_special_ids() override;
  int num_special_tokens_to_add() override;

 private:
  std::vector<std::int32_t> tokenize(const std::string& text, bool add_special_tokens);
  bool decodes_to_text(std::int64_t id, std::string* text);
  void probe_vocab();

  BaseUrl base_;
  std::string model_;
  HeaderMap headers_;
  std::int64_t vocab_size_ = -1;
  std::vector<std::int32_t> special_ids_;
};

}  // namespace fp4serve::tools::bench
