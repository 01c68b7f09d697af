// vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py) on its own thread: the engine thread
// only hands a batch over (publish() never blocks the step); the publisher thread encodes it, sends
// it on the PUB socket as three frames
//   [topic (UTF-8), sequence (uint64, 8 bytes big-endian, from 0), payload (kv_event_encoding.h)]
// and keeps the last buffer_steps payloads for the replay ROUTER socket. A replay request is one
// frame after the REQ/DEALER delimiter: the first wanted sequence, 8 bytes big-endian; the answer
// is one message per buffered batch at or after it, [topic, sequence, payload], then the end
// marker ["", -1 as 8 signed big-endian bytes, ""] (vLLM since the replay topic fix).
//
// Endpoints follow vLLM's rule: the PUB socket binds when the endpoint holds "*" or "::" or is
// ipc:// or inproc://, and connects otherwise; the replay socket always binds.
//
// Where vLLM's queue.put() would block the scheduler when max_queue_size batches wait, this one drops
// the batch (logged, counted). The sequence number is taken when the batch is handed over, so a
// dropped batch is a gap a subscriber sees.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "engine/kv_events.h"

namespace fp4serve::engine {

class KvEventPublisher {
 public:
  // Binds (or connects) the sockets and starts the thread; EngineConfigError when an endpoint
  // cannot be used (the message names it and ZeroMQ's reason).
  explicit KvEventPublisher(const KvEventsConfig& config, int data_parallel_rank = 0);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues a batch (data_parallel_rank filled in when unset); false when it was dropped.
  bool publish(KvEventBatch batch);
  // Sends what is queued (at most about a second), then stops the thread and closes the sockets.
  void shutdown();

  std::uint64_t num_published() const;
  std::uint64_t num_dropped() const;
  // The address the PUB socket is bound to (tcp://*:0 becomes the port it got), for logs and tests.
  const std::string& pub_address() const { return pub_address_; }
  const std::string& replay_address() const { return replay_address_; }

 private:
  struct Sockets;
  void run();

  KvEventsConfig config_;
  int data_parallel_rank_;
  std::unique_ptr<Sockets> sockets_;
  std::string pub_address_, replay_address_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::uint64_t, KvEventBatch>> queue_;  // under mu_
  std::uint64_t next_seq_ = 0;                                 // under mu_
  std::uint64_t published_ = 0, dropped_ = 0;                  // under mu_
  bool stopping_ = false;                                      // under mu_
  std::thread thread_;
};

}  // namespace fp4serve::engine
