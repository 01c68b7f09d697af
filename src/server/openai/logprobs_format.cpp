#include "server/openai/logprobs_format.h"

#include <algorithm>
#include <vector>

#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {

namespace {

using Json = nlohmann::ordered_json;

double clamp_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

// The per-token dict in vLLM's order: the sampled token, then the top tokens not yet in it.
std::vector<engine::TokenLogprob> ordered_entries(int32_t sampled_id, const engine::SampleLogprobs& s) {
  std::vector<engine::TokenLogprob> out;
  out.push_back(engine::TokenLogprob{sampled_id, s.sampled.logprob});
  for (const auto& t : s.top) {
    if (t.token != sampled_id) out.push_back(t);
  }
  return out;
}

Json utf8_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (const char c : text) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

}  // namespace

std::string logprob_token_text(const tokenizer::Tokenizer& tokenizer, int32_t id, bool as_token_id) {
  if (as_token_id) return "token_id:" + std::to_string(id);
  const int32_t ids[1] = {id};
  return tokenizer.decode(std::span<const int32_t>(ids, 1), /*skip_special_tokens=*/false);
}

int64_t text_offset_length(const std::string& token_text) {
  return static_cast<int64_t>(py_len(token_text));
}

void append_logprob_refs(std::vector<const engine::SampleLogprobs*>& out,
                         std::span<const engine::SampleLogprobs> logprobs) {
  for (const auto& lp : logprobs) out.push_back(&lp);
}

void append_logprob_refs(std::vector<const engine::SampleLogprobs*>& out, const engine::PromptLogprobs& logprobs) {
  for (const auto& lp : logprobs) out.push_back(lp ? &*lp : nullptr);
}

Json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer, std::span<const int32_t> token_ids,
                              std::span<const engine::SampleLogprobs> logprobs, int64_t num_top,
                              int64_t initial_text_offset, bool as_token_id) {
  std::vector<const engine::SampleLogprobs*> refs;
  append_logprob_refs(refs, logprobs);
  return completion_logprobs_json(tokenizer, token_ids, refs, num_top, initial_text_offset, as_token_id);
}

Json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer, std::span<const int32_t> token_ids,
                              std::span<const engine::SampleLogprobs* const> logprobs, int64_t num_top,
                              int64_t initial_text_offset, bool as_token_id) {
  Json text_offset = Json::array(), token_logprobs = Json::array(), tokens = Json::array(),
       top_logprobs = Json::array();
  int64_t last_len = 0;
  for (std::size_t i = 0; i < token_ids.size(); ++i) {
    const int32_t id = token_ids[i];
    const std::string token = logprob_token_text(tokenizer, id, as_token_id);
    if (i < logprobs.size() && logprobs[i] != nullptr) {
      tokens.push_back(token);
      token_logprobs.push_back(clamp_logprob(logprobs[i]->sampled.logprob));
      Json top = Json::object();
      const auto entries = ordered_entries(id, *logprobs[i]);
      for (std::size_t k = 0; k < entries.size(); ++k) {
        if (static_cast<int64_t>(k) > num_top) break;  // "num_output_top_logprobs >= i"
        top[logprob_token_text(tokenizer, entries[k].token, as_token_id)] = clamp_logprob(entries[k].logprob);
      }
      top_logprobs.push_back(std::move(top));
    } else {
      tokens.push_back(token);
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
    }
    text_offset.push_back(text_offset.empty() ? initial_text_offset : text_offset.back().get<int64_t>() + last_len);
    last_len = text_offset_length(token);
  }
  Json out = Json::object();
  out["text_offset"] = std::move(text_offset);
  out["token_logprobs"] = std::move(token_logprobs);
  out["tokens"] = std::move(tokens);
  out["top_logprobs"] = std::move(top_logprobs);
  return out;
}

Json prompt_logprobs_json(const tokenizer::Tokenizer& tokenizer, const engine::PromptLogprobs& logprobs) {
  Json out = Json::array();
  for (const auto& entry : logprobs) {
    if (!entry) {
      out.push_back(nullptr);
      continue;
    }
    // vLLM builds {token: rank, top-N: 1..N} in one dict: a token that is also in the top-N keeps
    // its first place and takes its top-N rank.
    const int32_t id = entry->sampled.token;
    int64_t rank = entry->sampled_rank;
    for (std::size_t k = 0; k < entry->top.size(); ++k) {
      if (entry->top[k].token == id) rank = static_cast<int64_t>(k) + 1;
    }
    auto logprob_json = [&](int32_t token, float logprob, int64_t r) {
      Json lp = Json::object();
      lp["logprob"] = clamp_logprob(logprob);
      lp["rank"] = r;
      lp["decoded_token"] = logprob_token_text(tokenizer, token, false);
      return lp;
    };
    Json dict = Json::object();
    dict[std::to_string(id)] = logprob_json(id, entry->sampled.logprob, rank);
    for (std::size_t k = 0; k < entry->top.size(); ++k) {
      const engine::TokenLogprob& t = entry->top[k];
      if (t.token == id) continue;
      dict[std::to_string(t.token)] = logprob_json(t.token, t.logprob, static_cast<int64_t>(k) + 1);
    }
    out.push_back(std::move(dict));
  }
  return out;
}

Json chat_logprobs_json(const tokenizer::Tokenizer& tokenizer, std::span<const int32_t> token_ids,
                        std::span<const engine::SampleLogprobs> logprobs, int64_t top_logprobs,
                        bool as_token_id) {
  Json content = Json::array();
  for (std::size_t i = 0; i < token_ids.size(); ++i) {
    const int32_t id = token_ids[i];
    const std::string token = logprob_token_text(tokenizer, id, as_token_id);
    Json entry = Json::object();
    entry["token"] = token;
    if (i >= logprobs.size()) {
      entry["logprob"] = -9999.0;
      entry["bytes"] = utf8_bytes(token);
      entry["top_logprobs"] = Json::array();
      content.push_back(std::move(entry));
      continue;
    }
    entry["logprob"] = clamp_logprob(logprobs[i].sampled.logprob);
    // vLLM encodes the decoded text (not the raw token bytes), so the bytes of a partial UTF-8
    // token are those of U+FFFD.
    entry["bytes"] = utf8_bytes(logprob_token_text(tokenizer, id, false));
    Json top = Json::array();
    const auto entries = ordered_entries(id, logprobs[i]);
    for (std::size_t k = 0; k < entries.size(); ++k) {
      if (top_logprobs != -1 && static_cast<int64_t>(k) >= top_logprobs) break;
      const std::string t = logprob_token_text(tokenizer, entries[k].token, as_token_id);
      Json e = Json::object();
      e["token"] = t;
      e["logprob"] = clamp_logprob(entries[k].logprob);
      e["bytes"] = utf8_bytes(t);
      top.push_back(std::move(e));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  Json out = Json::object();
  out["content"] = std::move(content);
  return out;
}

}  // namespace fp4serve::server::openai
