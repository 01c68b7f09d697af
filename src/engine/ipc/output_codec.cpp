#include "engine/ipc/output_codec.h"

namespace fp4serve::engine::ipc {
namespace {

using nlohmann::json;

json encode_token(const TokenLogprob& t) { return json::array({t.token, t.logprob}); }
TokenLogprob decode_token(const json& j) { return {j.at(0).get<int32_t>(), j.at(1).get<float>()}; }

json encode_sample(const SampleLogprobs& s) {
  json top = json::array();
  for (const TokenLogprob& t : s.top) top.push_back(encode_token(t));
  return json{{"sampled", encode_token(s.sampled)}, {"rank", s.sampled_rank}, {"top", std::move(top)}};
}

SampleLogprobs decode_sample(const json& j) {
  SampleLogprobs s;
  s.sampled = decode_token(j.at("sampled"));
  s.sampled_rank = j.at("rank").get<int64_t>();
  for (const json& t : j.at("top")) s.top.push_back(decode_token(t));
  return s;
}

// StopReason: null, a string, or an integer token id.
json encode_stop_reason(const StopReason& r) {
  if (const auto* s = std::get_if<std::string>(&r)) return *s;
  if (const auto* id = std::get_if<std::int64_t>(&r)) return *id;
  return nullptr;
}

StopReason decode_stop_reason(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  return std::monostate{};
}

json encode_delta(const SequenceDelta& d) {
  json lps = json::array();
  for (const SampleLogprobs& s : d.logprobs) lps.push_back(encode_sample(s));
  json prompt = nullptr;
  if (d.prompt_logprobs) {
    prompt = json::array();
    for (const auto& p : *d.prompt_logprobs) prompt.push_back(p ? encode_sample(*p) : json(nullptr));
  }
  return json{{"index", d.index},       {"tokens", d.token_ids},
              {"text", d.text},         {"logprobs", std::move(lps)},
              {"prompt_logprobs", std::move(prompt)}, {"finish_reason", d.finish_reason},
              {"stop_reason", encode_stop_reason(d.stop_reason)}};
}

SequenceDelta decode_delta(const json& j) {
  SequenceDelta d;
  d.index = j.at("index").get<int>();
  d.token_ids = j.at("tokens").get<std::vector<std::int32_t>>();
  d.text = j.at("text").get<std::string>();
  for (const json& s : j.at("logprobs")) d.logprobs.push_back(decode_sample(s));
  if (const json& p = j.at("prompt_logprobs"); !p.is_null()) {
    d.prompt_logprobs.emplace();
    for (const json& e : p) d.prompt_logprobs->push_back(e.is_null() ? std::nullopt : std::optional(decode_sample(e)));
  }
  d.finish_reason = j.at("finish_reason").get<std::string>();
  d.stop_reason = decode_stop_reason(j.at("stop_reason"));
  return d;
}

}  // namespace

json encode_request_output(const RequestOutput& out) {
  json deltas = json::array();
  for (const SequenceDelta& d : out.deltas) deltas.push_back(encode_delta(d));
  return json{{"id", out.request_id},
              {"deltas", std::move(deltas)},
              {"num_prompt_tokens", out.num_prompt_tokens},
              {"num_cached_tokens", out.num_cached_tokens},
              {"finished", out.finished},
              {"error", out.error ? json(*out.error) : json(nullptr)},
              {"error_is_shutdown", out.error_is_shutdown}};
}

RequestOutput decode_request_output(const json& j) {
  RequestOutput out;
  out.request_id = j.at("id").get<std::string>();
  for (const json& d : j.at("deltas")) out.deltas.push_back(decode_delta(d));
  out.num_prompt_tokens = j.at("num_prompt_tokens").get<int>();
  out.num_cached_tokens = j.at("num_cached_tokens").get<int>();
  out.finished = j.at("finished").get<bool>();
  if (!j.at("error").is_null()) out.error = j.at("error").get<std::string>();
  out.error_is_shutdown = j.at("error_is_shutdown").get<bool>();
  return out;
}

}  // namespace fp4serve::engine::ipc
