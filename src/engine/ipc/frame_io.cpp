#include "engine/ipc/frame_io.h"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace fp4serve::engine::ipc {
namespace {

bool write_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    // MSG_NOSIGNAL: a dead peer is an error return, not a SIGPIPE that ends the server.
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool write_frame(int fd, const std::vector<std::uint8_t>& payload) {
  if (payload.size() > kMaxFrameBytes) return false;
  const auto len = static_cast<std::uint32_t>(payload.size());
  std::vector<std::uint8_t> frame(4 + payload.size());
  for (int i = 0; i < 4; ++i) frame[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(len >> (8 * i));
  std::copy(payload.begin(), payload.end(), frame.begin() + 4);
  return write_all(fd, frame.data(), frame.size());
}

std::optional<std::vector<std::uint8_t>> read_frame(int fd) {
  std::uint8_t head[4];
  if (!read_all(fd, head, 4)) return std::nullopt;
  std::uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<std::uint32_t>(head[i]) << (8 * i);
  if (len > kMaxFrameBytes) return std::nullopt;
  std::vector<std::uint8_t> payload(len);
  if (!read_all(fd, payload.data(), len)) return std::nullopt;
  return payload;
}

bool write_message(int fd, const nlohmann::json& message) { return write_frame(fd, nlohmann::json::to_msgpack(message)); }

std::optional<nlohmann::json> read_message(int fd) {
  auto frame = read_frame(fd);
  if (!frame) return std::nullopt;
  nlohmann::json j = nlohmann::json::from_msgpack(*frame, true, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace fp4serve::engine::ipc
