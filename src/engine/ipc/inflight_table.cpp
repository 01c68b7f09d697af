#include "engine/ipc/inflight_table.h"

#include <algorithm>

namespace fp4serve::engine::ipc {

InflightRequest& InflightTable::add(EngineRequest request, std::shared_ptr<OutputChannel> channel) {
  auto e = std::make_unique<InflightRequest>();
  request.notifier = nullptr;
  e->request = std::move(request);
  e->channel = std::move(channel);
  InflightRequest& ref = *e;
  entries_[ref.request.id] = std::move(e);
  return ref;
}

InflightRequest* InflightTable::find(const std::string& id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}

void InflightTable::remove(const std::string& id) { entries_.erase(id); }

std::shared_ptr<OutputChannel> InflightTable::record(const RequestOutput& out) {
  auto it = entries_.find(out.request_id);
  if (it == entries_.end()) return nullptr;
  InflightRequest& r = *it->second;
  for (const SequenceDelta& d : out.deltas) {
    ResumedSequence& s = r.sent[d.index];
    s.index = d.index;
    s.token_ids.insert(s.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    s.text_bytes += d.text.size();
    if (d.finished()) s.finished = true;
  }
  std::shared_ptr<OutputChannel> channel = r.channel;
  if (out.finished) entries_.erase(it);
  return channel;
}

RequestOutput final_output(const InflightRequest& r, const std::string& finish_reason,
                           const std::optional<std::string>& error, bool is_shutdown) {
  RequestOutput out;
  out.request_id = r.request.id;
  out.num_prompt_tokens = static_cast<int>(r.request.prompt_token_ids.size());
  out.finished = true;
  out.error = error;
  out.error_is_shutdown = is_shutdown;
  const int n = static_cast<int>(std::max<std::int64_t>(1, r.request.params.n));
  for (int i = 0; i < n; ++i) {
    auto it = r.sent.find(i);
    if (it != r.sent.end() && it->second.finished) continue;
    SequenceDelta d;
    d.index = i;
    d.finish_reason = finish_reason;
    out.deltas.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> InflightTable::take_cancelled() {
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second->cancelled) {
      out.emplace_back(it->second->channel, final_output(*it->second, "abort", std::nullopt, false));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<EngineRequest> InflightTable::resumable() {
  std::vector<InflightRequest*> live;
  for (auto& [id, e] : entries_)
    if (!e->cancelled) live.push_back(e.get());
  std::sort(live.begin(), live.end(), [](const InflightRequest* a, const InflightRequest* b) {
    return a->request.arrival_time < b->request.arrival_time;
  });
  std::vector<EngineRequest> out;
  for (InflightRequest* e : live) {
    EngineRequest r = e->request;
    r.resumed.clear();
    for (const auto& [index, s] : e->sent)
      if (!s.token_ids.empty() || s.finished) r.resumed.push_back(s);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> InflightTable::take_all(
    const std::string& error, bool is_shutdown) {
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> out;
  for (auto& [id, e] : entries_)
    out.emplace_back(e->channel, final_output(*e, "abort", e->cancelled ? std::nullopt : std::optional(error),
                                              is_shutdown));
  entries_.clear();
  return out;
}

}  // namespace fp4serve::engine::ipc
