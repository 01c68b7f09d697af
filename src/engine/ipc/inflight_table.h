// The front-end's record of every request it has handed to the engine process and not yet seen
// finish: the request as submitted, its output channel, and per sequence what has been sent to the
// channel (tokens, text bytes, finished). When the engine process dies, this is what is resubmitted
// (resumable()): each request with its prompt plus the tokens already sent, so that the client's
// stream continues where it stopped. Not thread-safe: the owner locks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace fp4serve::engine::ipc {

struct InflightRequest {
  EngineRequest request;  // as first submitted (without its notifier: that lives on the channel)
  std::shared_ptr<OutputChannel> channel;
  std::map<int, ResumedSequence> sent;  // by sequence index
  // The engine's answer to the last submission: pending until its ack arrives.
  enum class Ack { kPending, kAccepted, kRejected } ack = Ack::kPending;
  EngineRejected::Reason reject_reason = EngineRejected::Reason::kInvalid;
  std::string reject_message;
  bool cancelled = false;  // the client went away: aborted, never resumed
};

class InflightTable {
 public:
  InflightRequest& add(EngineRequest request, std::shared_ptr<OutputChannel> channel);
  InflightRequest* find(const std::string& id);
  void remove(const std::string& id);
  // Notes what `out` sends (tokens, text, finished sequences) and returns the channel it goes to;
  // the request leaves the table with its last output. Null for an unknown request.
  std::shared_ptr<OutputChannel> record(const RequestOutput& out);
  // Takes the cancelled requests out, each with the final "abort" output its channel still needs
  // (their engine died before confirming the abort).
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> take_cancelled();
  // The requests to submit to a new engine, in arrival order, each carrying what was already sent
  // (EngineRequest::resumed). Their acks stay as they were: a request already accepted that the new
  // engine refuses ends with an error; one still pending is answered to its submitter.
  std::vector<EngineRequest> resumable();
  // Takes every request out, each with a final error output (the engine is gone for good).
  std::vector<std::pair<std::shared_ptr<OutputChannel>, RequestOutput>> take_all(const std::string& error,
                                                                                 bool is_shutdown);
  std::size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<std::string, std::unique_ptr<InflightRequest>> entries_;
};

// The final output of a request that ends without its engine: every unfinished sequence gets
// `finish_reason` ("abort"), and the output carries `error` when one is given.
RequestOutput final_output(const InflightRequest& r, const std::string& finish_reason,
                           const std::optional<std::string>& error, bool is_shutdown);

}  // namespace fp4serve::engine::ipc
