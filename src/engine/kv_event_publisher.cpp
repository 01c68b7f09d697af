#include "engine/kv_event_publisher.h"

#include <array>
#include <chrono>
#include <iterator>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "engine/engine_error.h"
#include "engine/kv_event_encoding.h"

namespace fp4serve::engine {

namespace {

constexpr auto kShutdownTimeout = std::chrono::seconds(1);  // vLLM SHUTDOWN_TIMEOUT

std::array<unsigned char, 8> big_endian(std::uint64_t v) {
  std::array<unsigned char, 8> b{};
  for (int i = 7; i >= 0; --i, v >>= 8) b[static_cast<std::size_t>(i)] = static_cast<unsigned char>(v & 0xff);
  return b;
}

// Python's int.from_bytes(frame, "big"), saturated: a start past every sequence replays nothing.
std::uint64_t from_big_endian(const zmq::message_t& m) {
  std::uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (v >> 56) return UINT64_MAX;
    v = (v << 8) | p[i];
  }
  return v;
}

// vLLM's heuristic (ZmqEventPublisher._socket_setup): bind a stable address, connect otherwise.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::unique_ptr<zmq::socket_t> replay;
  std::deque<std::pair<std::uint64_t, std::string>> buffer;  // publisher thread only
};

KvEventPublisher::KvEventPublisher(const KvEventsConfig& config, int data_parallel_rank)
    : config_(config), data_parallel_rank_(data_parallel_rank), sockets_(std::make_unique<Sockets>()) {
  Sockets& s = *sockets_;
  const std::string flag = "--kv-events-config";
  try {
    // pyzmq's set_hwm sets both directions.
    s.pub.set(zmq::sockopt::sndhwm, config.hwm);
    s.pub.set(zmq::sockopt::rcvhwm, config.hwm);
    s.pub.set(zmq::sockopt::linger, 0);
    if (binds(config.endpoint)) {
      s.pub.bind(config.endpoint);
      pub_address_ = s.pub.get(zmq::sockopt::last_endpoint);
    } else {
      s.pub.connect(config.endpoint);
      pub_address_ = config.endpoint;
    }
  } catch (const zmq::error_t& e) {
    throw EngineConfigError(fmt::format("{}: endpoint '{}': {}", flag, config.endpoint, e.what()));
  }
  if (config.replay_endpoint) {
    try {
      s.replay = std::make_unique<zmq::socket_t>(s.ctx, zmq::socket_type::router);
      s.replay->set(zmq::sockopt::linger, 0);
      s.replay->bind(*config.replay_endpoint);
      replay_address_ = s.replay->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      throw EngineConfigError(fmt::format("{}: replay_endpoint '{}': {}", flag, *config.replay_endpoint, e.what()));
    }
  }
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() { shutdown(); }

bool KvEventPublisher::publish(KvEventBatch batch) {
  if (!batch.data_parallel_rank) batch.data_parallel_rank = data_parallel_rank_;
  std::uint64_t seq = 0, dropped = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    seq = next_seq_++;
    if (queue_.size() >= static_cast<std::size_t>(config_.max_queue_size)) {
      dropped = ++dropped_;
    } else {
      queue_.emplace_back(seq, std::move(batch));
    }
  }
  if (dropped > 0) {
    // Powers of two only: a stuck subscriber side must not flood the log from the engine thread.
    if ((dropped & (dropped - 1)) == 0)
      spdlog::warn("KV events: publisher queue full ({} batches): batch {} dropped ({} so far)",
                   config_.max_queue_size, seq, dropped);
    return false;
  }
  cv_.notify_one();
  return true;
}

void KvEventPublisher::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  sockets_->replay.reset();
  sockets_->pub.close();
}

std::uint64_t KvEventPublisher::num_published() const {
  std::lock_guard lock(mu_);
  return published_;
}

std::uint64_t KvEventPublisher::num_dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void KvEventPublisher::run() {
  Sockets& s = *sockets_;
  const std::string& topic = config_.topic;
  std::chrono::steady_clock::time_point deadline{};
  auto serve_replay = [&] {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*s.replay, std::back_inserter(frames), zmq::recv_flags::dontwait)) return false;
    if (frames.size() != 3) {
      spdlog::warn("KV events: invalid replay request of {} frames (want identity, empty, start sequence)",
                   frames.size());
      return true;
    }
    const std::uint64_t start = from_big_endian(frames[2]);
    const std::string client(static_cast<const char*>(frames[0].data()), frames[0].size());
    // A slow or vanished client: ROUTER drops what it cannot deliver instead of blocking.
    for (const auto& [seq, payload] : s.buffer) {
      if (seq < start) continue;
      const auto seq_bytes = big_endian(seq);
      std::array<zmq::const_buffer, 5> msg = {zmq::buffer(client), zmq::const_buffer(), zmq::buffer(topic),
                                              zmq::buffer(seq_bytes), zmq::buffer(payload)};
      zmq::send_multipart(*s.replay, msg, zmq::send_flags::dontwait);
    }
    const auto end_seq = big_endian(UINT64_MAX);  // -1 as a signed 8-byte integer
    std::array<zmq::const_buffer, 5> end = {zmq::buffer(client), zmq::const_buffer(), zmq::const_buffer(),
                                            zmq::buffer(end_seq), zmq::const_buffer()};
    zmq::send_multipart(*s.replay, end, zmq::send_flags::dontwait);
    return true;
  };
  while (true) {
    try {
      if (s.replay) {
        while (serve_replay()) {
        }
      }
    } catch (const zmq::error_t& e) {
      spdlog::error("KV events: replay request failed: {}", e.what());
    }
    std::pair<std::uint64_t, KvEventBatch> item;
    {
      std::unique_lock lock(mu_);
      // With a replay socket the thread wakes now and then to answer it (as vLLM polls every 0.1 s).
      const auto tick = s.replay ? std::chrono::milliseconds(20) : std::chrono::milliseconds(200);
      cv_.wait_for(lock, tick, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && deadline == std::chrono::steady_clock::time_point{})
        deadline = std::chrono::steady_clock::now() + kShutdownTimeout;
      if (queue_.empty() || (stopping_ && std::chrono::steady_clock::now() > deadline)) {
        if (stopping_) {
          if (!queue_.empty())
            spdlog::warn("KV events: {} batches still queued after {} s at shutdown", queue_.size(),
                         kShutdownTimeout.count());
          break;
        }
        continue;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      std::string payload = encode_kv_event_batch(item.second);
      const auto seq_bytes = big_endian(item.first);
      std::array<zmq::const_buffer, 3> msg = {zmq::buffer(topic), zmq::buffer(seq_bytes), zmq::buffer(payload)};
      // PUB never blocks: past the high-water mark a slow subscriber loses messages (and sees the gap).
      zmq::send_multipart(s.pub, msg, zmq::send_flags::dontwait);
      if (config_.buffer_steps > 0) {
        if (s.buffer.size() >= static_cast<std::size_t>(config_.buffer_steps)) s.buffer.pop_front();
        s.buffer.emplace_back(item.first, std::move(payload));
      }
      std::lock_guard lock(mu_);
      ++published_;
    } catch (const std::exception& e) {
      spdlog::error("KV events: publishing batch {} failed: {}", item.first, e.what());
    }
  }
}

}  // namespace fp4serve::engine
